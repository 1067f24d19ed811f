"""P14: external MCP servers through the client pool, side by side with the official client alone.

    python bench/bench_external.py              # both parts, records bench/results/external.toml
    python bench/bench_external.py --rounds 6   # a trial: prints, records nothing
    python bench/bench_external.py --callgrind  # instructions per call in the host process, printed

P14a  20 concurrent listings of one key: how many tools/list requests reach the server (target 1)
P14b  a pooled call (the whole pipeline, then the pool: admission, the key's client, tools/call;
      the pool on the host's loop, as serve runs it) against a direct official-SDK
      ``ClientSession.call_tool`` to the same kind of server: sequential calls in interleaved rounds
      (ABAB: the order flips each round, so neither side always follows the other), the median of
      the per-call means of each side, and the range of the per-round ratios (target <= 1.1x)

The server is core/tests/external/fault_server.py (the official SDK's low-level Server over stdio),
one process for ours and one for the direct client, both up for the whole run. ``--callgrind``
counts what the host process executes per call (the servers run outside valgrind), which the
machine's load does not move: a check of a change, not a row of the page.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _common import load_span, ratio_spread, record, report, tree_commit, verdict

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "core" / "tests" / "external" / "fault_server.py"
BLOCK = 50
ROUNDS = 30
WARM = 200
CALLGRIND_CALLS = 500


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


async def p14a() -> int:
    """How many tools/list requests 20 concurrent listings of one key put on the wire."""
    from entropic_mcp._external import Binding

    m = manager("--ttl-ms", "0", "--list-delay", "0.2")
    try:
        m.list_tools()
        pool = m.servers["f"].pool

        async def stats() -> int:
            return orjson.loads((await m.execute("f.stats", {})).result)["lists"]

        before = await stats()
        await asyncio.gather(*(pool.loop.run(pool.list(lambda: Binding("one-key"))) for _ in range(20)))
        return await stats() - before
    finally:
        m.close()


class Sides:
    """Both sides up at once: ours (the pool on this loop, as serve runs it) and a direct client."""

    async def __aenter__(self) -> Sides:
        from entropic_mcp._external import start_external_servers
        from mcp import Client, StdioServerParameters

        self.manager = manager()
        # What serve does: the pool adopts the host's long-lived loop, so a call needs no thread hop.
        await start_external_servers(self.manager)
        self._client = Client(StdioServerParameters(command=sys.executable, args=[str(SERVER)]), cache=None)
        self.session = (await self._client.__aenter__()).session
        await self.session.list_tools()  # what a direct client does once: call_tool checks output schemas
        return self

    async def __aexit__(self, *exc: object) -> None:
        from entropic_mcp._external import close_external_servers

        await self._client.__aexit__(None, None, None)
        await close_external_servers(self.manager)
        self.manager.close()

    async def direct(self, n: int, tag: str = "") -> None:
        for i in range(n):
            await self.session.call_tool("echo", {"text": f"{tag}{i}"})

    async def ours(self, n: int, tag: str = "") -> None:
        for i in range(n):
            outcome = await self.manager.call("f.echo", {"text": f"{tag}{i}"})
            assert not outcome.response.is_error, outcome.response.result


async def p14b(rounds: int) -> tuple[list[float], list[float]]:
    """Per-call means of each round of BLOCK calls: (ours, direct), in ABAB order."""
    ours: list[float] = []
    direct: list[float] = []
    async with Sides() as sides:
        await sides.direct(WARM)
        await sides.ours(WARM)
        for r in range(rounds):
            order = [(sides.direct, direct), (sides.ours, ours)]
            for run, samples in order if r % 2 == 0 else reversed(order):
                started = time.perf_counter()
                await run(BLOCK, f"{r}-")
                samples.append((time.perf_counter() - started) / BLOCK)
    return ours, direct


# -- --callgrind ---------------------------------------------------------------------------------


async def _calls(side: str, n: int) -> None:
    """A worker under valgrind: both sides up and warmed alike, then ``n`` calls on one side."""
    async with Sides() as sides:
        await sides.direct(WARM)
        await sides.ours(WARM)
        await getattr(sides, side)(n, "c-")


def _instructions(side: str, n: int) -> int:
    from bench_pipeline import _instructions as counted  # one valgrind runner for the benches

    return counted([sys.executable, __file__, "--calls", str(n), "--side", side])


def callgrind() -> None:
    loads = [os.getloadavg()[0]]
    base = _instructions("direct", 0)
    per_call = {side: (_instructions(side, CALLGRIND_CALLS) - base) / CALLGRIND_CALLS for side in ("ours", "direct")}
    loads.append(os.getloadavg()[0])
    report(
        "external-instructions",
        [
            (
                f"P14 host instructions per call ({CALLGRIND_CALLS} calls, load {load_span(loads)})",
                f"{per_call['ours']:,.0f}",
                f"{per_call['direct']:,.0f}",
                f"{per_call['ours'] / per_call['direct']:.3f}x",
                "-",
            )
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds of {BLOCK} calls a side (default {ROUNDS})")
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--side", choices=("ours", "direct"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.calls is not None:
        asyncio.run(_calls(options.side, options.calls))
        return
    if options.callgrind:
        callgrind()
        return

    loads = [os.getloadavg()[0]]
    wire = asyncio.run(p14a())
    loads.append(os.getloadavg()[0])
    ours, direct = asyncio.run(p14b(options.rounds))
    loads.append(os.getloadavg()[0])
    mine, peer = statistics.median(ours), statistics.median(direct)
    # Each round's ours over the same round's direct: a load swing moves both halves of a pair.
    per_round = [o / d for o, d in zip(ours, direct, strict=True)]
    ratio = statistics.median(per_round)
    report(
        "bench_external",
        [
            (
                "P14a 20 concurrent listings, one key",
                f"{wire} tools/list",
                "20 without joining",
                f"{wire / 20:.2f}",
                "1",
            ),
            (
                "P14b call, pooled vs direct client",
                f"{mine * 1e6:.0f} us",
                f"{peer * 1e6:.0f} us",
                ratio_spread(per_round),
                "<= 1.1x",
            ),
        ],
    )
    print(f"median of per-round ratios {ratio:.3f}x, ratio of medians {mine / peer:.3f}x; load {load_span(loads)}")
    if options.rounds < ROUNDS:
        print(f"a trial ({options.rounds} rounds, fewer than {ROUNDS}): nothing recorded")
        return
    load = load_span(loads)
    record(
        "external",
        [
            {
                "id": "P14",
                "what": "20 concurrent listings of one external server (one pool key)",
                "peer": "—",
                "ours": f"{wire} `tools/list` on the wire",
                "ratio": "—",
                "target": "1",
                "met": "yes" if wire == 1 else "**no**",
                "load": load,
            },
            {
                "id": "P14",
                "what": "a pooled call to an external stdio server through the pipeline, pool on the host's loop as "
                f"serve runs it ({options.rounds} interleaved rounds of {BLOCK} calls a side, both servers up at once)",
                "peer": f"a direct official-client `call_tool` to the same server {peer * 1e6:.0f} µs",
                "ours": f"{mine * 1e6:.0f} µs",
                "ratio": ratio_spread(per_round),
                "target": "≤ 1.1×",
                "met": verdict(ratio <= 1.1, loads),
                "load": load,
            },
        ],
        script=f"bench/bench_external.py at {tree_commit() or 'an unknown commit'}",
    )


if __name__ == "__main__":
    main()
