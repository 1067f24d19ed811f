"""The OS sandbox's cost (issue 22: P16, P11 with it off, git P8 with it on).

Run: ``python bench/bench_sandbox.py [--rounds N] [--per-round M]`` (defaults 6 and 50). Prints:

- P16: ``bash.execute {"command": "true"}`` through the in-process pipeline with
  ``[sandbox] mode = "required"`` (bubblewrap) against ``subprocess.run(["bash", "-c", "true"])``;
  target <= 2.0x.
- P11 with the sandbox off, the same harness: it must stay where bench_bash puts it (<= 1.5x).
- for reference, ``bwrap ... bash -c true`` started by ``subprocess.run``: a ``bwrap`` per
  command (the fallback when no persistent sandbox can start), with the same namespaces and
  mounts. The sandboxed calls above go to the policy's persistent ``bwrap`` (``_zygote``).
- git P8 (``status`` and ``log 50`` on bench_git's 500-file, 200-commit repository) with the
  sandbox on, against the git CLI; target <= 1.5x.

Rounds alternate A, B, A, B (``--per-round`` calls each) so machine noise hits both sides alike;
each side's figure is the median of all its calls, and the range is the lowest and highest
per-round ratio.
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

sys.path.insert(0, str(Path(__file__).parent))

from _common import report
from bench_git import CASES, ENV, TOOLS, build_repo
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp import _sandbox as sandbox
from entropic_mcp_bash import BashServer
from entropic_mcp_git import GitServer

Sync = Callable[[], object]


#: CPU seconds per call of the last ``interleaved`` run: (this process for ours, the sandbox's
#: own processes for ours, this process for the floor). Less sensitive to the machine's load
#: than wall time (the floor's children and our commands are not counted).
LAST_CPU: tuple[float, float, float] = (0.0, 0.0, 0.0)


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


async def interleaved(
    ours: Callable[[], Awaitable[object]], floor: Sync, rounds: int, per_round: int
) -> tuple[float, float, float, float]:
    """(our median, floor median, lowest round ratio, highest round ratio), in seconds."""
    global LAST_CPU
    for _ in range(10):  # warm-up: first forks, page cache, tree-sitter
        await ours()
        floor()
    mine: list[float] = []
    theirs: list[float] = []
    ratios = []
    cpu_ours = cpu_box = cpu_floor = 0.0
    for _ in range(rounds):
        a = []
        c, box = time.process_time(), sandbox_cpu()
        for _ in range(per_round):
            t = time.perf_counter()
            await ours()
            a.append(time.perf_counter() - t)
        cpu_ours += time.process_time() - c
        cpu_box += sandbox_cpu() - box
        b = []
        c = time.process_time()
        for _ in range(per_round):
            t = time.perf_counter()
            floor()
            b.append(time.perf_counter() - t)
        cpu_floor += time.process_time() - c
        mine += a
        theirs += b
        ratios.append(statistics.median(a) / statistics.median(b))
    calls = rounds * per_round
    LAST_CPU = (cpu_ours / calls, cpu_box / calls, cpu_floor / calls)
    return statistics.median(mine), statistics.median(theirs), min(ratios), max(ratios)


def cpu_row(what: str) -> tuple[str, ...]:
    ours, box, floor = LAST_CPU
    extra = f" + {box * 1e6:.0f} us sandbox" if box else ""
    return (f"  {what}: CPU per call", f"{ours * 1e6:.0f} us server{extra}", f"{floor * 1e6:.0f} us", "-", "-")


def row(what: str, figures: tuple[float, float, float, float], floor: str, target: str) -> tuple[str, ...]:
    ours, theirs, low, high = figures
    return (
        what,
        f"{ours * 1000:.2f} ms",
        f"{theirs * 1000:.2f} ms {floor}",
        f"{ours / theirs:.2f}x ({low:.2f}-{high:.2f}x)",
        target,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=50)
    options = parser.parse_args()
    rounds, per_round = options.rounds, options.per_round
    found = sandbox.find()
    if found.path is None:
        sys.exit(f"no working bwrap: {found.problem}")
    rows: list[tuple[str, ...]] = []
    started_load = os.getloadavg()[0]
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
        p16 = asyncio.run(interleaved(true_call(on), floor, rounds, per_round))
        rows.append(
            row('P16 bash.execute "true", sandbox on (pipeline)', p16, "subprocess.run(bash -c true)", "<= 2.0x")
        )
        rows.append(cpu_row("P16"))

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
        rows.append(
            row('P11 bash.execute "true", sandbox off (pipeline)', p11, "subprocess.run(bash -c true)", "<= 1.5x")
        )
        rows.append(cpu_row("P11"))

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
            rows.append(row(f"P8 git {case}, sandbox on (tool call)", figures, "git CLI", "<= 1.5x"))
            rows.append(cpu_row(f"P8 {case}"))
        sandbox.uninstall()

    load = f"load average {started_load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs"
    rows.append((load, "", "", "", ""))
    report("bench_sandbox", [tuple(r) for r in rows])  # type: ignore[misc]


if __name__ == "__main__":
    main()
