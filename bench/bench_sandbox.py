"""The OS sandbox's cost (issue 22: P16, P11 with it off, git P8 with it on).

Run: ``python bench/bench_sandbox.py [--rounds N] [--per-round M]`` (defaults 8 and 50). Prints,
and records in bench/results/sandbox.toml (the rows of docs/benchmarks.md; a run with fewer
rounds or calls than the defaults is a trial and records nothing):

- P16: ``bash.execute {"command": "true"}`` through the in-process pipeline with
  ``[sandbox] mode = "required"`` (bubblewrap) against ``subprocess.run(["bash", "-c", "true"])``;
  target <= 2.0x.
- P11 with the sandbox off, the same harness: it must stay where bench_bash puts it (<= 1.5x).
- for reference, ``bwrap ... bash -c true`` started by ``subprocess.run``: a ``bwrap`` per
  command (the fallback when no persistent sandbox can start), with the same namespaces and
  mounts. The sandboxed calls above go to the policy's persistent ``bwrap`` (``_zygote``).
- git P8 (``status`` and ``log 50`` on bench_git's 500-file, 200-commit repository) with the
  sandbox on, against the git CLI; target <= 1.5x.

Rounds alternate A, B / B, A (``--per-round`` calls each) so machine noise hits both sides alike;
each side's figure is the median of all its calls, the ratio the median of the per-round ratios
and its range their lowest and highest. The load average is sampled before and after each part.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).parent))

from _common import load_span, ratio_spread, record, report, stamp_load, tree_commit
from bench_git import CASES, ENV, TOOLS, build_repo
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp import _sandbox as sandbox
from entropic_mcp_bash import BashServer
from entropic_mcp_git import GitServer

Sync = Callable[[], object]


class Figures(NamedTuple):
    """One interleaved comparison: each side's median call (seconds), the rounds' ratios, and
    the CPU seconds per call: this process for ours, the sandbox's own processes for ours, this
    process for the floor. CPU is less sensitive to the machine's load than wall time (the
    floor's children and our commands are not counted)."""

    ours: float
    floor: float
    ratios: list[float]
    cpu: tuple[float, float, float]

    @property
    def ratio(self) -> float:
        """The median of the rounds' ratios (the figure the rows give; the range is theirs too)."""
        return statistics.median(self.ratios)


def sandbox_cpu() -> float:
    """CPU seconds used so far by the persistent sandboxes' own processes (bwrap, spawner and
    reapers, not the commands, which they reap)."""
    from entropic_mcp._sandbox import _zygote

    total = 0
    for instance in _zygote.POOL.instances():
        todo = [instance.popen.pid]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
                    todo += [int(child) for child in fh.read().split()]
            except OSError:
                continue
            if fields[0] != b"Z":
                total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def interleaved(ours: Callable[[], Awaitable[object]], floor: Sync, rounds: int, per_round: int) -> Figures:
    """Each side's median over all its calls, and each round's ratio of medians.

    Each round runs ``per_round`` calls of each side, ours first in even rounds and the floor
    first in odd ones (ABBA...), so a side is not always the one that runs after the other."""
    for _ in range(10):  # warm-up: first forks, page cache, tree-sitter
        await ours()
        floor()
    mine: list[float] = []
    theirs: list[float] = []
    ratios = []
    cpu = {"ours": 0.0, "box": 0.0, "floor": 0.0}

    async def run_ours() -> list[float]:
        times = []
        c, box = time.process_time(), sandbox_cpu()
        for _ in range(per_round):
            t = time.perf_counter()
            await ours()
            times.append(time.perf_counter() - t)
        cpu["ours"] += time.process_time() - c
        cpu["box"] += sandbox_cpu() - box
        return times

    def run_floor() -> list[float]:
        times = []
        c = time.process_time()
        for _ in range(per_round):
            t = time.perf_counter()
            floor()
            times.append(time.perf_counter() - t)
        cpu["floor"] += time.process_time() - c
        return times

    for i in range(rounds):
        if i % 2 == 0:
            a = await run_ours()
            b = run_floor()
        else:
            b = run_floor()
            a = await run_ours()
        mine += a
        theirs += b
        ratios.append(statistics.median(a) / statistics.median(b))
    calls = rounds * per_round
    per_call = (cpu["ours"] / calls, cpu["box"] / calls, cpu["floor"] / calls)
    return Figures(statistics.median(mine), statistics.median(theirs), ratios, per_call)


