"""External servers through ``entropic-mcp serve``: a real SDK fault server and the published
``mcp-server-git``, listed and called by the official client over real stdio."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from conftest import ENTROPIC_MCP, serve_env

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
FAULT_SERVER = ROOT / "core" / "tests" / "external" / "fault_server.py"
MCP_SERVER_GIT = Path(sys.executable).with_name("mcp-server-git")


def project_with(tmp_path: Path, external: str) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = []\n[storage]\nbackend = "none"\n[permissions]\ndefault = "allow"\n' + external,
        encoding="utf-8",
    )
    return root


def fault_table(*args: str) -> str:
    quoted = ", ".join(f'"{a}"' for a in (str(FAULT_SERVER), *args))
    return (
        f'[external.f]\ncommand = "{sys.executable}"\nargs = [{quoted}]\n'
        "call_timeout_seconds = 10\nbackoff_initial_seconds = 0.1\nbackoff_max_seconds = 0.5\n"
    )


def client(project: Path, mode: str, handler: Any = None) -> Any:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=str(ENTROPIC_MCP), args=["serve"], cwd=str(project), env=serve_env())
    return Client(params, mode=mode, cache=None, message_handler=handler)


async def names(c: Any) -> list[str]:
    return [tool.name for tool in (await c.list_tools(cache_mode="bypass")).tools]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_external_tools_are_served_with_directives_stripped(tmp_path, mode):
    project = project_with(tmp_path, fault_table() + "trust_annotations = true\n")
    async with client(project, mode) as c:
        listed = {tool.name: tool for tool in (await c.list_tools(cache_mode="bypass")).tools}
        assert {"f_echo", "f_write", "f_directive"} <= set(listed)
        assert listed["f_echo"].annotations.read_only_hint is True
        assert listed["f_write"].annotations.read_only_hint is False
        echo = await c.call_tool("f.echo", {"text": "hi"})
        assert (echo.is_error, echo.content[0].text) == (False, "hi")
        steered = await c.call_tool("f.directive", {})
        assert steered.meta["entropic-mcp/directives"] == []
        assert steered.is_error is False


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_list_change_reaches_the_client_and_a_crash_is_a_tool_error(tmp_path, mode):
    project = project_with(tmp_path, fault_table())
    changed = anyio.Event()

    async def handler(message: Any) -> None:
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            changed.set()

    async with client(project, mode, handler) as c:
        assert "f_extra" not in await names(c)
        if mode == "auto":
            async with c.listen(tools_list_changed=True):
                await c.call_tool("f.change", {})
                with anyio.fail_after(20):
                    await changed.wait()
        else:
            await c.call_tool("f.change", {})
            with anyio.fail_after(20):
                await changed.wait()
        assert "f_extra" in await names(c)
        crashed = await c.call_tool("f.crash", {})
        assert crashed.is_error
        body = orjson.loads(crashed.content[0].text)
        assert body["error"] == "server_failed" and "'f'" in body["message"]
        # Still listed while it reconnects (within withdraw_after_seconds): a call meanwhile is a
        # tool error naming the server and when to retry, then it answers again.
        assert "f_echo" in await names(c)
        with anyio.fail_after(30):
            # Each try different: two identical failures in a row are refused by the loop guard.
            tries = 0
            while (again := await c.call_tool("f_echo", {"text": f"back {tries}"})).is_error:
                body = orjson.loads(again.content[0].text)
                assert body["error"] == "server_disconnected" and "server 'f'" in body["message"], body
                tries += 1
                await anyio.sleep(0.1)
        assert again.content[0].text == f"back {tries}"


@pytest.mark.skipif(not MCP_SERVER_GIT.exists(), reason="mcp-server-git is not installed (pip install mcp-server-git)")
async def test_the_published_mcp_server_git_is_listed_and_called_through_serve(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    run = {"cwd": repo, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q", "-b", "main"], **run)
    (repo / "hello.txt").write_text("hello\n", encoding="utf-8")
    subprocess.run(["git", "add", "hello.txt"], **run)
    subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "first commit"], **run
    )
    project = project_with(
        tmp_path,
        f'[external.pygit]\ncommand = "{MCP_SERVER_GIT}"\nargs = ["--repository", "{repo}"]\n'
        'read_only_tools = ["git_status", "git_log"]\n',
    )
    async with client(project, "auto") as c:
        listed = {tool.name: tool for tool in (await c.list_tools(cache_mode="bypass")).tools}
        assert {"pygit_git_status", "pygit_git_log"} <= set(listed)
        assert listed["pygit_git_log"].annotations.read_only_hint is True
        log = await c.call_tool("pygit.git_log", {"repo_path": str(repo), "max_count": 5})
        assert log.is_error is False
        assert "first commit" in log.content[0].text
        assert log.meta["entropic-mcp/directives"] == []


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_server_that_cannot_start_is_reported_on_the_listing_never_as_a_tool(tmp_path, mode):
    project = project_with(
        tmp_path,
        fault_table() + f'[external.broken]\ncommand = "{tmp_path / "no-such-server"}"\nbackoff_initial_seconds = 30\n',
    )
    async with client(project, mode) as c:
        listed = await c.list_tools(cache_mode="bypass")
        names = [tool.name for tool in listed.tools]
        assert "f_echo" in names and not [n for n in names if n.startswith("broken")]
        failed = listed.meta["entropic-mcp/discovery_failed"]
        assert [(f["server"], f["event"]) for f in failed] == [("broken", "tools.discovery_failed")]
        assert "no-such-server" in failed[0]["message"]
