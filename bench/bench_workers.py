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
per-call latency of each setup and their difference (target <= 0.5 ms), the throughput ratio
(target >= 0.95x), the CPU per call of the workers and of their PostgreSQL server processes, and,
as a third side of the same interleaved rounds, the **floor**: what the shared state needs per call
at the least, measured from this process on the same server — the two statements of the guard
state (a ``SELECT`` by key and the lax guarded ``UPDATE`` of a 1 KB document), one after another:
awaited on the event loop as the pipeline runs them (``load_state_async``/``save_state_async``),
with the CPU they cost here and in their PostgreSQL server process; synchronously from one thread;
and each from a worker thread (how the pipeline ran them before). On CPUs that every process
shares, the CPU a call costs in all (workers, their PostgreSQL processes, haproxy, this generator)
sets the throughput: the floor's CPU added to the affinity setup's gives the best ratio the
stateless setup can reach (the **ceiling**).
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
from collections.abc import Callable
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


FLOOR_PAIRS = 400


def _floor(dsn: str, schema: str) -> tuple[Callable[[], float], list[tuple[float, ...]]]:
    """A side measuring the guard state's two statements per call: median ms on the event loop,
    alone from one thread, with a worker-thread hop each, and alone with a durable commit (what
    the guards paid before their namespace was made lax); then the CPU ms per pair on the loop of
    this process and of its PostgreSQL server process."""
    import anyio
    import anyio.to_thread
    import psycopg
    import uvloop
    from entropic_mcp.storage import HEURISTIC_NAMESPACES
    from entropic_mcp_postgres._backend import PostgresBackend

    lax, durable = PostgresBackend._SAVE_STATEMENTS[False]["update"], PostgresBackend._SAVE_STATEMENTS[True]["update"]
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(f"SET search_path = {schema}")
    (namespace,) = HEURISTIC_NAMESPACES
    document = {"seen": "A" * 1024, "last_key": "probe.echo#0123456789abcdef", "repeats": 0}
    value = json.dumps(document)
    conn.execute(
        "INSERT INTO states (namespace, key, version, value, updated_at) VALUES ('bench.floor', 'k', 1, %s, now()) "
        "ON CONFLICT DO NOTHING",
        (value,),
    )
    params = {"namespace": "bench.floor", "key": "k", "value": value, "version": 0}
    found: list[tuple[float, ...]] = []
    store = PostgresBackend(dsn, schema=schema, pool_min=1, pool_max=2)
    store.save_state(namespace, "bench-floor", document, store.load_state(namespace, "bench-floor")[1])

    def load() -> None:
        row = conn.execute(
            "SELECT value::text, version FROM states WHERE namespace = %s AND key = %s", ("bench.floor", "k")
        ).fetchone()
        assert row is not None
        params["version"] = row[1]

    def save(update: str = lax) -> None:
        assert conn.execute(update, params).fetchone() is not None

    async def looped() -> tuple[list[float], float, float]:
        """The pairs as the pipeline awaits them, and the CPU they took in both processes."""
        async with store._on_loop("pid") as loop_conn:
            server = psutil.Process(int((await (await loop_conn.execute("SELECT pg_backend_pid()")).fetchone())[0]))
        times = []
        cpu, server_cpu = time.process_time(), sum(server.cpu_times()[:2])
        for _ in range(FLOOR_PAIRS):
            started = time.perf_counter()
            loaded, version = await store.load_state_async(namespace, "bench-floor")
            await store.save_state_async(namespace, "bench-floor", loaded, version)
            times.append(time.perf_counter() - started)
        cpu, server_cpu = time.process_time() - cpu, sum(server.cpu_times()[:2]) - server_cpu
        return times, cpu / FLOOR_PAIRS * 1000, server_cpu / FLOOR_PAIRS * 1000

    async def pairs() -> tuple[list[float], list[float], list[float]]:
        alone, hopped, flushed = [], [], []
        for _ in range(FLOOR_PAIRS):
            started = time.perf_counter()
            load()
            save(durable)
            flushed.append(time.perf_counter() - started)
            started = time.perf_counter()
            load()
            save()
            alone.append(time.perf_counter() - started)
            started = time.perf_counter()
            await anyio.to_thread.run_sync(load)
            await anyio.to_thread.run_sync(save)
            hopped.append(time.perf_counter() - started)
        return alone, hopped, flushed

    def run() -> float:
        started = time.perf_counter()
        on_loop, cpu, server_cpu = uvloop.run(looped())
        alone, hopped, flushed = anyio.run(pairs)
        medians = (statistics.median(t) * 1000 for t in (on_loop, alone, hopped, flushed))
        found.append((*medians, cpu, server_cpu))
        return time.perf_counter() - started

    return run, found


def _store_processes(dsn: str, workers: list[psutil.Process]) -> list[psutil.Process]:
    """The PostgreSQL server processes serving ``workers``' connections (matched by client port)."""
    import psycopg

    ports = [c.laddr.port for w in workers for c in w.net_connections("tcp") if c.raddr and c.raddr.port == 5432]
    with psycopg.connect(dsn, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s)", (ports,))]
    return [psutil.Process(pid) for pid in pids]


