"""fastmcp's ``Client`` (a third-party MCP client) against a real ``entropic-mcp serve`` over stdio:
a headless run with no config file at all, and a fix-the-bug session with only what ``init`` writes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest import ENTROPIC_MCP, calc_repo, serve_env

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

#: What OpenAI-style model APIs accept for a tool name (they answer HTTP 400 otherwise).
MODEL_API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def client(root: Path, **options: Any) -> Any:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(command=str(ENTROPIC_MCP), args=["serve"], env=serve_env(), cwd=str(root))
    return Client(transport, **options)


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_headless_run_with_no_config_reads_and_asks_the_agent_to_ask_for_writes(tmp_path, mode):
    root = calc_repo(tmp_path / "project")
    assert not (root / "entropic-mcp.toml").exists()
    async with client(root, mode=mode) as c:
        names = [tool.name for tool in await c.list_tools()]
        assert names and all(MODEL_API_NAME.match(name) for name in names), names
        assert {"filesystem_read_file", "filesystem_grep", "git_status", "bash_execute"} <= set(names)
        assert not {"entropic_prune_context", "entropic_context_inspect", "git_push"} & set(names)
        read = await c.call_tool("filesystem_read_file", {"path": "calc.py"}, raise_on_error=False)
        assert read.is_error is False and "return a - b" in text(read)
        found = await c.call_tool("filesystem_grep", {"pattern": "a - b"}, raise_on_error=False)
        assert found.is_error is False and "calc.py" in text(found)
        status = await c.call_tool("git_status", {}, raise_on_error=False)
        assert status.is_error is False
        write = await c.call_tool("filesystem_write_file", {"path": "x.txt", "content": "x"}, raise_on_error=False)
        assert write.is_error is True
        message = orjson.loads(text(write))["message"]
        assert "Ask the user to approve it" in message and "Do not retry it unchanged" in message
        wrong = await c.call_tool("filesystem_readfile", {"path": "calc.py"}, raise_on_error=False)
        assert wrong.is_error is True and "'filesystem_read_file'" in text(wrong)
    assert not (root / "x.txt").exists()


async def test_a_fix_the_bug_session_with_only_what_init_writes(tmp_path):
    from mcp_types import ElicitResult

    root = calc_repo(tmp_path / "project")
    subprocess.run([str(ENTROPIC_MCP), "init"], cwd=root, check=True, capture_output=True, env=serve_env())
    asked: list[str] = []

    async def approve(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(message)  # the person at the keyboard allows each write and command once
        return ElicitResult(action="accept", content={"decision": "allow_once"})

    async with client(root, elicitation_handler=approve) as c:

        async def call(name: str, args: dict[str, Any]) -> str:
            result = await c.call_tool(name, args, raise_on_error=False)
            assert result.is_error is False, (name, text(result))
            return text(result)

        assert "calc.py" in await call("filesystem_grep", {"pattern": "def add"})
        assert "return a - b" in await call("filesystem_read_file", {"path": "calc.py"})
        failing = await call("bash_execute", {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider"})
        assert "1 failed" in failing
        await call("filesystem_edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"})
        passing = await call("bash_execute", {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider"})
        assert "1 passed" in passing
        diff = await call("git_diff", {})
        assert "+    return a + b" in diff
    assert len(asked) == 3  # two commands and one edit; reads, grep and git diff were allowed
