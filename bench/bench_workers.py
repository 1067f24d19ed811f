"""P17: what shared conversation state costs two workers behind haproxy, against affinity.

    python bench/bench_workers.py                    # 6 interleaved rounds of 8 x 150 calls
    python bench/bench_workers.py --rounds 4 --calls 100 --conversations 8

Two setups run side by side, all four workers and both haproxys up at once, on one PostgreSQL
store (``ENTROPIC_MCP_TEST_POSTGRES_DSN``, default ``postgresql://postgres@127.0.0.1:5432/test``,
a fresh schema per run), in interleaved rounds (ABAB):

* **stateless**: 2 workers, ``[storage] conversation_state = "auto"`` (the guard state of every
  conversation in the store), haproxy ``balance roundrobin``: the deployment.md recipe;
* **affinity**: 2 workers, ``conversation_state = "memory"``, haproxy ``balance hdr(...)`` on a
  conversation header, so each conversation stays on one worker and its state in that worker.

The load is a lean 2026-07-28 generator (one keep-alive connection per conversation, the
conversation in ``_meta``), so the workers, not the client, set the pace. Reported: the median
per-call latency of each setup and their difference (target <= 0.5 ms), and the throughput ratio
(target >= 0.95x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from _common import http_exchange, interleaved, load_average, record
from entropic_mcp_postgres.testing import haproxy_recipe

ROOT = Path(__file__).resolve().parent.parent
PROBE_SITE = ROOT / "tests" / "integration" / "probe_site"
ENTROPIC_MCP = Path(sys.executable).with_name("entropic-mcp")
CONVERSATION_KEY = "entropic-mcp/conversation"
HEADER = "X-Conversation"
REQUEST = (
    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n"
    "Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
    "Mcp-Name: probe_echo\r\n" + HEADER + ": {conversation}\r\nContent-Length: {length}\r\n\r\n"
)


def _env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROBE_SITE), out.get("PYTHONPATH", "")]))
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _project(where: Path, dsn: str, schema: str, state: str) -> Path:
    where.mkdir(parents=True)
    (where / "entropic-mcp.toml").write_text(
        textwrap.dedent(f"""\
        [entropic_mcp]
        plugins = ["probe", "postgres"]
        [storage]
        backend = "postgres"
        conversation_state = "{state}"
        options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)} }}
        [permissions]
        default = "allow"
        [pipeline]
        same_tool_limit = 100000000
        """),
        encoding="utf-8",
    )
    return where


def _worker(project: Path) -> tuple[subprocess.Popen[bytes], int]:
    log = project / f"worker-{time.monotonic_ns()}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(ENTROPIC_MCP), "serve", "--transport", "http", "--port", "0"],
            cwd=project,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"on http://127\.0\.0\.1:(\d+)/mcp", log.read_text(errors="replace"))
        if found:
            return process, int(found.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit(f"a worker did not start:\n{log.read_text(errors='replace')}")


def _haproxy(where: Path, ports: list[int], balance: str) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        raise SystemExit("haproxy is not installed (apt-get install haproxy)")
    port = _free_port()
    config = where / f"haproxy-{port}.cfg"
    # The recipe of docs/deployment.md; only the balance line differs between the two setups.
    config.write_text(haproxy_recipe(port, ports, balance=balance, check_every="1s"), encoding="utf-8")
    process = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, port
        except OSError:
            time.sleep(0.1)
    raise SystemExit("haproxy did not start")


async def _load(port: int, conversations: int, calls: int, tag: str) -> tuple[list[float], float, int]:
    """(per-call latencies, elapsed seconds, errors) of ``conversations`` concurrent conversations."""
    latencies: list[float] = []
    errors = 0

    async def conversation(index: int) -> None:
        nonlocal errors
        name = f"{tag}-{index}"
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench-workers", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
            CONVERSATION_KEY: name,
        }
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for i in range(calls):
                params = {"name": "probe_echo", "arguments": {"text": f"{name} call {i}"}, "_meta": meta}
                body = json.dumps(
                    {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params}, separators=(",", ":")
                ).encode()
                head = REQUEST.format(conversation=name, length=len(body)).encode()
                latency, failed = await http_exchange(reader, writer, head + body)
                latencies.append(latency)
                errors += failed
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(conversation(n) for n in range(conversations)))
    return latencies, time.perf_counter() - started, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--calls", type=int, default=150, help="calls per conversation per round")
    parser.add_argument("--no-record", action="store_true", help="print only; leave bench/results alone")
    args = parser.parse_args(argv)

    from entropic_mcp_postgres.testing import fresh_schema

    dsn = os.environ.get("ENTROPIC_MCP_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    base = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with fresh_schema(dsn, "p17") as schema:
            setups: dict[str, dict[str, object]] = {}
            for name, state, balance in (
                ("stateless", "auto", "balance roundrobin"),
                ("affinity", "memory", f"balance hdr({HEADER})\nhash-type consistent"),
            ):
                project = _project(base / name, dsn, schema, state)
                workers = [_worker(project) for _ in range(2)]
                processes.extend(p for p, _ in workers)
                proxy, port = _haproxy(base, [p for _, p in workers], balance)
                processes.append(proxy)
                setups[name] = {"port": port, "workers": [psutil.Process(p.pid) for p, _ in workers]}
            time.sleep(1.5)  # the first health checks
            results: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name in setups}
            counter = iter(range(1_000_000))

            def side(name: str):
                def run() -> float:
                    setup = setups[name]
                    procs = setup["workers"]
                    before = sum(sum(p.cpu_times()[:2]) for p in procs)  # type: ignore[attr-defined]
                    tag = f"{name}-{next(counter)}-{secrets.token_hex(3)}"
                    latencies, elapsed, errors = asyncio.run(
                        _load(setup["port"], args.conversations, args.calls, tag)  # type: ignore[arg-type]
                    )
                    after = sum(sum(p.cpu_times()[:2]) for p in procs)  # type: ignore[attr-defined]
                    cpu_ms = (after - before) / len(latencies) * 1000
                    results[name].append((statistics.median(latencies), len(latencies) / elapsed, cpu_ms, errors))
                    return elapsed

                return run

            for name in setups:  # one warm-up round each, not counted
                side(name)()
            results = {name: [] for name in setups}
            interleaved({name: side(name) for name in setups}, args.rounds)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(base, ignore_errors=True)

    def med(name: str, i: int) -> float:
        return statistics.median(r[i] for r in results[name])

    errors = sum(r[3] for found in results.values() for r in found)
    latency = {name: med(name, 0) * 1000 for name in results}
    rate = {name: med(name, 1) for name in results}
    cpu = {name: med(name, 2) for name in results}
    diffs = [(s[0] - a[0]) * 1000 for s, a in zip(results["stateless"], results["affinity"], strict=True)]
    ratios = [s[1] / a[1] for s, a in zip(results["stateless"], results["affinity"], strict=True)]
    overhead = latency["stateless"] - latency["affinity"]
    throughput = rate["stateless"] / rate["affinity"]
    load = load_average()
    print(
        f"P17 {args.rounds} interleaved rounds of {args.conversations} conversations x {args.calls} calls, load {load}\n"
        f"  median latency: stateless {latency['stateless']:.2f} ms, affinity {latency['affinity']:.2f} ms -> "
        f"+{overhead:.2f} ms (rounds {min(diffs):+.2f}..{max(diffs):+.2f}); target <= 0.5 ms\n"
        f"  throughput: stateless {rate['stateless']:.0f} call/s, affinity {rate['affinity']:.0f} call/s -> "
        f"{throughput:.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}x); target >= 0.95x\n"
        f"  worker CPU per call: stateless {cpu['stateless']:.2f} ms, affinity {cpu['affinity']:.2f} ms\n"
        f"  errors: {errors}"
    )
    if errors:
        print("errors in the load: figures not recorded", file=sys.stderr)
        return 1
    if not args.no_record:
        what = (
            f"two `serve --transport http` workers on one PostgreSQL behind haproxy, {args.conversations} "
            f"conversations x {args.calls} `probe_echo` calls a round from a lean 2026-07-28 generator, "
            f"{args.rounds} interleaved rounds (`bench_workers.py`)"
        )
        record(
            "workers-p17",
            [
                {
                    "id": "P17",
                    "what": f"per-call latency, round robin with the conversation state in the store, against affinity "
                    f"(`balance hdr`) with it in each worker's memory; {what}",
                    "peer": f"affinity {latency['affinity']:.2f} ms median",
                    "ours": f"stateless {latency['stateless']:.2f} ms; worker CPU per call "
                    f"{cpu['stateless']:.2f} against {cpu['affinity']:.2f} ms",
                    "ratio": f"+{overhead:.2f} ms (rounds {min(diffs):+.2f} to {max(diffs):+.2f} ms)",
                    "target": "≤ +0.5 ms",
                    "met": "yes" if overhead <= 0.5 else "**no**",
                },
                {
                    "id": "P17",
                    "what": "throughput, the same rounds",
                    "peer": f"affinity {rate['affinity']:.0f} call/s",
                    "ours": f"stateless {rate['stateless']:.0f} call/s",
                    "ratio": f"{throughput:.2f}× ({min(ratios):.2f}–{max(ratios):.2f}×)",
                    "target": "≥ 0.95×",
                    "met": "yes" if throughput >= 0.95 else "**no**",
                },
            ],
            script="bench/bench_workers.py",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
