"""``[external.<name>] sandbox = true``: the stdio server's process runs in the OS sandbox."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson
import pytest
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp import _sandbox as sandbox_mod

FAULT_SERVER = Path(__file__).parent / "external" / "fault_server.py"
FOUND = sandbox_mod.find()
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        FOUND.path is None and os.environ.get("CI") != "true", reason=f"no working bwrap here: {FOUND.problem}"
    ),
]


def manager(root: Path, server: Path = FAULT_SERVER, **table: object) -> ServerManager:
    data = {
        "entropic_mcp": {"plugins": []},
        "storage": {"backend": "none"},
        "permissions": {"default": "allow"},
        "external": {"f": {"command": sys.executable, "args": [str(server)], "call_timeout_seconds": 20, **table}},
    }
    return ServerManager.from_config(config_from_dict(data, root=root), load_entry_points=False)


async def call(m: ServerManager, tool: str) -> dict:
    outcome = await m.call(tool, {}, CallContext(conversation_id="c"))
    assert outcome.kind == "ok", outcome.response.result
    return orjson.loads(outcome.response.result)


async def test_a_sandboxed_external_server_runs_in_its_own_pid_namespace_without_entropic_variables(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("ENTROPIC_MCP_TOKEN", "serve-token-value")
    m = manager(tmp_path, sandbox=True)
    try:
        env = await call(m, "f.env")
        pid = (await call(m, "f.counter"))["pid"]
    finally:
        m.close()
    assert "ENTROPIC_MCP_TOKEN" not in env and env["TMPDIR"] == "/tmp"
    assert pid < 10  # the namespace's own numbering: its first processes


async def test_without_the_setting_an_external_server_runs_as_before(tmp_path):
    m = manager(tmp_path)
    try:
        pid = (await call(m, "f.counter"))["pid"]
    finally:
        m.close()
    assert pid > 10 and pid != os.getpid()


async def test_the_files_its_command_names_stay_visible_even_under_tmp(tmp_path):
    import shutil

    copy = tmp_path / "elsewhere" / "server.py"  # outside the root, under /tmp (private inside)
    copy.parent.mkdir()
    shutil.copy(FAULT_SERVER, copy)
    root = tmp_path / "root"
    root.mkdir()
    m = manager(root, copy, sandbox=True)
    try:
        assert (await call(m, "f.counter"))["pid"] < 10
    finally:
        m.close()


def test_sandbox_must_be_a_boolean(tmp_path):
    from entropic_mcp import ConfigError

    with pytest.raises(ConfigError, match="sandbox"):
        manager(tmp_path, sandbox="yes")
