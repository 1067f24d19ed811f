"""P1: the full pipeline on a trivial tool, in-process, against the official SDK's call_tool.

Peers, measured in the same run: ``mcp`` 2.x ``MCPServer.call_tool`` on an async and a sync echo,
and ``mcp`` 1.x ``FastMCP.call_tool`` (in a separate venv, since 1.x and 2.x cannot share one).
Target: median ≤ 0.5× the 2.x async peer and ≤ 1.0× the 1.x peer. ``--callgrind`` counts
instructions per call instead (valgrind; what a loaded machine cannot stretch), ours and the 2.x
peer, and records them in bench/results/P1-instructions.toml.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import peer_python, record, report

N = 20000
ROUNDS = 7

PEER_CODE = """
import asyncio, json, statistics, sys, time
N, ROUNDS = int(sys.argv[1]), int(sys.argv[2])
try:
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server
server = Server("echo")

@server.tool()
async def echo(text: str) -> str:
    return text

@server.tool()
def echo_sync(text: str) -> str:
    return text

async def measure(name):
    for i in range(min(N, 2000)):  # warm-up: a fresh process per round
        await server.call_tool(name, {"text": f"warm {i}"})
    samples = []
    for r in range(ROUNDS):
        start = time.perf_counter()
        for i in range(N):
            await server.call_tool(name, {"text": f"hi {i}"})
        samples.append((time.perf_counter() - start) / N * 1e6)
    return statistics.median(samples)

async def main():
    print(json.dumps({"async": await measure("echo"), "sync": await measure("echo_sync")}))
asyncio.run(main())
"""


def ours() -> Callable[[], dict[str, float]]:
    """Build the manager once; the returned function measures one round on one event loop."""
    from entropic_mcp import AccessLevel, CallContext, MCPServerBase, ToolBase, ToolDefinition
    from entropic_mcp.testing import make_manager

    definition = ToolDefinition(
        name="echo",
        description="echo",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )

    class Echo(ToolBase):
        required_access_level = AccessLevel.READ

        async def execute(self, args, ctx):
            return args["text"]

    class EchoSync(ToolBase):
        required_access_level = AccessLevel.READ

        def execute(self, args, ctx):
            return args["text"]

    class Bench(MCPServerBase):
        name = "bench"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Echo(definition))
            self.register_tool(
                EchoSync(ToolDefinition(name="echo_sync", description="", input_schema=definition.input_schema))
            )

    root = tempfile.mkdtemp()
    # Every stage runs: schema, access keys (the identity has a key set), duplicate detection,
    # loop guards, permission rules (an allow and a deny list), timeout, dispatch, envelope.
    manager = make_manager(
        root,
        servers=[Bench(root=root)],
        config={
            "permissions": {"default": "ask", "allow": ["bench.*"], "deny": ["bench.echo:never"]},
            "identities": {"agent": {"keys": {"bench.*": "READ"}}},
            "pipeline": {"same_tool_limit": 10**9},
        },
    )
    loop = asyncio.new_event_loop()  # one loop for the whole run
    rounds = [0]

    async def measure(name: str, n: int) -> float:
        # One conversation making many calls with distinct arguments: the duplicate cache is
        # consulted (and kept bounded) on every call, as in a real session.
        rounds[0] += 1
        contexts = [CallContext(conversation_id=f"c{rounds[0]}-{name}", identity="agent") for _ in range(n)]
        texts = [f"hi {i}" for i in range(n)]
        start = time.perf_counter()
        for ctx, text in zip(contexts, texts, strict=True):
            outcome = await manager.call(name, {"text": text}, ctx)
        took = (time.perf_counter() - start) / n * 1e6
        assert outcome.kind == "ok", outcome
        return took

    async def one_round() -> dict[str, float]:
        return {"async": await measure("bench.echo", N), "sync": await measure("bench.echo_sync", N // 10)}

    loop.run_until_complete(measure("bench.echo", 2000))  # warm-up

    def run_round() -> dict[str, float]:
        return loop.run_until_complete(one_round())

    run_round.calls = lambda n: loop.run_until_complete(measure("bench.echo", n))  # type: ignore[attr-defined]
    return run_round


def peer(python: str) -> dict[str, float]:
    """One round of the peer in a fresh process (after its warm-up)."""
    out = subprocess.run([python, "-c", PEER_CODE, str(N), "1"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


PEER_CALLS_CODE = """
import asyncio, sys
from mcp.server.mcpserver import MCPServer
server = MCPServer("echo")

@server.tool()
async def echo(text: str) -> str:
    return text

async def main(n):
    for i in range(2000):  # the same warm-up as ours
        await server.call_tool("echo", {"text": f"warm {i}"})
    for i in range(n):
        await server.call_tool("echo", {"text": f"hi {i}"})