def cpu_row(what: str, figures: Figures) -> tuple[str, ...]:
    ours, box, floor = figures.cpu
    extra = f" + {box * 1e6:.0f} us sandbox" if box else ""
    return (f"  {what}: CPU per call", f"{ours * 1e6:.0f} us server{extra}", f"{floor * 1e6:.0f} us", "-", "-")


def row(what: str, figures: Figures, floor: str, target: str) -> tuple[str, ...]:
    ours, theirs, ratios, _ = figures
    low, high = min(ratios), max(ratios)
    return (
        what,
        f"{ours * 1000:.2f} ms",
        f"{theirs * 1000:.2f} ms {floor}",
        f"{figures.ratio:.2f}x ({low:.2f}-{high:.2f}x)",
        target,
    )


def figures_row(figures: Figures) -> tuple[str, str, str]:
    """(ours, floor, ratio) cells of a docs row: ms, and the rounds' median ratio with their range."""
    return f"{figures.ours * 1000:.2f} ms", f"{figures.floor * 1000:.2f} ms", ratio_spread(figures.ratios)


def cpu_cells(figures: Figures, floor: str) -> str:
    """The last run's CPU per call, as the rows give it: the server, the sandbox's processes, the floor."""
    ours, box, theirs = figures.cpu
    extra = f" + {box * 1e6:.0f} µs in the sandbox" if box else ""
    return f"CPU per call {ours * 1e6:.0f} µs in the server{extra}, {floor} {theirs * 1e6:.0f} µs"


