"""The bash server against its floor (performance.md P11, and a 1 MB output).

Run: ``python bench/bench_bash.py [--rounds N] [--per-round M]`` (defaults 8 and 50). Prints, in
one run, with the load average sampled before and after each part, and records in
bench/results/bash.toml (the rows of docs/benchmarks.md; a run with fewer rounds or calls than the
defaults is a trial and records nothing):

- ``bash.execute {"command": "true"}`` through the whole in-process pipeline
  (``ServerManager.call``: schema, permission parts from the shell parser, duplicate check,
  the process group, result shaping), against ``subprocess.run(["bash", "-c", "true"])``, the
  floor a user would write; target <= 1.5x. Once with ``[sandbox] mode = "off"`` (P11) and once
  with the sandbox at its default (``auto``: bubblewrap when it works here).
- ``bash.execute`` of a command printing 1 MB (``cat`` of a 1 MB text file), once at the
  defaults (64 KiB of head and tail kept) and once with ``max_output_bytes`` raised so the tool
  keeps the whole megabyte (the result is still cut to the pipeline's ``max_result_bytes``), against
  ``subprocess.run(["bash", "-c", "cat big.txt"], capture_output=True)`` decoded as text, both
  with the sandbox off; target <= 1.3x.
- the permission check alone (tree-sitter parse and analysis) of a typical chained command.

Rounds alternate A, B / B, A (``--per-round`` calls each, bench_sandbox's ``interleaved``) so
machine noise hits both sides alike; each side's figure is the median of all its calls, the ratio
the median of the per-round ratios and its range their lowest and highest. A row also gives the
CPU per call this process spent on each side, which the machine's load stretches less than wall
time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import load_span, record, report, stamp_load, tree_commit
from bench_sandbox import Figures, cpu_cells, figures_row, interleaved, row, within
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp import _sandbox as sandbox
from entropic_mcp_bash import BashServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--per-round", type=int, default=50)
    options = parser.parse_args()
    rounds, per_round = options.rounds, options.per_round
    counter = iter(range(10**9))
    rows: list[tuple[str, ...]] = []
    records: list[dict[str, object]] = []
    loads = [os.getloadavg()[0]]

    def keep(row_id: str, what: str, figures: Figures, peer: str, target: str, limit: float) -> None:
        """A row of docs/benchmarks.md; ``limit`` 0 for a row without a target."""
        ours, theirs, ratio = figures_row(figures)
        records.append(
            {
                "id": row_id,
                "what": what,
                "peer": f"{peer} {theirs}" if peer.endswith("`") else f"{peer}, {theirs}",
                "ours": ours + "; " + cpu_cells(figures, "the floor's"),
                "ratio": ratio,
                "target": target,
                "met": within(figures, limit) if limit else "—",
                "tools": tools,
            }
        )

    with tempfile.TemporaryDirectory(prefix="bench-bash-") as scratch:
        root = Path(scratch).resolve()
        line = "".join(chr(ord("a") + i % 26) for i in range(99)) + "\n"
        (root / "big.txt").write_text(line * 10_000, encoding="utf-8")  # 1,000,000 bytes
        time.sleep(1.1)  # past the racy second: bash re-lists git config of a just-made directory

        def manager_for(mode: str | None, table: dict[str, object] | None = None) -> tuple[ServerManager, BashServer]:
            server = BashServer(root=root)
            server.configure(table or {})
            data: dict[str, object] = {"storage": {"backend": "none"}, "permissions": {"default": "allow"}}
            if mode is not None:
                data["sandbox"] = {"mode": mode}
            config = config_from_dict(data, root=root)
            manager = ServerManager(config, servers=[server])
            sandbox.install(config, manager.permissions)
            return manager, server

        def call(manager: ServerManager, command: str) -> Callable[[], Awaitable[object]]:
            async def run() -> object:
                # A new conversation per call: the duplicate guard would refuse a repeated command.
                outcome = await manager.call(
                    "bash.execute", {"command": command}, CallContext(conversation_id=f"c{next(counter)}")
                )
                assert outcome.kind == "ok", outcome.response.result[:300]
                return outcome

            return run

        def floor_true() -> object:
            return subprocess.run(["bash", "-c", "true"], check=True)

        def floor_cat() -> object:
            done = subprocess.run(["bash", "-c", "cat big.txt"], cwd=root, check=True, capture_output=True)
            return done.stdout.decode("utf-8", "replace")

        off, server = manager_for("off")
        assert not sandbox.sandbox_for("bash").active
        tools = str(len(off.list_tools()))
        p11 = asyncio.run(interleaved(call(off, "true"), floor_true, rounds, per_round))
        loads.append(os.getloadavg()[0])
        rows.append(row('P11 bash.execute "true", sandbox off', p11, "subprocess.run(bash -c true)", "<= 1.5x"))
        keep(
            "P11",
            f'`bash.execute "true"`, `[sandbox] mode = "off"` (`bench_bash.py`, {rounds} ABAB rounds of {per_round})',
            p11,
            '`subprocess.run(["bash", "-c", "true"])`',
            "≤ 1.5×",
            1.5,
        )
        big = asyncio.run(interleaved(call(off, "cat big.txt"), floor_cat, rounds, max(1, per_round // 2)))
        loads.append(os.getloadavg()[0])
        rows.append(
            row("bash.execute of 1 MB output, defaults, sandbox off", big, "subprocess.run, captured", "<= 1.3x")
        )
        one_mb = (
            '`bash.execute "cat big.txt"` printing 1 MB, sandbox off, defaults (64 KiB of head and tail kept), same run',
            big,
        )
        # The whole megabyte kept by the tool (the default keeps 64 KiB of head and tail).
        whole, _ = manager_for("off", {"max_output_bytes": 2_000_000})
        big = asyncio.run(interleaved(call(whole, "cat big.txt"), floor_cat, rounds, max(1, per_round // 2)))
        loads.append(os.getloadavg()[0])
        rows.append(row("  same, max_output_bytes = 2 MB (all kept)", big, "subprocess.run, captured", "<= 1.3x"))
        whole_mb = (
            "same with `max_output_bytes` = 2 MB (the whole megabyte kept by the tool; the result still cut to "
            "the pipeline's cap)",
            big,
        )
        parts = server.permission_parts
        command = {"command": "cd src && git status --short | grep -v '^??' > /tmp/out.txt; timeout 5 pytest -q"}
        parse_samples = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(500):
                parts("execute", command)
            parse_samples.append((time.perf_counter() - t) / 500)
        rows.append(
            ("permission parts of a 5-command line", f"{statistics.median(parse_samples) * 1e6:.0f} us", "-", "-", "-")
        )

        default, _ = manager_for(None)
        mechanism = "bubblewrap" if sandbox.sandbox_for("bash").active else "none available: off"
        p11d = asyncio.run(interleaved(call(default, "true"), floor_true, rounds, per_round))
        loads.append(os.getloadavg()[0])
        rows.append(
            row(f'bash.execute "true", sandbox default ({mechanism})', p11d, "subprocess.run(bash -c true)", "-")
        )
        # The docs' order: both "true" rows, then the two 1 MB rows.
        keep("P11", f"same, sandbox at its default (`auto`: {mechanism} here), same run", p11d, "same", "—", 0)
        keep("—", *one_mb, "`subprocess.run` captured and decoded", "≤ 1.3×", 1.3)
        keep("—", *whole_mb, "same", "≤ 1.3×", 1.3)
        sandbox.uninstall()

    load = load_span(loads)
    rows.append((f"load average {load} (sampled before and after each part)", "-", "-", "-", "-"))
    report("bench_bash", [tuple(r) for r in rows])  # type: ignore[misc]
    if rounds >= 8 and per_round >= 50:  # a short trial run does not replace the recorded rows
        stamp_load(records, loads)
        record("bash", records, script=f"bench/bench_bash.py at {tree_commit()}")


if __name__ == "__main__":
    main()
