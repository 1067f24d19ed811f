"""The bash server against its floor (performance.md P11).

Run: ``python bench/bench_bash.py [--runs N]`` (default 400). Prints, in one run:

- ``bash.execute {"command": "true"}`` through the whole in-process pipeline
  (``ServerManager.call``: schema, permission parts from the shell parser, duplicate check,
  the process group, result shaping), against ``subprocess.run(["bash", "-c", "true"])``, the
  floor a user would write; target ≤ 1.5×. Rounds alternate between the two so machine noise
  hits both alike; the medians are compared.
- the permission check alone (tree-sitter parse and analysis) of a typical chained command.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import report
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp_bash import BashServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    runs = parser.parse_args().runs

    with tempfile.TemporaryDirectory(prefix="bench-bash-") as scratch:
        root = Path(scratch).resolve()
        server = BashServer(root=root)
        server.configure({})
        config = config_from_dict({"storage": {"backend": "none"}, "permissions": {"default": "allow"}}, root=root)
        manager = ServerManager(config, servers=[server])

        async def measure() -> tuple[list[float], list[float]]:
            # One of each, alternately: a burst of load on the shared machine hits both alike.
            ours: list[float] = []
            floor: list[float] = []
            for i in range(-20, runs):  # the first 20 warm up (tree-sitter load, first fork)
                # A new conversation per call: the duplicate guard would refuse a repeated "true".
                ctx = CallContext(conversation_id=f"c{i}")
                t = time.perf_counter()
                outcome = await manager.call("bash.execute", {"command": "true"}, ctx)
                mine = time.perf_counter() - t
                assert outcome.kind == "ok", outcome.response.result
                t = time.perf_counter()
                subprocess.run(["bash", "-c", "true"], check=True)
                theirs = time.perf_counter() - t
                if i >= 0:
                    ours.append(mine)
                    floor.append(theirs)
            return ours, floor

        ours, floor = asyncio.run(measure())
        parts = server.permission_parts
        command = {"command": "cd src && git status --short | grep -v '^??' > /tmp/out.txt; timeout 5 pytest -q"}
        parse_samples = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(500):
                parts("execute", command)
            parse_samples.append((time.perf_counter() - t) / 500)

    ours_ms = statistics.median(ours) * 1000
    floor_ms = statistics.median(floor) * 1000
    report(
        "bench_bash",
        [
            (
                'P11 bash.execute "true" (pipeline, median)',
                f"{ours_ms:.2f} ms",
                f"{floor_ms:.2f} ms subprocess.run(bash -c true)",
                f"{ours_ms / floor_ms:.2f}x",
                "<= 1.5x",
            ),
            ("permission parts of a 5-command line", f"{statistics.median(parse_samples) * 1e6:.0f} us", "-", "-", "-"),
        ],
    )


if __name__ == "__main__":
    main()
