"""Benchmarks of `entropic-mcp serve` against the official SDK's `MCPServer`, side by side in one run.

    python bench/bench_serve.py            # everything (a few minutes on 2 cores)
    python bench/bench_serve.py p2 p3      # a subset

P2  tools/call round trip over stdio (sequential median; throughput with 8 in flight)
P3  tools/list of 1,000 tools through an in-memory client
P5  process start -> first tools/list answered
P12 Streamable HTTP, 50 concurrent conversations (call count scaled down; printed)
P13 server RSS after 1,000 and 10,000 calls over stdio

Ours runs the whole pipeline (normalise, schema, duplicates, permissions, dispatch, envelope) on
`probe_echo` (an async echo from tests/integration/probe_site, called by the name serve lists)
with every installed first-party plugin loaded; the peer is a bare `MCPServer` with one async
echo tool.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
PROBE_SITE = ROOT / "tests" / "integration" / "probe_site"
ENTROPIC_MCP = Path(sys.executable).with_name("entropic-mcp")
FIRST_PARTY = [n for n in ("filesystem", "bash", "git", "entropic") if importlib.util.find_spec(f"entropic_mcp_{n}")]

PEER = textwrap.dedent("""\
    import sys
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("peer")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    if len(sys.argv) > 1:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        server.run()
""")


def project_dir() -> Path:
    root = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    plugins = ", ".join(f'"{n}"' for n in [*FIRST_PARTY, "probe"])
    (root / "entropic-mcp.toml").write_text(
        textwrap.dedent(f"""\
        [entropic_mcp]
        plugins = [{plugins}]
        [storage]
        backend = "none"
        [permissions]
        default = "allow"
        [pipeline]
        same_tool_limit = 100000000
        """)
    )
    (root / "peer.py").write_text(PEER)
    return root


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROBE_SITE), out.get("PYTHONPATH", "")]))
    return out


def ours_stdio(project: Path) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(command=str(ENTROPIC_MCP), args=["serve"], cwd=str(project), env=env())


def peer_stdio(project: Path) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=[str(project / "peer.py")], cwd=str(project), env=env())


def row(what: str, peer: float, ours: float, unit: str, target: str, lower_is_better: bool = True) -> None:
    ratio = ours / peer if peer else float("nan")
    print(f"  {what:<60} peer {peer:10.3f} {unit:<6} ours {ours:10.3f} {unit:<6} ratio {ratio:6.2f}  (target {target})")


# -- P2 ---------------------------------------------------------------------------------------------


async def _seq_round(client: Any, tool: str, n: int, tag: str) -> float:
    """Median ms of ``n`` sequential calls."""
    times = []
    for i in range(n):
        started = time.perf_counter()
        await client.call_tool(tool, {"text": f"seq {tag} {i}"})
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def _rate_round(client: Any, tool: str, n: int, inflight: int, tag: str) -> float:
    """Calls per second of ``n`` calls with ``inflight`` concurrent."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await client.call_tool(tool, {"text": f"par {tag} {i}"})

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(inflight):
            tg.start_soon(worker)
    return n / (time.perf_counter() - started)