def _cpu(processes: list[psutil.Process]) -> dict[int, float]:
    out = {}
    for process in processes:
        try:
            out[process.pid] = sum(process.cpu_times()[:2])
        except psutil.NoSuchProcess:
            continue
    return out


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
                setups[name] = {
                    "port": port,
                    "workers": [psutil.Process(p.pid) for p, _ in workers],
                    "proxy": psutil.Process(proxy.pid),
                }
            time.sleep(1.5)  # the first health checks
            results: dict[str, list[tuple[float, ...]]] = {name: [] for name in setups}
            counter = iter(range(1_000_000))

            def side(name: str):
                def run() -> float:
                    setup = setups[name]
                    procs = setup["workers"]
                    store = _store_processes(dsn, procs)  # type: ignore[arg-type]
                    before = sum(sum(p.cpu_times()[:2]) for p in procs)  # type: ignore[attr-defined]
                    store_before = _cpu(store)
                    proxy_before = sum(setup["proxy"].cpu_times()[:2])  # type: ignore[attr-defined]
                    generator_before = time.process_time()
                    tag = f"{name}-{next(counter)}-{secrets.token_hex(3)}"
                    latencies, elapsed, errors = asyncio.run(
                        _load(setup["port"], args.conversations, args.calls, tag)  # type: ignore[arg-type]
                    )
                    generator_ms = (time.process_time() - generator_before) / len(latencies) * 1000
                    after = sum(sum(p.cpu_times()[:2]) for p in procs)  # type: ignore[attr-defined]
                    store_after = _cpu(store)
                    proxy_ms = (sum(setup["proxy"].cpu_times()[:2]) - proxy_before) / len(latencies) * 1000  # type: ignore[attr-defined]
                    cpu_ms = (after - before) / len(latencies) * 1000
                    store_ms = sum(store_after[pid] - store_before[pid] for pid in store_after) / len(latencies) * 1000
                    total_ms = cpu_ms + store_ms + proxy_ms + generator_ms
                    results[name].append(
                        (statistics.median(latencies), len(latencies) / elapsed, cpu_ms, errors, store_ms, total_ms)
                    )
                    return elapsed

                return run

            floor, floors = _floor(dsn, schema)
            for name in setups:  # one warm-up round each, not counted
                side(name)()
            floor()
            results = {name: [] for name in setups}
            floors.clear()
            interleaved({**{name: side(name) for name in setups}, "floor": floor}, args.rounds)
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
    store_cpu = {name: med(name, 4) for name in results}
    total_cpu = {name: med(name, 5) for name in results}
    floor_loop, floor_alone, floor_hopped, floor_durable, floor_cpu, floor_server_cpu = (
        statistics.median(f[i] for f in floors) for i in range(6)
    )
    floor_all = floor_cpu + floor_server_cpu
    ceiling = total_cpu["affinity"] / (total_cpu["affinity"] + floor_all)
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
        f"  PostgreSQL CPU per call: stateless {store_cpu['stateless']:.2f} ms, affinity {store_cpu['affinity']:.2f} ms\n"
        f"  CPU per call in all (workers, PostgreSQL, haproxy, generator): stateless {total_cpu['stateless']:.2f} ms, "
        f"affinity {total_cpu['affinity']:.2f} ms\n"
        f"  floor: the guard state's SELECT + lax UPDATE on the event loop {floor_loop:.3f} ms, CPU {floor_cpu:.3f} ms "
        f"here + {floor_server_cpu:.3f} ms in PostgreSQL; from one thread {floor_alone:.3f} ms; each from a worker "
        f"thread {floor_hopped:.3f} ms; with a durable commit {floor_durable:.3f} ms\n"
        f"  ceiling: affinity's CPU per call + the floor's -> at most {ceiling:.2f}x affinity's throughput\n"
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
                    "ours": f"stateless {latency['stateless']:.2f} ms; CPU per call: workers "
                    f"{cpu['stateless']:.2f} against {cpu['affinity']:.2f} ms, their PostgreSQL processes "
                    f"{store_cpu['stateless']:.2f} against {store_cpu['affinity']:.2f} ms",
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
                {
                    "id": "P17",
                    "what": "floor, the same rounds: what the shared state needs per call at the least — the guard "
                    "state's two statements (a `SELECT` by key, the lax guarded `UPDATE` of a 1 KB document) one "
                    f"after another from one client on the same server, {FLOOR_PAIRS} pairs a round, awaited on the "
                    "event loop as the pipeline does (`load_state_async`/`save_state_async`)",
                    "peer": "—",
                    "ours": f"{floor_loop:.3f} ms on the loop, CPU {floor_cpu:.3f} ms in the client + "
                    f"{floor_server_cpu:.3f} ms in PostgreSQL; {floor_alone:.3f} ms from one thread; "
                    f"{floor_hopped:.3f} ms with each from a worker thread; {floor_durable:.3f} ms with a durable commit",
                    "ratio": f"the latency difference is {overhead / floor_loop:.1f}× that floor",
                    "target": "—",
                    "met": "—",
                },
                {
                    "id": "P17",
                    "what": "throughput ceiling, the same rounds: on two cores every process shares, a call's CPU in "
                    "all (workers, their PostgreSQL processes, haproxy, the generator) sets the throughput; "
                    "affinity's plus the floor's CPU is the least a stateless call can cost",
                    "peer": f"affinity {total_cpu['affinity']:.2f} ms CPU per call in all",
                    "ours": f"stateless {total_cpu['stateless']:.2f} ms; affinity + floor "
                    f"{total_cpu['affinity'] + floor_all:.2f} ms",
                    "ratio": f"at most {ceiling:.2f}× affinity's throughput",
                    "target": "≥ 0.95× (the P17 target)",
                    "met": "yes" if ceiling >= 0.95 else "**no**: out of reach on this machine",
                },
            ],
            script="bench/bench_workers.py",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
