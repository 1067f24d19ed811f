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
to CPU time per call (noisier, same ratios).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import report

CALLS = 100
RULE_COUNTS = (10, 100, 1000)

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

print(anyio.run(run))
"""


def _run(tool: str, rules: int, calls: int, *, callgrind: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-c", WORKER, tmp, tool, str(rules), str(calls)]
        if not callgrind:
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            return float(out.stdout.strip().splitlines()[-1]) / max(calls, 1)
        log = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={log}", *command],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError("callgrind printed no total")
        return float(found.group(1))


def per_call(tool: str, rules: int, *, callgrind: bool) -> float:
    if not callgrind:
        return min(_run(tool, rules, CALLS, callgrind=False) for _ in range(3))
    return (_run(tool, rules, CALLS, callgrind=True) - _run(tool, rules, 0, callgrind=True)) / CALLS


def main() -> None:
    callgrind = shutil.which("valgrind") is not None and "--time" not in sys.argv
    unit = "instructions" if callgrind else "CPU s"
    rows = []
    for tool in ("filesystem", "bash"):
        costs = {n: per_call(tool, n, callgrind=callgrind) for n in RULE_COUNTS}
        base = costs[RULE_COUNTS[0]]
        for n in RULE_COUNTS:
            shown = f"{costs[n]:,.0f} {unit}" if callgrind else f"{costs[n] * 1e6:.0f} us"
            target = "≤ 1.2×" if n == RULE_COUNTS[-1] else ""
            rows.append(
                (f"P18 {tool} call, {n} rules", shown, f"{RULE_COUNTS[0]} rules", f"{costs[n] / base:.2f}×", target)
            )
    print(f"measured {time.strftime('%Y-%m-%d')} in {unit}, load {os.getloadavg()[0]:.2f}")
    report("bench_rules", rows)


if __name__ == "__main__":
    main()
