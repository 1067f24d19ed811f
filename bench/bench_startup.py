"""P4: ``entropic-mcp tools --json``, cold process, with the four first-party plugins.

Floors measured in the same run: ``python -c pass`` and importing the MCP SDK server alone.
Target: ≤ 150 ms (the SDK is not imported by commands that do not serve).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import report

RUNS = 15


# As installed from wheels: bytecode caches exist. (Some shells export PYTHONDONTWRITEBYTECODE,
# which would make every run compile every module from source and measure the compiler.)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cold(argv: list[str], cwd: str) -> float:
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, check=True, env=ENV)  # writes the caches
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, check=True, env=ENV)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    project = tempfile.mkdtemp(prefix="entropic-mcp-bench-")
    Path(project, "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["filesystem", "bash", "git", "entropic"]\n'
        '[servers.entropic]\ntiers = ["lead", "researcher", "coder"]\n'
    )
    cli = shutil.which("entropic-mcp") or str(Path(sys.executable).parent / "entropic-mcp")
    listing = json.loads(subprocess.run([cli, "tools", "--json"], cwd=project, capture_output=True, check=True).stdout)
    servers = sorted({tool["server"] for tool in listing})
    ours = cold([cli, "tools", "--json"], project)
    bare = cold([sys.executable, "-c", "pass"], project)
    sdk = cold([sys.executable, "-c", "import mcp.server.mcpserver"], project)
    report(
        "P4-startup",
        [
            (
                f"P4 tools --json, cold ({len(listing)} tools of {', '.join(servers)})",
                f"{ours:.0f} ms",
                f"python -c pass {bare:.0f} ms",
                f"{ours / bare:.1f}×",
                "≤ 150 ms",
            ),
            ("    for scale: importing the MCP SDK server alone", "—", f"{sdk:.0f} ms", f"{ours / sdk:.2f}×", "—"),
        ],
    )
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