async def p2(project: Path) -> None:
    """Both servers up at once; rounds alternate between them (ABAB), so both see the same load."""
    from contextlib import AsyncExitStack

    from mcp import Client

    print("P2  tools/call round trip over stdio, official client (2026-07-28), interleaved rounds")
    rounds, n = int(os.environ.get("BENCH_P2_ROUNDS", "6")), 200
    loads = [os.getloadavg()[0]]
    async with AsyncExitStack() as stack:
        sides = {
            "peer": (await stack.enter_async_context(Client(peer_stdio(project))), "echo"),
            "ours": (await stack.enter_async_context(Client(ours_stdio(project))), "probe_echo"),
        }
        # Every page listed first: a client that has not seen a tool re-lists on every call to it.
        tools = str(await _list_every_page(sides["ours"][0]))
        await _list_every_page(sides["peer"][0])
        for client, tool in sides.values():
            for i in range(50):
                await client.call_tool(tool, {"text": f"warm {i}"})
        seq: dict[str, list[float]] = {"peer": [], "ours": []}
        rate: dict[str, list[float]] = {"peer": [], "ours": []}
        for r in range(rounds):
            for name in ("peer", "ours") if r % 2 == 0 else ("ours", "peer"):
                client, tool = sides[name]
                seq[name].append(await _seq_round(client, tool, n, f"{r}"))
                rate[name].append(await _rate_round(client, tool, n, 8, f"{r}"))
    loads.append(os.getloadavg()[0])
    seq_ratio = [o / p for o, p in zip(seq["ours"], seq["peer"], strict=True)]
    rate_ratio = [o / p for o, p in zip(rate["ours"], rate["peer"], strict=True)]
    row("median round trip", statistics.median(seq["peer"]), statistics.median(seq["ours"]), "ms", "<= 1.0")
    row("throughput, 8 in flight", statistics.median(rate["peer"]), statistics.median(rate["ours"]), "call/s", ">= 1.0")
    load = f"{min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores"
    _record(
        "serve-p2",
        [
            {
                "id": "P2",
                "what": f"`tools/call` round trip over stdio, official client ({rounds} interleaved rounds of {n} calls, "
                "both servers up at once)",
                "peer": f"bare `MCPServer` echo over stdio {statistics.median(seq['peer']):.2f} ms",
                "ours": f"{statistics.median(seq['ours']):.2f} ms",
                "ratio": f"{statistics.median(seq_ratio):.2f}× ({min(seq_ratio):.2f}–{max(seq_ratio):.2f}×)",
                "target": "≤ 1.0×",
                "met": _met(statistics.median(seq_ratio) <= 1.0),
                "load": load,
                "tools": tools,
            },
            {
                "id": "P2",
                "what": "throughput, 8 calls in flight (same rounds)",
                "peer": f"same, {statistics.median(rate['peer']):,.0f} call/s",
                "ours": f"{statistics.median(rate['ours']):,.0f} call/s",
                "ratio": f"{statistics.median(rate_ratio):.2f}× ({min(rate_ratio):.2f}–{max(rate_ratio):.2f}×)",
                "target": "≥ 1.0×",
                "met": _met(statistics.median(rate_ratio) >= 1.0),
                "load": load,
                "tools": tools,
            },
        ],
    )


