"""Issue 22: background runs are sandboxed like foreground ones, through a real `entropic-mcp serve`."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from sandbox_helpers import alive_with, result_of

from conftest import ENTROPIC_MCP, connect, serve_env

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ERA = "2026-07-28"
CONFIG = """\
[entropic_mcp]
plugins = ["bash"]
[storage]
backend = "none"
[permissions]
default = "allow"
auto_approve = true
allow = ["bash.execute:*", "bash.output", "bash.kill", "bash.list"]
[sandbox]
mode = "required"
"""


def params(root: Path, tmp_path: Path) -> Any:
    from mcp import StdioServerParameters

    env = serve_env({"XDG_DATA_HOME": str(tmp_path / "xdg")})
    return StdioServerParameters(command=str(ENTROPIC_MCP), args=["serve"], cwd=str(root), env=env)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "entropic-mcp.toml").write_text(CONFIG, encoding="utf-8")
    return project


async def read_until_done(peer: Any, run_id: str) -> tuple[str, dict[str, Any]]:
    seen = ""
    with anyio.fail_after(30):
        while True:
            data = result_of(await peer.call("bash.output", {"format": "json", "run_id": run_id}))
            seen += data.get("output", "")
            if data.get("status") not in (None, "running"):
                return seen, data
            await anyio.sleep(0.05)


async def test_a_background_run_cannot_write_outside_and_says_why(root, tmp_path):
    target = Path("/usr/local") / f"entropic-sandbox-{os.getpid()}.txt"  # outside /tmp and the root
    async with connect(params(root, tmp_path), ERA) as peer:
        started = result_of(
            await peer.call(
                "bash.execute",
                {"format": "json", "command": f"echo in > inside.txt; touch {target}", "run_in_background": True},
            )
        )
        output, final = await read_until_done(peer, started["run_id"])
    assert not target.exists()
    assert (root / "inside.txt").read_text() == "in\n"
    assert final.get("exit_code", 0) != 0
    assert "[entropic-mcp sandbox]" in output and str(target) in output


async def test_the_note_comes_even_when_the_refusal_was_read_while_the_run_went_on(root, tmp_path):
    target = Path("/usr/local") / f"entropic-sandbox-read-{os.getpid()}.txt"
    command = f"touch {target}; status=$?; echo refused; sleep 2; exit $status"
    async with connect(params(root, tmp_path), ERA) as peer:
        started = result_of(
            await peer.call("bash.execute", {"format": "json", "command": command, "run_in_background": True})
        )
        first = ""
        with anyio.fail_after(30):
            while "refused" not in first:
                data = result_of(await peer.call("bash.output", {"format": "json", "run_id": started["run_id"]}))
                assert data["status"] == "running", data  # the refusal is taken before the run ends
                first += data.get("output", "")
                await anyio.sleep(0.05)
        rest, final = await read_until_done(peer, started["run_id"])
    assert str(target) in first and "[entropic-mcp sandbox]" not in first
    assert final["exit_code"] != 0
    assert "[entropic-mcp sandbox]" in rest and str(target) in rest


async def test_killing_a_background_run_leaves_no_process_even_escaped_ones(root, tmp_path):
    marker = f"4{os.getpid() % 1000}.{int(time.monotonic()) % 1000}"
    command = f"setsid sleep {marker} & (sleep {marker} &); nohup sleep {marker} >/dev/null 2>&1 & sleep {marker}"
    async with connect(params(root, tmp_path), ERA) as peer:
        started = result_of(
            await peer.call("bash.execute", {"format": "json", "command": command, "run_in_background": True})
        )
        with anyio.fail_after(20):
            while len(alive_with(marker)) < 4:
                await anyio.sleep(0.05)
        killed = result_of(await peer.call("bash.kill", {"format": "json", "run_id": started["run_id"]}))
        assert killed["status"] == "killed"
        with anyio.fail_after(10):
            while alive_with(marker):
                await anyio.sleep(0.05)


def test_config_shows_the_sandbox_in_effect(root, tmp_path):
    done = subprocess.run(
        [str(ENTROPIC_MCP), "config", "--json"],
        cwd=root,
        env=serve_env({"XDG_DATA_HOME": str(tmp_path / "xdg")}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    values = {row["key"]: row for row in json.loads(done.stdout)["values"]}
    assert values["sandbox.mode"]["value"] == "required"
    assert values["sandbox.mode"]["source"].endswith("entropic-mcp.toml")
    assert "bubblewrap" in values["sandbox (in effect)"]["value"]
