"""`entropic-mcp check-rule` with the bash plugin installed: the rules' decision for a call and
what its server's sandbox lets it touch (moved here from the core's tests: it needs bash)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_check_rule_shows_the_decision_and_what_the_command_may_touch(tmp_path):
    import json as _json

    root = tmp_path
    (root / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["bash"]\n[storage]\nbackend = "none"\n[permissions]\n'
        'allow = ["bash.execute:python *"]\ndeny = ["filesystem.read_file:.env"]\n[sandbox]\nmode = "required"\n',
        encoding="utf-8",
    )
    (root / ".env").write_text("x\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("entropic-mcp")),
            "check-rule",
            "bash.execute",
            '{"command": "python -c pass"}',
            "--json",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    data = _json.loads(done.stdout)
    assert data["decision"] == "allow" and data["parts"][0]["rule"] == "bash.execute:python *"
    box = data["sandbox"]
    assert box["network"] is False and str(tmp_path) in box["writable"]
    assert str(root / ".env") in box["unreadable"]
    assert str(root / "entropic-mcp.toml") in box["read_only"]
