"""The git server against the git CLI and mcp-server-git (performance.md P8).

Run: ``python bench/bench_git.py [--runs N]`` (default 200). Builds a 500-file, 200-commit
repository (with 20 modified and 5 untracked files), then prints, in one run:

- ``git.status``, ``git.log`` (max_count 50) and ``git.diff`` called in-process through the whole
  pipeline (``ServerManager.call``: schema, duplicate check, permissions, dispatch, envelope,
  porcelain parsing) against ``subprocess.run`` of the git command giving the same data (the
  floor); target ≤ 1.3×. Rounds alternate between the two so machine noise hits both alike;
  medians are compared.
- for reference, the same git command with ``GIT_FLUSH=0``, as the server runs git: git then
  buffers its stdout instead of flushing it after every commit, which makes ``git log`` itself
  cheaper; this row shows how much of the gap is the server's own cost.
- for reference, mcp-server-git's tool functions (``git_status``, ``git_log``,
  ``git_diff_unstaged`` — called directly, without its MCP layer, which favours it) on the same
  repository, from a separate venv; skipped with a note when it cannot be installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import peer_python, record, report
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp_git import GitServer

FILES, COMMITS, MODIFIED, UNTRACKED = 500, 200, 20, 5
ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/local/bin:/usr/bin:/bin"}
BUFFERED_ENV = {**ENV, "GIT_FLUSH": "0"}


def build_repo(path: Path) -> None:
    """500 files in 25 directories; commit 1 adds them, commits 2-200 change 5 files each."""

    def run(*args: str, **kw: object) -> None:
        subprocess.run(["git", *args], cwd=path, env=ENV, check=True, capture_output=True, **kw)

    run("init", "-q", "-b", "main")
    stream: list[bytes] = []
    names = [f"pkg{i % 25:02d}/module_{i:03d}.py" for i in range(FILES)]

    def blob(text: str) -> bytes:
        data = text.encode()
        return b"data %d\n%s\n" % (len(data), data)

    def body(name: str, version: int) -> str:
        return "".join(f"# {name} line {n} version {version}\n" for n in range(40))

    for number in range(1, COMMITS + 1):
        stamp = 1_700_000_000 + number * 3600
        message = f"commit {number}: update modules"
        stream.append(b"commit refs/heads/main\n")
        stream.append(b"committer Bench <bench@example.com> %d +0000\n" % stamp)
        stream.append(blob(message))
        touched = names if number == 1 else [names[(number * 7 + k * 101) % FILES] for k in range(5)]
        for name in touched:
            stream.append(b"M 100644 inline " + name.encode() + b"\n" + blob(body(name, number)))
    run("fast-import", "--quiet", input=b"".join(stream))
    run("checkout", "-q", "-f", "main")
    run("config", "user.name", "Bench")
    run("config", "user.email", "bench@example.com")
    for i in range(MODIFIED):
        target = path / names[i * 13]
        target.write_text(target.read_text().replace("line 20 ", "line 20 changed "))
    for i in range(UNTRACKED):
        (path / f"untracked_{i}.txt").write_text("new\n")


CASES = {
    "status": ({}, ["status", "--porcelain=v2", "--branch", "-z"]),
    "log 50": ({"max_count": 50}, ["log", "-z", "--max-count=50", "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%s"]),
    "diff": ({}, ["diff"]),
}
TOOLS = {"status": "git.status", "log 50": "git.log", "diff": "git.diff"}

PEER_SCRIPT = r"""
import json, statistics, sys, time
import git
from mcp_server_git.server import git_diff_unstaged, git_log, git_status
repo = git.Repo(sys.argv[1])
runs = int(sys.argv[2])
cases = {"status": lambda: git_status(repo), "log 50": lambda: git_log(repo, max_count=50),
         "diff": lambda: git_diff_unstaged(repo)}
