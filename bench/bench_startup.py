"""P4: ``entropic-mcp tools --json``, cold process, with the four first-party plugins.

Interleaved rounds (each round runs every side once, the order alternating) of four processes:
``python -c pass`` (the floor), the command answered from its listing cache (what a second run
with an unchanged setup does), the same command with the cache off (``ENTROPIC_MCP_TOOLS_CACHE=0``:
every plugin loaded and configured), and importing the MCP SDK server alone (for scale).
The bytecode cache of attrs' generated methods (``entropic_mcp/_codecache.py``) stays on in every
row, as on any run after the first (the first rounds fill it; ``ENTROPIC_MCP_CODE_CACHE=0`` costs the
uncached row about 120 M instructions more). Target: ≤ 150 ms. A round whose cache entry was
invalidated meanwhile (a source file edited by someone else on a shared machine) is refilled and
not counted.

Rows go to bench/results/P4-startup.toml.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved, record, report
from entropic_mcp.cli import _listing

ROUNDS = int(os.environ.get("BENCH_P4_ROUNDS", "15"))


def main() -> None:
    project = tempfile.mkdtemp(prefix="entropic-mcp-bench-")
    Path(project, "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["filesystem", "bash", "git", "entropic"]\n'
        '[servers.entropic]\ntiers = ["lead", "researcher", "coder"]\n[storage]\nbackend = "none"\n'
    )
    past = time.time() - 60
    os.utime(Path(project, "entropic-mcp.toml"), (past, past))
    os.utime(project, (past, past))
    # As installed from wheels: bytecode caches exist. (Some shells export PYTHONDONTWRITEBYTECODE,
    # which would make every run compile every module from source and measure the compiler.)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("ENTROPIC_MCP_")}
    env["ENTROPIC_MCP_DATA_DIR"] = str(Path(project, "data"))
    cache = Path(project, "data", "cache", "tools")
    cli = shutil.which("entropic-mcp") or str(Path(sys.executable).parent / "entropic-mcp")

    cpu: dict[str, list[float]] = {}

    def run(argv: list[str], extra: dict[str, str] | None = None, side: str = "") -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=project, stdout=subprocess.DEVNULL, check=True, env={**env, **(extra or {})})
        took = (time.perf_counter() - start) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if side:  # CPU time of the process (user + system): what the load cannot stretch as much
            spent = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
            cpu.setdefault(side, []).append(spent)
        return took

    def entry_valid() -> bool:
        entries = list(cache.glob("*.json"))
        if not entries:
            return False
        for entry in entries:  # one per environment (valgrind's adds LD_PRELOAD)
            depends = json.loads(entry.read_bytes())["depends"]
            if not all(_listing._signature(p) == (tuple(s) if s else None) for p, s in depends):
                return False
        return True

    def fill() -> None:
        for _ in range(10):
            run([cli, "tools", "--json"])
            if entry_valid():
                return
            shutil.rmtree(cache, ignore_errors=True)
            time.sleep(2.5)  # a dependency changed under 2 s ago: not stored yet
        raise SystemExit("the listing cache could not be filled: the installed sources keep changing")

    listing = json.loads(
        subprocess.run([cli, "tools", "--json"], cwd=project, capture_output=True, check=True, env=env).stdout
    )
    servers = sorted({tool["server"] for tool in listing})
    fill()
    dropped = 0

    def cached() -> float:
        nonlocal dropped
        while True:
            took = run([cli, "tools", "--json"], side="try")
            if entry_valid():
                cpu.setdefault("cached", []).append(cpu["try"].pop())
                return took
            dropped += 1
            fill()

    counts: dict[str, int] = {}
    if shutil.which("valgrind") and os.environ.get("BENCH_P4_CALLGRIND", "1") != "0":
        # Instruction counts (callgrind): what the load cannot stretch. The cache entry of a run
        # under valgrind is its own (the environment differs), so it is filled under valgrind first.
        def instructions(argv: list[str], extra: dict[str, str] | None = None) -> int:
            done = subprocess.run(
                ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
                cwd=project,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                check=True,
                env={**env, **(extra or {})},
            )
            return int(re.findall(r"refs:\s+([\d,]+)", done.stderr)[-1].replace(",", ""))

        def refresh() -> None:
            # On a shared machine someone else's edit to an installed source invalidates the
            # entry between runs under valgrind (minutes each): the entry's signatures are taken
            # afresh just before the measured run, and the run counts only if they still hold after.
            for entry in cache.glob("*.json"):
                data = json.loads(entry.read_bytes())
                data["depends"] = [(p, _listing._signature(p)) for p, _ in data["depends"]]
                entry.write_text(json.dumps(data))

        counts["pass"] = instructions([sys.executable, "-c", "pass"])
        shutil.rmtree(cache, ignore_errors=True)
        for _ in range(3):
            instructions([cli, "tools", "--json"])  # fills the valgrind environment's entry
            if list(cache.glob("*.json")):
                break
            time.sleep(2.5)
        for _ in range(5 if list(cache.glob("*.json")) else 0):
            refresh()
            counts["cached"] = instructions([cli, "tools", "--json"])
            if entry_valid():
                break
        else:
            counts.pop("cached", None)  # never measured as a hit: not reported
        counts["uncached"] = instructions([cli, "tools", "--json"], {_listing.ENV_SWITCH: "0"})
        print("  instructions (callgrind): " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))

    loads = [os.getloadavg()[0]]
    samples = interleaved(
        {
            "pass": lambda: run([sys.executable, "-c", "pass"], side="pass"),
            "cached": cached,
            "uncached": lambda: run([cli, "tools", "--json"], {_listing.ENV_SWITCH: "0"}, side="uncached"),
            "sdk": lambda: run([sys.executable, "-c", "import mcp.server.mcpserver"], side="sdk"),
        },
        ROUNDS,
    )
    loads.append(os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in samples.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items() if v}
    rng = {k: f"{min(v):.0f}–{max(v):.0f}" for k, v in samples.items()}
    load = f"{min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores"
    what = f"`entropic-mcp tools --json`, cold process, {len(listing)} tools of {', '.join(servers)}"
    report(
        "P4-startup",
        [
            (
                f"P4 {what}, listing cache",
                f"{med['cached']:.0f} ms",
                f"python -c pass {med['pass']:.0f} ms",
                f"{med['cached'] / med['pass']:.1f}×",
                "≤ 150 ms",
            ),
            (
                "P4 same, cache off (every plugin loaded)",
                f"{med['uncached']:.0f} ms",
                "",
                f"{med['uncached'] / med['pass']:.1f}×",
                "≤ 150 ms",
            ),
            (
                "    for scale: importing the MCP SDK server alone",
                "—",
                f"{med['sdk']:.0f} ms",
                f"{med['cached'] / med['sdk']:.2f}×",
                "—",
            ),
        ],
    )
    print("  CPU per process (user + system): " + ", ".join(f"{k} {v:.0f} ms" for k, v in cpu_med.items()))
    print(f"  {ROUNDS} interleaved rounds, load {load}; rounds refilled after an edit elsewhere: {dropped}")
    record(
        "P4-startup",
        [
            {
                "id": "P4",
                "what": f"{what}, answered from the listing cache (setup unchanged since the last run; "
                f"{ROUNDS} interleaved rounds, median (range))",
                "peer": f"`python -c pass` {med['pass']:.0f} ms ({rng['pass']})",
                "ours": f"{med['cached']:.0f} ms ({rng['cached']}); CPU {cpu_med['cached']:.0f} ms against {cpu_med['pass']:.0f}",
                "ratio": f"{med['cached'] / med['pass']:.1f}× the floor"
                + (
                    f"; instructions {counts['cached'] / 1e6:.0f} M against {counts['pass'] / 1e6:.0f} M: "
                    f"{counts['cached'] / counts['pass']:.1f}×"
                    if "cached" in counts
                    else ""
                ),
                "target": "≤ 150 ms",
                "met": "yes" if med["cached"] <= 150 else "**no**",
                "load": load,
                "tools": str(len(listing)),
            },
            {
                "id": "P4",
                "what": "same, cache off or after any change to the setup (every plugin imported and configured)",
                "peer": f"SDK server import alone {med['sdk']:.0f} ms ({rng['sdk']})",
                "ours": f"{med['uncached']:.0f} ms ({rng['uncached']}); CPU {cpu_med['uncached']:.0f} ms",
                "ratio": f"{med['uncached'] / med['sdk']:.2f}× the SDK import"
                + (
                    f"; instructions {counts['uncached'] / 1e6:.0f} M: {counts['uncached'] / counts['pass']:.1f}× "
                    "`python -c pass`"
                    if "uncached" in counts
                    else ""
                ),
                "target": "≤ 150 ms",
                "met": "yes" if med["uncached"] <= 150 else "**no**",
                "load": load,
                "tools": str(len(listing)),
            },
        ],
        script="bench/bench_startup.py",
    )
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