async def _list_every_page(client: Any) -> int:
    """List every page of tools (so the client knows them all); how many there are."""
    count, cursor = 0, None
    while True:
        page = await client.list_tools(cursor=cursor)
        count += len(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return count


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _record(name: str, rows: list[dict[str, object]]) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from _common import record

    tools = os.environ.get("BENCH_SERVE_TOOLS")
    for r in rows:
        r.setdefault("tools", tools or f"{len(FIRST_PARTY)} first-party plugins + probe")
    record(name, rows, script="bench/bench_serve.py")


# -- P3 ---------------------------------------------------------------------------------------------


def _thousand_tools_manager(root: Path, page_size: int) -> Any:
    from entropic_mcp import AccessLevel, MCPServerBase, ServerManager, ToolBase, ToolDefinition, config_from_dict

    class Tool(ToolBase):
        required_access_level = AccessLevel.READ

        async def execute(self, args: dict[str, Any], ctx: Any) -> str:
            return "ok"

    class Many(MCPServerBase):
        name = "many"

    server = Many(root=root)
    for i in range(1000):
        server.register_tool(
            Tool(
                ToolDefinition(
                    name=f"tool_{i:04d}",
                    description=f"Tool number {i}: does a thing with its argument.",
                    input_schema={
                        "type": "object",
                        "properties": {"text": {"type": "string", "description": "the text"}},
                        "required": ["text"],
                    },
                )
            )
        )
    config = config_from_dict({"storage": {"backend": "none"}, "serve": {"list_page_size": page_size}}, root=root)
    return ServerManager(config, servers=[server])


def _thousand_tools_peer() -> Any:
    from mcp.server.mcpserver import MCPServer

    peer = MCPServer("peer")
    for i in range(1000):

        async def tool(text: str) -> str:
            """Does a thing with its argument."""
            return text

        peer.add_tool(tool, name=f"tool_{i:04d}", description=f"Tool number {i}: does a thing with its argument.")
    return peer


async def _list_all(server: Any, rounds: int) -> tuple[float, int]:
    from mcp import Client

    async with Client(server, cache=None) as client:
        await client.list_tools()
        times = []
        count = 0
        for _ in range(rounds):
            started = time.perf_counter()
            cursor, count = None, 0
            while True:
                page = await client.list_tools(cursor=cursor)
                count += len(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, count


async def p3(project: Path) -> None:
    from entropic_mcp._serve import ServeApp

    print("P3  tools/list of 1,000 tools through an in-memory client (2026-07-28, all pages)")
    peer_ms, peer_count = await _list_all(_thousand_tools_peer(), 20)
    _quiet()
    ratios: list[float] = []
    for page_size in (1000, 100):
        manager = _thousand_tools_manager(project, page_size)
        app = ServeApp(manager, manager.config.serve)
        ours_ms, ours_count = await _list_all(app.server, 20)
        assert ours_count == peer_count == 1000, (ours_count, peer_count)
        row(f"list 1,000 tools, page size {page_size}", peer_ms, ours_ms, "ms", "<= 0.2")
        ratios.append(ours_ms / peer_ms)
    _record(
        "serve-p3",
        [
            {
                "id": "P3",
                "what": "`tools/list` of 1,000 tools, in-memory client, all pages (page 1000 / 100)",
                "peer": f"`MCPServer` {peer_ms:.1f} ms",
                "ours": "",
                "ratio": " / ".join(f"{r:.2f}×" for r in ratios),
                "target": "≤ 0.2×",
                "met": _met(max(ratios) <= 0.2),
                "tools": "1000",
            }
        ],
    )


def _quiet() -> None:
    """MCPServer's constructor installs an INFO-level log handler; keep the rest of the run readable."""
    import logging

    root = logging.getLogger()
    root.handlers.clear()
    root.setLevel(logging.WARNING)


# -- P5 ---------------------------------------------------------------------------------------------


async def _first_list(params: Any) -> float:
    from mcp import Client, stdio_client

    # The servers' stderr (the 1.x server logs every request, and a validation error for each
    # 2026-07-28 probe the client makes before falling back to the handshake) is not the benchmark's.
    with open(os.devnull, "w") as devnull:
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=devnull)) as client:
            await client.list_tools()
            return (time.perf_counter() - started) * 1000


async def p5(project: Path) -> None:
    print(
        f"P5  process start -> first tools/list answered (ours with {len(FIRST_PARTY)} first-party plugins "
        f"[{', '.join(FIRST_PARTY) or 'none installed'}] + probe)"
    )
    peer, ours, peer1 = [], [], []
    # The spec's peer is the fastest minimal official-SDK stdio server: the 1.x FastMCP counts too.
    sys.path.insert(0, str(Path(__file__).parent))
    from _common import peer_python

    python1 = peer_python("mcp1", "mcp>=1.9,<2")
    if python1:
        (project / "peer1.py").write_text(
            PEER.replace(
                "from mcp.server.mcpserver import MCPServer", "from mcp.server.fastmcp import FastMCP as MCPServer"
            )
        )
    loads = [os.getloadavg()[0]]
    for _ in range(int(os.environ.get("BENCH_P5_ROUNDS", "5"))):
        peer.append(await _first_list(peer_stdio(project)))
        ours.append(await _first_list(ours_stdio(project)))
        if python1:
            from mcp import StdioServerParameters

            peer1.append(
                await _first_list(
                    StdioServerParameters(
                        command=python1, args=[str(project / "peer1.py")], cwd=str(project), env=env()
                    )
                )
            )
    loads.append(os.getloadavg()[0])
    row("start to first listing vs 2.x MCPServer", statistics.median(peer), statistics.median(ours), "ms", "<= 1.0")
    if peer1:
        row("start to first listing vs 1.x FastMCP", statistics.median(peer1), statistics.median(ours), "ms", "<= 1.0")
    load = f"{min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores"
    ours_text = f"{statistics.median(ours):.0f} ms ({min(ours):.0f}–{max(ours):.0f})"
    rows: list[dict[str, object]] = []
    for label, side in (("minimal 2.x `MCPServer` stdio server", peer), ("minimal 1.x `FastMCP` stdio server", peer1)):
        if not side:
            continue
        ratios = [o / p for o, p in zip(ours, side, strict=True)]
        rows.append(
            {
                "id": "P5",
                "what": f"`serve`: start → first `tools/list`, {len(FIRST_PARTY)} plugins + probe "
                f"({len(ours)} interleaved rounds)"
                if not rows
                else "same",
                "peer": f"{label} {statistics.median(side):.0f} ms ({min(side):.0f}–{max(side):.0f})",
                "ours": ours_text,
                "ratio": f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}×)",
                "target": "≤ 1.0× the fastest",
                "met": _met(statistics.median(ratios) <= 1.0),
                "load": load,
            }
        )
    _record("serve-p5", rows)