out = {}
for name, fn in cases.items():
    fn()
    samples = []
    for _ in range(runs):
        t = time.perf_counter(); fn(); samples.append(time.perf_counter() - t)
    out[name] = statistics.median(samples)
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    git = shutil.which("git") or "git"

    with tempfile.TemporaryDirectory(prefix="bench-git-") as scratch:
        root = Path(scratch).resolve() / "repo"
        root.mkdir()
        started = time.perf_counter()
        build_repo(root)
        print(f"built a {FILES}-file, {COMMITS}-commit repository in {time.perf_counter() - started:.1f} s")
        # The server does not trust a config listing of files written in the last second (git's
        # racy-timestamp rule): measuring at once would time a fresh listing on every call.
        time.sleep(1.5)

        server = GitServer(root=root)
        config = config_from_dict({"storage": {"backend": "none"}, "permissions": {"default": "allow"}}, root=root)
        manager = ServerManager(config, servers=[server])
        server.configure({})
        server.runner.env.update(ENV)
        counter = iter(range(10**9))

        async def ours_batch(case: str, n: int) -> list[float]:
            args, _ = CASES[case]
            samples = []
            for _ in range(n):
                # a new conversation per call: the duplicate guard would answer a repeat itself
                ctx = CallContext(conversation_id=f"c{next(counter)}")
                t = time.perf_counter()
                outcome = await manager.call(TOOLS[case], args, ctx)
                samples.append(time.perf_counter() - t)
                assert outcome.kind == "ok", outcome.response.result[:300]
            return samples

        def floor_batch(case: str, n: int, env: dict[str, str] = ENV) -> list[float]:
            _, command = CASES[case]
            samples = []
            for _ in range(n):
                t = time.perf_counter()
                subprocess.run([git, *command], cwd=root, env=env, check=True, capture_output=True)
                samples.append(time.perf_counter() - t)
            return samples

        async def measure() -> dict[str, tuple[float, float, float]]:
            medians = {}
            for case in CASES:
                await ours_batch(case, 10)  # warm-up: work-tree discovery, page cache
                floor_batch(case, 10)
                ours: list[float] = []
                floor: list[float] = []
                buffered: list[float] = []
                step = 20
                for index in range(0, runs, step):
                    # ABAB: the order flips each round, so neither side always runs on a warm cache
                    if index // step % 2:
                        floor += floor_batch(case, step)
                        buffered += floor_batch(case, step, BUFFERED_ENV)
                        ours += await ours_batch(case, step)
                    else:
                        ours += await ours_batch(case, step)
                        floor += floor_batch(case, step)
                        buffered += floor_batch(case, step, BUFFERED_ENV)
                medians[case] = (statistics.median(ours), statistics.median(floor), statistics.median(buffered))
                per_round[case] = [
                    statistics.median(ours[i : i + step]) / statistics.median(floor[i : i + step])
                    for i in range(0, len(ours), step)
                ]
            return medians

        per_round: dict[str, list[float]] = {}
        medians = asyncio.run(measure())
        results = []
        for case, (ours, floor, _buffered) in medians.items():
            ratio = ours / floor
            results.append(
                {
                    "id": "P8",
                    "what": f"git `{case}`, tool call in-process ({runs} runs in interleaved rounds of 20, "
                    "git run with `GIT_FLUSH=0`, a hostile config neutralised)",
                    "peer": f"`git` CLI {floor * 1e3:.2f} ms",
                    "ours": f"{ours * 1e3:.2f} ms",
                    "ratio": f"{ratio:.2f}× ({min(per_round[case]):.2f}–{max(per_round[case]):.2f}×)",
                    "target": "≤ 1.3×",
                    "met": "yes" if ratio <= 1.3 else "**no**",
                }
            )
        for case, (ours, _, buffered) in medians.items():
            results.append(
                {
                    "id": "P8",
                    "what": f"for reference: git `{case}` against the CLI run with `GIT_FLUSH=0` too",
                    "peer": f"`git` CLI with `GIT_FLUSH=0` {buffered * 1e3:.2f} ms",
                    "ours": f"{ours * 1e3:.2f} ms",
                    "ratio": f"{ours / buffered:.2f}×",
                    "target": "—",
                    "met": "—",
                }
            )
        rows = []
        for case, (ours, floor, _) in medians.items():
            rows.append(
                (
                    f"P8 {case}: tool call vs git CLI",
                    f"{ours * 1e3:.2f} ms",
                    f"{floor * 1e3:.2f} ms",
                    f"{ours / floor:.2f}x",
                    "<= 1.3x",
                )
            )
        for case, (ours, _, buffered) in medians.items():
            rows.append(
                (
                    f"P8 {case}: vs git CLI with GIT_FLUSH=0 (reference)",
                    f"{ours * 1e3:.2f} ms",
                    f"{buffered * 1e3:.2f} ms",
                    f"{ours / buffered:.2f}x",
                    "-",
                )
            )

        peer = peer_python("mcp-server-git", "mcp-server-git")
        if peer is None:
            print("note: mcp-server-git could not be installed into a separate venv; its rows are skipped")
        else:
            done = subprocess.run(
                [peer, "-c", PEER_SCRIPT, str(root), str(runs)],
                capture_output=True,
                text=True,
                env={**ENV, "HOME": scratch},
            )
            if done.returncode != 0:
                print(f"note: mcp-server-git run failed, its rows are skipped: {done.stderr.strip()[-300:]}")
            else:
                for case, seconds in json.loads(done.stdout).items():
                    ours = medians[case][0]
                    results.append(
                        {
                            "id": "P8",
                            "what": f"for reference: `mcp-server-git` {case}",
                            "peer": f"`git` CLI {medians[case][1] * 1e3:.2f} ms",
                            "ours": f"`mcp-server-git` {seconds * 1e3:.2f} ms (ours {ours * 1e3:.2f} ms)",
                            "ratio": f"{seconds / medians[case][1]:.2f}× the CLI",
                            "target": "—",
                            "met": "—",
                        }
                    )
                    rows.append(
                        (
                            f"P8 {case}: vs mcp-server-git (reference)",
                            f"{ours * 1e3:.2f} ms",
                            f"{seconds * 1e3:.2f} ms",
                            f"{ours / seconds:.2f}x",
                            "-",
                        )
                    )
                    rows.append(
                        (
                            f"     mcp-server-git {case} vs git CLI",
                            f"{seconds * 1e3:.2f} ms",
                            f"{medians[case][1] * 1e3:.2f} ms",
                            f"{seconds / medians[case][1]:.2f}x",
                            "-",
                        )
                    )
        report("P8-git", rows)
        if runs >= 200:  # a short trial run does not replace the recorded rows
            record("git", results, script="bench/bench_git.py")


if __name__ == "__main__":
    main()
