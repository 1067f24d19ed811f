"""The MCP Inspector CLI (npm) lists and calls tools against `entropic-mcp serve` over stdio."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import ENTROPIC_MCP, npx, serve_env

pytestmark = pytest.mark.integration

INSPECTOR = "@modelcontextprotocol/inspector"


def inspector(project: Path, *args: str) -> dict:
    command = npx()
    if command is None:
        pytest.skip("npx is not installed (Node.js is needed for the MCP Inspector)")
    try:
        done = subprocess.run(
            [command, "-y", INSPECTOR, "--cli", str(ENTROPIC_MCP), "serve", *args],
            cwd=project,
            env=serve_env(),
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("the MCP Inspector did not finish in time (npm registry unreachable?)")
    if done.returncode != 0 and ("ENOTFOUND" in done.stderr or "E404" in done.stderr or "ETIMEDOUT" in done.stderr):
        pytest.skip(f"could not fetch {INSPECTOR} from the npm registry: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_inspector_lists_and_calls_tools(project: Path) -> None:
    listed = inspector(project, "--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]][:2] == ["probe_echo", "probe_ended"]
    called = inspector(project, "--method", "tools/call", "--tool-name", "probe_echo", "--tool-arg", "text=inspected")
    assert called["content"] == [{"type": "text", "text": "inspected"}]
    assert called["_meta"]["entropic-mcp/kind"] == "ok"