# -- P12 ---------------------------------------------------------------------------------------------


def _start_http(command: list[str], project: Path, *, ours: bool) -> tuple[subprocess.Popen[bytes], str]:
    import re
    import socket

    log = project / f"http-{time.monotonic_ns()}.log"
    if ours:
        sink = log.open("wb")
        process = subprocess.Popen(
            command, cwd=project, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink
        )
        sink.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            match = re.search(r"on (http://\S+/mcp)", log.read_text(errors="replace"))
            if match:
                return process, match.group(1)
            time.sleep(0.05)
        raise RuntimeError(log.read_text())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [*command, str(port)],
        cwd=project,
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("peer did not start")


def _rate_and_p99(latencies: list[float], elapsed: float, errors: int) -> tuple[float, float, int]:
    """(calls per second, p99 latency in ms, errors) of one load run."""
    latencies.sort()
    return len(latencies) / elapsed, latencies[int(len(latencies) * 0.99) - 1] * 1000, errors


async def _http_load(url: str, tool: str, conversations: int, calls: int) -> tuple[float, float, int]:
    """(calls/s, p99 ms, errors) with ``conversations`` clients calling concurrently."""
    from mcp import Client

    latencies: list[float] = []
    errors = 0
    per_client = calls // conversations

    async def conversation(index: int) -> None:
        nonlocal errors
        async with Client(url) as client:
            for i in range(per_client):
                started = time.perf_counter()
                try:
                    result = await client.call_tool(tool, {"text": f"c{index} call {i}"})
                    if result.is_error:
                        errors += 1
                except Exception:
                    errors += 1
                latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(conversations):
            tg.start_soon(conversation, index)
    elapsed = time.perf_counter() - started
    return _rate_and_p99(latencies, elapsed, errors)


LOAD_WORKER = textwrap.dedent("""\
    import asyncio, json, os, sys, time
    sys.path.insert(0, sys.argv[1])
    import anyio
    from mcp import Client

    url, tool, conversations, per_client = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

    async def main():
        latencies, errors = [], 0
        ready = anyio.Event()
        go = anyio.Event()
        connected = 0

        async def conversation(index):
            nonlocal errors, connected
            async with Client(url) as client:
                await client.list_tools()
                connected += 1
                if connected == conversations:
                    ready.set()
                await go.wait()
                for i in range(per_client):
                    started = time.perf_counter()
                    try:
                        result = await client.call_tool(tool, {"text": f"p{os.getpid()} c{index} call {i}"})
                        errors += bool(result.is_error)
                    except Exception:
                        errors += 1
                    latencies.append(time.perf_counter() - started)

        async def control():
            await ready.wait()
            print("ready", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            go.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(control)
            for index in range(conversations):
                tg.start_soon(conversation, index)
            await go.wait()
            started = time.perf_counter()
        print(json.dumps({"elapsed": time.perf_counter() - started, "latencies": latencies, "errors": errors}))

    asyncio.run(main())
""")


def _http_load_processes(
    url: str, tool: str, conversations: int, calls: int, processes: int
) -> tuple[float, float, int]:
    """The same load from ``processes`` client processes, all connected before a common start."""
    import json

    per_process = conversations // processes
    per_client = calls // conversations
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                LOAD_WORKER,
                str(Path(__file__).parent),
                url,
                tool,
                str(per_process),
                str(per_client),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env(),
        )
        for _ in range(processes)
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    reports = [json.loads(worker.communicate(timeout=600)[0].strip().splitlines()[-1]) for worker in workers]
    elapsed = time.perf_counter() - started
    latencies = [x for report in reports for x in report["latencies"]]
    errors = sum(report["errors"] for report in reports)
    return _rate_and_p99(latencies, elapsed, errors)


