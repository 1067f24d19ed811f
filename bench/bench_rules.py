"""P18: the cost of a call as the rule set grows — instructions per call (callgrind), in-process.

A team's policy file grows; what one call costs must not grow with rules that cannot match it.
Each row runs calls through the whole pipeline (``ServerManager.call``) with 10, 100 and 1,000
rules for other commands and other directories (half bash rules, half filesystem path rules),
every call with different arguments so no cached verdict answers it:

- ``filesystem.file_info`` on a file inside the root (path rules are matched for the read);
- ``bash.execute`` of ``echo <n>`` (the command is parsed and its parts matched; with
  ``default = "deny"`` and no rule allowing it, no process is started, so the row counts the
  permission stage and not ``fork``).

Instructions are counted with ``valgrind --tool=callgrind`` (repeatable whatever the machine's
load): the count of a run of ``CALLS`` calls minus that of a run of 0 calls, divided by
``CALLS``. Target: 1,000 rules ≤ 1.2× 10 rules, for both tools. Without valgrind it falls back
to CPU time per call (noisier, same ratios), the rule counts run in interleaved rounds (ABAB,
the order flipping each round), each figure the median and the ratio's range over the rounds.

Writes bench/results/rules.toml (the P18 rows of docs/benchmarks.md; ``--time`` runs say so in
the row) with the load sampled before and after.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved, load_span, ratio_spread, record, report, tree_commit

CALLS = 100
RULE_COUNTS = (10, 100, 1000)
TIME_ROUNDS = 5

WORKER = r"""
import sys, time, anyio
from pathlib import Path
from entropic_mcp import CallContext
from entropic_mcp.testing import make_manager
import entropic_mcp_bash, entropic_mcp_filesystem

root, tool, rules, calls = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for i in range(calls + 1):
    (root / f"f{i}.txt").write_text("x")
deny = [f"bash.execute:tool{i} *" for i in range(rules // 2)]
deny += [f"filesystem.read_file:dir{i}/*" for i in range(rules - rules // 2)]
manager = make_manager(
    root,
    config={"permissions": {"default": "deny", "allow_read": True, "deny": deny},
            "sandbox": {"mode": "off"}},
    plugins=[entropic_mcp_bash, entropic_mcp_filesystem],
)

async def run():
    ctx = CallContext(conversation_id="bench")
    # one call first: imports, caches and lazy set-up are not per call
    await manager.call(*args(calls), ctx)
    start = time.process_time()
    for i in range(calls):
        outcome = await manager.call(*args(i), CallContext(conversation_id=f"bench{i}"))
        assert outcome.response is not None
    return time.process_time() - start

def args(i):
    if tool == "bash":
        return "bash.execute", {"command": f"echo {i}"}
    return "filesystem.file_info", {"path": f"f{i}.txt"}

print(len(manager.list_tools()), anyio.run(run))
"""

#: tools served by the worker's manager (bash and filesystem), as the last run printed it
TOOLS: list[str] = []


def _run(tool: str, rules: int, calls: int, *, callgrind: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-c", WORKER, tmp, tool, str(rules), str(calls)]
        if not callgrind:
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            tools, seconds = out.stdout.strip().splitlines()[-1].split()
            TOOLS[:] = [tools]
            return float(seconds) / max(calls, 1)
        log = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={log}", *command],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        TOOLS[:] = [done.stdout.strip().splitlines()[-1].split()[0]]
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError("callgrind printed no total")
        return float(found.group(1))


def per_call(tool: str) -> dict[int, float]:
    """Instructions per call by rule count: a run of CALLS calls minus a run of none (imports,
    set-up, exit). Two runs at a time: a count does not depend on what else the machine runs."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        runs = {
            (n, calls): pool.submit(_run, tool, n, calls, callgrind=True) for n in RULE_COUNTS for calls in (CALLS, 0)
        }
        return {n: (runs[n, CALLS].result() - runs[n, 0].result()) / CALLS for n in RULE_COUNTS}


WHAT = {
    "filesystem": "`filesystem.file_info`, 1,000 rules for other commands and directories",
    "bash": 'same, `bash.execute "echo <n>"` (parsed and judged; `default = "deny"`, so no process is started)',
}


def main() -> None:
    callgrind = shutil.which("valgrind") is not None and "--time" not in sys.argv
    unit = "instructions" if callgrind else "µs CPU"
    loads = [os.getloadavg()[0]]
    rows = []
    records: list[dict[str, object]] = []
    low, high = RULE_COUNTS[0], RULE_COUNTS[-1]
    for tool in ("filesystem", "bash"):
        if callgrind:  # a count does not move with the load: one run per rule count is the figure
            samples = {n: [cost] for n, cost in per_call(tool).items()}
        else:
            sides = {n: (lambda n=n, tool=tool: _run(tool, n, CALLS, callgrind=False) * 1e6) for n in RULE_COUNTS}
            samples = interleaved(sides, TIME_ROUNDS)
        costs = {n: statistics.median(values) for n, values in samples.items()}
        ratios = {n: [a / b for a, b in zip(samples[n], samples[low], strict=True)] for n in RULE_COUNTS}
        for n in RULE_COUNTS:
            target = "≤ 1.2×" if n == high else ""
            rows.append(
                (
                    f"P18 {tool} call, {n} rules",
                    f"{costs[n]:,.0f} {unit}",
                    f"{low} rules",
                    ratio_spread(ratios[n]),
                    target,
                )
            )
        ratio = statistics.median(ratios[high])
        shown = f"{ratio:.2f}×" if callgrind else ratio_spread(ratios[high])
        how = (
            f"instructions per call (callgrind, `bench_rules.py`, {CALLS} calls with distinct arguments so no "
            "cached verdict answers)"
            if callgrind
            else f"CPU time per call (`bench_rules.py --time`, {TIME_ROUNDS} interleaved rounds of {CALLS} calls "
            "with distinct arguments so no cached verdict answers)"
        )
        per = "" if callgrind else " µs"
        records.append(
            {
                "id": "P18",
                "what": f"{how}, {WHAT[tool]}" if tool == "filesystem" else WHAT[tool],
                "peer": (f"the same call with {low} rules: " if tool == "filesystem" else f"{low} rules: ")
                + f"{costs[low]:,.0f}{per}",
                "ours": f"{costs[high]:,.0f}{per}",
                "ratio": f"{shown} (100 rules: {statistics.median(ratios[100]):.2f}×)",
                "target": "≤ 1.2×",
                "met": "yes" if ratio <= 1.2 else "**no**",
                "tools": TOOLS[0],
            }
        )
    loads.append(os.getloadavg()[0])
    for r in records:
        r["load"] = load_span(loads)
    print(f"measured {time.strftime('%Y-%m-%d')} in {unit}, load {load_span(loads)}")
    report("bench_rules", rows)
    record("rules", records, script=f"bench/bench_rules.py{'' if callgrind else ' --time'} at {tree_commit()}")


if __name__ == "__main__":
    main()