def within(figures: Figures, limit: float) -> bool:
    return figures.ratio <= limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--per-round", type=int, default=50)
    options = parser.parse_args()
    rounds, per_round = options.rounds, options.per_round
    found = sandbox.find()
    if found.path is None:
        sys.exit(f"no working bwrap: {found.problem}")
    rows: list[tuple[str, ...]] = []
    records: list[dict[str, object]] = []
    loads = [os.getloadavg()[0]]
    counter = iter(range(10**9))

    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as scratch:
        root = Path(scratch).resolve() / "project"
        root.mkdir()
        (root / "entropic-mcp.toml").write_text("", encoding="utf-8")

        def bash_manager(mode: str) -> ServerManager:
            server = BashServer(root=root)
            server.configure({})
            data = {"storage": {"backend": "none"}, "permissions": {"default": "allow"}, "sandbox": {"mode": mode}}
            config = config_from_dict(data, root=root)
            manager = ServerManager(config, servers=[server])
            sandbox.install(config, manager.permissions, found=found)
            return manager

        def true_call(manager: ServerManager) -> Callable[[], Awaitable[object]]:
            async def call() -> object:
                # a new conversation per call: the duplicate guard would refuse a repeated "true"
                outcome = await manager.call(
                    "bash.execute", {"command": "true"}, CallContext(conversation_id=f"c{next(counter)}")
                )
                assert outcome.kind == "ok", outcome.response.result
                return outcome

            return call

        def floor() -> object:
            return subprocess.run(["bash", "-c", "true"], check=True)

        on = bash_manager("required")
        assert sandbox.sandbox_for("bash").active
        bash_tools = str(len(on.list_tools()))
        p16 = asyncio.run(interleaved(true_call(on), floor, rounds, per_round))
        loads.append(os.getloadavg()[0])
        rows.append(
            row('P16 bash.execute "true", sandbox on (pipeline)', p16, "subprocess.run(bash -c true)", "<= 2.0x")
        )
        rows.append(cpu_row("P16", p16))
        ours, theirs, ratio = figures_row(p16)
        records.append(
            {
                "id": "P16",
                "what": f'`bash.execute "true"` with `[sandbox] mode = "required"` (`bench_sandbox.py --rounds {rounds} '
                f"--per-round {per_round}`, interleaved rounds)",
                "peer": f'`subprocess.run(["bash", "-c", "true"])` {theirs}',
                "ours": ours + "; " + cpu_cells(p16, "the floor's"),
                "ratio": ratio,
                "target": "≤ 2.0×",
                "met": within(p16, 2.0),
                "tools": bash_tools,
            }
        )

        prepared = sandbox.sandbox_for("bash").prepare(["bash", "-c", "true"], cwd=root, env=None)
        try:

            async def bare() -> object:
                return subprocess.run(prepared.argv, env=prepared.env, cwd=root, check=True)

            mechanism = asyncio.run(interleaved(bare, floor, rounds, per_round))
        finally:
            prepared.close()
        rows.append(row("  reference: bwrap ... bash -c true alone", mechanism, "subprocess.run(bash -c true)", "-"))

        off = bash_manager("off")
        assert not sandbox.sandbox_for("bash").active
        p11 = asyncio.run(interleaved(true_call(off), floor, rounds, per_round))
        loads.append(os.getloadavg()[0])
        rows.append(
            row('P11 bash.execute "true", sandbox off (pipeline)', p11, "subprocess.run(bash -c true)", "<= 1.5x")
        )
        rows.append(cpu_row("P11", p11))
        ours, theirs, ratio = figures_row(p11)
        records.append(
            {
                "id": "P11",
                "what": '`bash.execute "true"`, sandbox off, same run',
                "peer": f"same, {theirs}",
                "ours": ours + "; " + cpu_cells(p11, "the floor's"),
                "ratio": ratio,
                "target": "≤ 1.5×",
                "met": within(p11, 1.5),
                "tools": bash_tools,
            }
        )

        repo = Path(scratch).resolve() / "repo"
        repo.mkdir()
        build_repo(repo)
        time.sleep(1.5)  # past git's racy-timestamp second: the server would re-list the config each call
        server = GitServer(root=repo)
        config = config_from_dict(
            {"storage": {"backend": "none"}, "permissions": {"default": "allow"}, "sandbox": {"mode": "required"}},
            root=repo,
        )
        manager = ServerManager(config, servers=[server])
        server.configure({})
        server.runner.env.update(ENV)
        sandbox.install(config, manager.permissions, found=found)
        git = shutil.which("git") or "git"
        for case in ("status", "log 50"):
            args, command = CASES[case]

            async def tool(args: dict[str, object] = args, case: str = case) -> object:
                outcome = await manager.call(TOOLS[case], args, CallContext(conversation_id=f"c{next(counter)}"))
                assert outcome.kind == "ok", outcome.response.result[:300]
                return outcome

            def cli(command: list[str] = command) -> object:
                return subprocess.run([git, *command], cwd=repo, env=ENV, check=True, capture_output=True)

            figures = asyncio.run(interleaved(tool, cli, max(2, rounds // 2), per_round // 2 or 1))
            loads.append(os.getloadavg()[0])
            rows.append(row(f"P8 git {case}, sandbox on (tool call)", figures, "git CLI", "<= 1.5x"))
            rows.append(cpu_row(f"P8 {case}", figures))
            ours, theirs, ratio = figures_row(figures)
            name = case.replace(" ", "` ", 1) if " " in case else f"{case}`"
            records.append(
                {
                    "id": "P8",
                    "what": f"git `{name} with the sandbox on, same run",
                    "peer": f"`git` CLI {theirs}",
                    "ours": ours + "; " + cpu_cells(figures, "the CLI's parent"),
                    "ratio": ratio,
                    "target": "≤ 1.5×",
                    "met": within(figures, 1.5),
                    "tools": str(len(manager.list_tools())),
                }
            )
        sandbox.uninstall()

    load = load_span(loads)
    rows.append((f"load average {load} (sampled before and after each part)", "", "", "", ""))
    report("bench_sandbox", [tuple(r) for r in rows])  # type: ignore[misc]
    if rounds >= 8 and per_round >= 50:  # a short trial run does not replace the recorded rows
        stamp_load(records, loads)
        record("sandbox", records, script=f"bench/bench_sandbox.py at {tree_commit()}")


if __name__ == "__main__":
    main()