RAW_REQUEST = (
    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json, text/event-stream\r\n"
    "Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
    "Mcp-Name: {tool}\r\nContent-Length: {length}\r\n\r\n"
)


async def _raw_http_load(url: str, tool: str, conversations: int, calls: int) -> tuple[float, float, int]:
    """The same calls from a lean generator: one keep-alive connection per conversation, 2026-07-28 requests.

    The official client spends several times the server's CPU per call, so with it on the same two
    cores the client sets the pace; this generator spends little, so the server does.
    """
    import json
    import secrets
    from urllib.parse import urlsplit

    from _common import http_exchange

    port = urlsplit(url).port
    run = secrets.token_hex(4)
    latencies: list[float] = []
    errors = 0
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench-load", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    async def conversation(index: int) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for i in range(calls // conversations):
                body = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": i + 1,
                        "method": "tools/call",
                        "params": {"name": tool, "arguments": {"text": f"{run} c{index} call {i}"}, "_meta": meta},
                    },
                    separators=(",", ":"),
                ).encode()
                head = RAW_REQUEST.format(port=port, tool=tool, length=len(body)).encode()
                latency, failed = await http_exchange(reader, writer, head + body)
                latencies.append(latency)
                errors += failed
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(conversation(index) for index in range(conversations)))
    elapsed = time.perf_counter() - started
    return _rate_and_p99(latencies, elapsed, errors)


async def p12(project: Path) -> None:
    import psutil

    calls = int(os.environ.get("BENCH_P12_CALLS", "2000"))
    rounds = int(os.environ.get("BENCH_P12_ROUNDS", "3"))
    print(
        f"P12 Streamable HTTP, 50 concurrent conversations, {calls} calls (scaled down from 10,000; "
        f"set BENCH_P12_CALLS=10000 for the full load); {rounds} interleaved rounds, medians"
    )

    async def in_this_process(url: str, tool: str) -> tuple[float, float, int]:
        return await _http_load(url, tool, 50, calls)

    async def from_five_processes(url: str, tool: str) -> tuple[float, float, int]:
        # 10 conversations per process, so one client process is not the bottleneck of the measurement
        return await anyio.to_thread.run_sync(_http_load_processes, url, tool, 50, calls, 5)

    async def lean(url: str, tool: str) -> tuple[float, float, int]:
        return await _raw_http_load(url, tool, 50, calls)

    loads = (
        ("official clients, 5 processes", from_five_processes),
        ("official clients, 1 process", in_this_process),
        ("lean generator, server-bound", lean),
    )
    rows: list[dict[str, object]] = []
    for label, load in loads:
        runs: dict[str, list[tuple[float, float, int, float]]] = {"peer": [], "ours": []}
        for name, command, tool, ours in rounds * (
            ("peer", [sys.executable, str(project / "peer.py")], "echo", False),
            ("ours", [str(ENTROPIC_MCP), "serve", "--transport", "http", "--port", "0"], "probe_echo", True),
        ):
            process, url = _start_http(command, project, ours=ours)
            try:
                server = psutil.Process(process.pid)
                before = server.cpu_times()
                rate, p99, errors = await load(url, tool)
                after = server.cpu_times()
                cpu = (after.user + after.system - before.user - before.system) / calls * 1000
                runs[name].append((rate, p99, errors, cpu))
            finally:
                process.terminate()
                process.wait(10)
        medians = {name: [statistics.median(run[i] for run in found) for i in range(4)] for name, found in runs.items()}
        (peer_rate, peer_p99, _, peer_cpu), (ours_rate, ours_p99, _, ours_cpu) = medians["peer"], medians["ours"]
        row(f"throughput ({label})", peer_rate, ours_rate, "call/s", ">= 1.0")
        row(f"p99 latency ({label})", peer_p99, ours_p99, "ms", "<= 1.0")
        row(f"server CPU per call ({label})", peer_cpu, ours_cpu, "ms", "-")
        per_round = [o[0] / p[0] for p, o in zip(runs["peer"], runs["ours"], strict=True)]
        errors = sum(r[2] for r in runs["peer"]), sum(r[2] for r in runs["ours"])
        print(
            f"  errors: peer {errors[0]}, ours {errors[1]} (target 0); "
            f"per round throughput ratio {', '.join(f'{r:.2f}' for r in per_round)}"
        )
        first = not rows
        rows.append(
            {
                "id": "P12",
                "what": (
                    f"Streamable HTTP, 50 conversations, {calls:,} calls, {label} (median of {rounds} interleaved "
                    "rounds); server CPU per call in brackets"
                    if first
                    else f"same, {label}"
                ),
                "peer": f"`MCPServer` over HTTP {peer_rate:,.0f} call/s, p99 {peer_p99:.0f} ms ({peer_cpu:.2f} ms CPU)",
                "ours": f"{ours_rate:,.0f} call/s, p99 {ours_p99:.0f} ms ({ours_cpu:.2f} ms CPU)",
                "ratio": f"throughput {ours_rate / peer_rate:.2f}× (rounds {min(per_round):.2f}–{max(per_round):.2f}×), "
                f"p99 {ours_p99 / peer_p99:.2f}×, CPU {ours_cpu / peer_cpu:.2f}×",
                "target": "≥ 1.0×, ≤ 1.0×" if first else "—",
                "met": _met(ours_rate >= peer_rate and ours_p99 <= peer_p99 and errors[1] == 0) if first else "—",
            }
        )
    _record("serve-p12", rows)


