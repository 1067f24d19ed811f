"""P1: the full pipeline on a trivial tool, in-process, against the official SDK's call_tool.

Peers, measured in the same run: ``mcp`` 2.x ``MCPServer.call_tool`` on an async and a sync echo,
and ``mcp`` 1.x ``FastMCP.call_tool`` (in a separate venv, since 1.x and 2.x cannot share one).
Target: median ≤ 0.5× the 2.x async peer and ≤ 1.0× the 1.x peer.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import peer_python, report

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


def ours() -> dict[str, float]:
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

    async def measure(name: str, n: int) -> float:
        import statistics

        samples = []
        for r in range(ROUNDS):
            # One conversation making many calls with distinct arguments: the duplicate cache is
            # consulted (and kept bounded) on every call, as in a real session.
            contexts = [CallContext(conversation_id=f"c{r}", identity="agent") for _ in range(n)]
            texts = [f"hi {i}" for i in range(n)]
            start = time.perf_counter()
            for ctx, text in zip(contexts, texts, strict=True):
                outcome = await manager.call(name, {"text": text}, ctx)
            samples.append((time.perf_counter() - start) / n * 1e6)
            assert outcome.kind == "ok", outcome
        return statistics.median(samples)

    async def main():
        return {"async": await measure("bench.echo", N), "sync": await measure("bench.echo_sync", N // 10)}

    return asyncio.run(main())


def peer(python: str) -> dict[str, float]:
    out = subprocess.run([python, "-c", PEER_CODE, str(N), str(ROUNDS)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ours_us = ours()
    v2 = peer(sys.executable)
    v1_python = peer_python("mcp1", "mcp>=1.9,<2")
    v1 = peer(v1_python) if v1_python else None
    rows = [
        (
            "P1 async tool vs mcp 2.x MCPServer.call_tool (async)",
            f"{ours_us['async']:.1f} µs",
            f"{v2['async']:.1f} µs",
            f"{ours_us['async'] / v2['async']:.2f}×",
            "≤ 0.5×",
        ),
        (
            "P1 sync tool vs mcp 2.x MCPServer.call_tool (sync)",
            f"{ours_us['sync']:.1f} µs",
            f"{v2['sync']:.1f} µs",
            f"{ours_us['sync'] / v2['sync']:.2f}×",
            "—",
        ),
    ]
    if v1:
        rows.append(
            (
                "P1 async tool vs mcp 1.x FastMCP.call_tool",
                f"{ours_us['async']:.1f} µs",
                f"{v1['async']:.1f} µs",
                f"{ours_us['async'] / v1['async']:.2f}×",
                "≤ 1.0×",
            )
        )
    else:
        rows.append(
            ("P1 vs mcp 1.x FastMCP.call_tool", f"{ours_us['async']:.1f} µs", "not installable here", "—", "≤ 1.0×")
        )
    report("P1-pipeline", rows)


if __name__ == "__main__":
    main()
