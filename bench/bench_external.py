"""P14: external MCP servers through the client pool, side by side with the official client alone.

    python bench/bench_external.py          # both parts (under a minute on 2 cores)

P14a  20 concurrent listings of one key: how many tools/list requests reach the server (target 1)
P14b  a pooled call (the whole pipeline, then the pool: admission, the key's client, tools/call;
      the pool on the host's loop, as serve runs it) against a direct official-SDK ``ClientSession.call_tool`` to the same kind of server, sequential
      calls, median per call over interleaved rounds (target <= 1.1x)

The server is core/tests/external/fault_server.py (the official SDK's low-level Server over stdio),
one process for ours and one for the direct client.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _common import report

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "core" / "tests" / "external" / "fault_server.py"
BLOCK = 50
BLOCKS = 30


def manager(*args: str):
    from entropic_mcp import ServerManager
    from entropic_mcp._config import config_from_dict

    data = {
        "entropic_mcp": {"plugins": []},
        "storage": {"backend": "none"},
        "permissions": {"default": "allow"},
        "pipeline": {"duplicate_stop_after": 1000000, "same_tool_limit": 1000000},
        "external": {"f": {"command": sys.executable, "args": [str(SERVER), *args]}},
    }
    return ServerManager.from_config(config_from_dict(data, root=tempfile.gettempdir()), load_entry_points=False)


async def p14a() -> tuple[str, str, str, str, str]:
    from entropic_mcp._external import Binding

    m = manager("--ttl-ms", "0", "--list-delay", "0.2")
    try:
        m.list_tools()
        pool = m.servers["f"].pool

        async def stats() -> int:
            return orjson.loads((await m.execute("f.stats", {})).result)["lists"]

        before = await stats()
        await asyncio.gather(*(pool.loop.run(pool.list(lambda: Binding("one-key"))) for _ in range(20)))
        wire = await stats() - before
    finally:
        m.close()
    return ("P14a 20 concurrent listings, one key", f"{wire} tools/list", "20 without joining", f"{wire / 20:.2f}", "1")


async def p14b() -> tuple[str, str, str, str, str]:
    from entropic_mcp._external import close_external_servers, start_external_servers
    from mcp import Client, StdioServerParameters

    m = manager()
    ours: list[float] = []
    direct: list[float] = []
    try:
        # What serve does: the pool adopts the host's long-lived loop, so a call needs no thread hop.
        await start_external_servers(m)
        async with Client(StdioServerParameters(command=sys.executable, args=[str(SERVER)]), cache=None) as c:
            session = c.session
            await session.list_tools()
            for _ in range(20):  # warm both paths
                await session.call_tool("echo", {"text": "x"})
                await m.call("f.echo", {"text": "x"})
            # Short alternating blocks: the shared machine's load swings hit both sides alike.
            for block in range(BLOCKS):
                started = time.perf_counter()
                for i in range(BLOCK):
                    await session.call_tool("echo", {"text": f"{block}-{i}"})
                direct.append((time.perf_counter() - started) / BLOCK)
                started = time.perf_counter()
                for i in range(BLOCK):
                    outcome = await m.call("f.echo", {"text": f"{block}-{i}"})
                    assert not outcome.response.is_error, outcome.response.result
                ours.append((time.perf_counter() - started) / BLOCK)
    finally:
        await close_external_servers(m)
        m.close()
    mine, peer = statistics.median(ours) * 1e6, statistics.median(direct) * 1e6
    return ("P14b call, pooled vs direct client", f"{mine:.0f} us", f"{peer:.0f} us", f"{mine / peer:.2f}x", "<= 1.1x")


async def main() -> None:
    rows = [await p14a(), await p14b()]
    report("bench_external", rows)


if __name__ == "__main__":
    asyncio.run(main())