# -- P13 ---------------------------------------------------------------------------------------------


async def _rss_after(params: Any, tool: str, marks: tuple[int, ...]) -> list[float]:
    import psutil
    from mcp import Client

    out = []
    async with Client(params) as client:
        await _list_every_page(client)
        me = psutil.Process()
        server = next(p for p in me.children(recursive=True) if p.is_running())
        done = 0
        counter = iter(range(marks[-1]))

        for mark in marks:
            batch = iter(range(done, mark))

            async def worker(batch: Any = batch) -> None:
                for i in batch:
                    await client.call_tool(tool, {"text": f"call {i}"})

            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(worker)
            done = mark
            out.append(server.memory_info().rss / 2**20)
        del counter
    return out


async def p13(project: Path) -> None:
    print("P13 server resident set after 1,000 and 10,000 calls over stdio (8 in flight)")
    peer = await _rss_after(peer_stdio(project), "echo", (1000, 10000))
    ours = await _rss_after(ours_stdio(project), "probe_echo", (1000, 10000))
    row("RSS after 1,000 calls", peer[0], ours[0], "MiB", "-")
    row("RSS after 10,000 calls", peer[1], ours[1], "MiB", "<= 1.2")
    print(
        f"  growth 1,000 -> 10,000 calls: peer {peer[1] - peer[0]:+.1f} MiB, ours {ours[1] - ours[0]:+.1f} MiB "
        "(target: flat)"
    )
    ratio_1k, ratio_10k = ours[0] / peer[0], ours[1] / peer[1]
    _record(
        "serve-p13",
        [
            {
                "id": "P13",
                "what": "`serve` resident memory after 10,000 calls over stdio (8 in flight)",
                "peer": f"minimal `MCPServer` after the same calls {peer[1]:.1f} MiB (1,000: {peer[0]:.1f})",
                "ours": f"{ours[1]:.1f} MiB (1,000: {ours[0]:.1f}; growth {ours[1] - ours[0]:+.1f} MiB)",
                "ratio": f"{ratio_10k:.2f}× (at 1,000: {ratio_1k:.2f}×)",
                "target": "≤ 1.2×, flat",
                "met": _met(ratio_10k <= 1.2 and ours[1] - ours[0] <= max(2.0, 0.05 * ours[0])),
            }
        ],
    )


BENCHES = {"p2": p2, "p3": p3, "p5": p5, "p12": p12, "p13": p13}


async def main(selected: list[str]) -> None:
    project = project_dir()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; first-party plugins loaded: "
        f"{', '.join(FIRST_PARTY) or 'none installed'}\n"
    )
    for name in selected or list(BENCHES):
        await BENCHES[name](project)
        print()


if __name__ == "__main__":
    asyncio.run(main([a.lower() for a in sys.argv[1:]]))