asyncio.run(main(int(sys.argv[1])))
"""

CALLGRIND_CALLS = 2000


def _instructions(command: list[str]) -> int:
    import os
    import re

    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={Path(tmp) / 'out'}", *command],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(done.stderr[-2000:])
    return int(found.group(1))


def callgrind() -> None:
    """Instructions per call, ours and the 2.x peer: (setup + warm-up + N calls) - (setup + warm-up)."""
    import os

    loads = [os.getloadavg()[0]]
    sides = {
        "ours": lambda n: [sys.executable, __file__, "--calls", str(n)],
        "v2": lambda n: [sys.executable, "-c", PEER_CALLS_CODE, str(n)],
    }
    per_call = {
        name: (_instructions(command(CALLGRIND_CALLS)) - _instructions(command(0))) / CALLGRIND_CALLS
        for name, command in sides.items()
    }
    loads.append(os.getloadavg()[0])
    ratio = per_call["ours"] / per_call["v2"]
    report(
        "P1-instructions",
        [
            (
                "P1 instructions per async call vs mcp 2.x",
                f"{per_call['ours']:,.0f}",
                f"{per_call['v2']:,.0f}",
                f"{ratio:.3f}×",
                "≤ 0.5×",
            )
        ],
    )
    record(
        "P1-instructions",
        [
            {
                "id": "P1",
                "what": f"instructions per call (callgrind, {CALLGRIND_CALLS:,} calls minus none, after the same "
                "2,000-call warm-up), full pipeline, trivial async tool, the bench's config",
                "peer": f"`mcp` 2.x `MCPServer.call_tool` async echo {per_call['v2']:,.0f}",
                "ours": f"{per_call['ours']:,.0f}",
                "ratio": f"{ratio:.2f}×",
                "target": "≤ 0.5×",
                "met": "yes" if ratio <= 0.5 else "**no**",
                "load": f"{min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores",
            }
        ],
        script="bench/bench_pipeline.py --callgrind",
    )


def main() -> None:
    import os
    import statistics

    if "--calls" in sys.argv:  # a worker of --callgrind: build, warm up, make the calls, exit
        run, calls = ours(), int(sys.argv[sys.argv.index("--calls") + 1])
        if calls:
            run.calls(calls)  # type: ignore[attr-defined]
        return
    if "--callgrind" in sys.argv:
        callgrind()
        return

    ours_round = ours()
    v1_python = peer_python("mcp1", "mcp>=1.9,<2")
    sides: dict[str, Callable[[], dict[str, float]]] = {"ours": ours_round, "v2": lambda: peer(sys.executable)}
    if v1_python:
        sides["v1"] = lambda: peer(v1_python)
    loads = [os.getloadavg()[0]]
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(ROUNDS):  # ABAB: every side once per round, the order flipping each round
        for name in names if r % 2 == 0 else reversed(names):
            samples[name].append(sides[name]())
    loads.append(os.getloadavg()[0])
    load = f"{min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores"

    def med(side: str, kind: str) -> float:
        return statistics.median(s[kind] for s in samples[side])

    def ratios(side: str, kind: str) -> list[float]:
        return [o[kind] / p[kind] for o, p in zip(samples["ours"], samples[side], strict=True)]

    def ratio_text(side: str, kind: str) -> str:
        r = ratios(side, kind)
        return f"{statistics.median(r):.2f}× ({min(r):.2f}–{max(r):.2f}×)"

    rows = [
        (
            "P1 async tool vs mcp 2.x MCPServer.call_tool (async)",
            f"{med('ours', 'async'):.1f} µs",
            f"{med('v2', 'async'):.1f} µs",
            ratio_text("v2", "async"),
            "≤ 0.5×",
        ),
        (
            "P1 sync tool vs mcp 2.x MCPServer.call_tool (sync)",
            f"{med('ours', 'sync'):.1f} µs",
            f"{med('v2', 'sync'):.1f} µs",
            ratio_text("v2", "sync"),
            "—",
        ),
    ]
    what = f"full pipeline, trivial async tool, in-process ({ROUNDS} interleaved rounds of {N:,} calls, one event loop)"
    records: list[dict[str, object]] = [
        {
            "id": "P1",
            "what": what,
            "peer": f"`mcp` 2.x `MCPServer.call_tool` async echo {med('v2', 'async'):.1f} µs",
            "ours": f"{med('ours', 'async'):.1f} µs",
            "ratio": ratio_text("v2", "async"),
            "target": "≤ 0.5×",
            "met": "yes" if statistics.median(ratios("v2", "async")) <= 0.5 else "**no**",
            "load": load,
        }
    ]
    if "v1" in sides:
        rows.append(
            (
                "P1 async tool vs mcp 1.x FastMCP.call_tool",
                f"{med('ours', 'async'):.1f} µs",
                f"{med('v1', 'async'):.1f} µs",
                ratio_text("v1", "async"),
                "≤ 1.0×",
            )
        )
        records.append(
            {
                "id": "P1",
                "what": "same",
                "peer": f"`mcp` 1.x `FastMCP.call_tool` {med('v1', 'async'):.1f} µs",
                "ours": f"{med('ours', 'async'):.1f} µs",
                "ratio": ratio_text("v1", "async"),
                "target": "≤ 1.0×",
                "met": "yes" if statistics.median(ratios("v1", "async")) <= 1.0 else "**no**",
                "load": load,
            }
        )
    else:
        rows.append(
            ("P1 vs mcp 1.x FastMCP.call_tool", f"{med('ours', 'async'):.1f} µs", "not installable here", "—", "≤ 1.0×")
        )
    records.append(
        {
            "id": "P1",
            "what": "sync tool (worker thread)",
            "peer": f"`MCPServer.call_tool` sync echo {med('v2', 'sync'):.1f} µs",
            "ours": f"{med('ours', 'sync'):.1f} µs",
            "ratio": ratio_text("v2", "sync"),
            "load": load,
        }
    )
    report("P1-pipeline", rows)
    print(f"  load {load}")
    record("P1-pipeline", records, script="bench/bench_pipeline.py")


if __name__ == "__main__":
    main()
