"""bash.execute over MCP: `entropic-mcp serve` on stdio with the official SDK client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CONFIG = """\
[entropic_mcp]
plugins = ["bash"]
[storage]
backend = "none"
[permissions]
default = "ask"
allow = ["bash.execute:echo *", "bash.execute:printf *"]
deny = ["bash.execute:rm *"]
"""


async def test_output_lines_stream_as_progress_and_rules_are_parsed(root: Path) -> None:
    from mcp import Client, StdioServerParameters

    (root / "entropic-mcp.toml").write_text(CONFIG, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}
    server = StdioServerParameters(
        command=str(Path(sys.executable).with_name("entropic-mcp")), args=["serve"], cwd=str(root), env=env
    )
    messages: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with Client(server, read_timeout_seconds=30) as client:
        result = await client.call_tool(
            "bash.execute", {"command": "echo one; echo two; printf three"}, progress_callback=progress
        )
        assert result.is_error is False
        # Plain text over the wire: the output as printed, one footer line, no JSON escaping, and
        # no structuredContent (the tool declares no outputSchema).
        [block] = result.content
        assert block.type == "text" and block.text.startswith("one\ntwo\nthree\n[exit 0, ")
        assert block.text.count("\n") == 3 and block.text.endswith(" ms]") and result.structured_content is None
        asked = await client.call_tool("bash.execute", {"command": "echo one", "format": "json"})
        assert json.loads(asked.content[0].text)["output"] == "one\n"
        assert asked.structured_content is None
        denied = await client.call_tool("bash.execute", {"command": "echo hi && FOO=1 /bin/rm -rf x"})
        assert denied.is_error is True
        assert json.loads(denied.content[0].text)["error"] == "permission_denied"
    assert "\n".join(messages).split("\n") == ["one", "two", "three"]


def data(result: object) -> dict:
    """The JSON result of a tool call called with ``format: "json"`` (its text content)."""
    return json.loads(result.content[0].text)  # type: ignore[attr-defined]


BACKGROUND_CONFIG = """\
[entropic_mcp]
plugins = ["bash"]
[storage]
backend = "none"
[permissions]
default = "deny"
allow = ["bash.execute:echo *", "bash.execute:sleep *", "bash.execute:cd *", "bash.execute:pwd *",
         "bash.output", "bash.kill", "bash.list"]
"""


async def test_background_runs_and_the_working_directory_over_mcp(root: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    (root / "entropic-mcp.toml").write_text(BACKGROUND_CONFIG, encoding="utf-8")
    (root / "sub").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}
    server = StdioServerParameters(
        command=str(Path(sys.executable).with_name("entropic-mcp")), args=["serve"], cwd=str(root), env=env
    )
    async with Client(server, read_timeout_seconds=30) as client:
        # Listed as bash.execute or bash_execute (serve's tool_names); either spelling is called.
        names = {tool.name.replace("_", ".", 1) for tool in (await client.list_tools()).tools}
        assert {"bash.execute", "bash.output", "bash.kill", "bash.list"} <= names
        started = await client.call_tool(
            "bash.execute", {"command": "echo ready; sleep 1000", "run_in_background": True, "format": "json"}
        )
        run_id = data(started)["run_id"]
        seen = ""
        with anyio.fail_after(20):
            while "ready" not in seen:
                read = await client.call_tool("bash.output", {"run_id": run_id, "format": "json"})
                seen += data(read)["output"]
                await anyio.sleep(0.05)
        listed = await client.call_tool("bash.list", {"format": "json"})
        assert [r["run_id"] for r in data(listed)["runs"]] == [run_id]
        killed = await client.call_tool("bash.kill", {"run_id": run_id, "format": "json"})
        assert data(killed)["status"] == "killed"
        moved = await client.call_tool("bash.execute", {"command": "cd sub", "format": "json"})
        assert data(moved)["cwd"] == "sub"
        where = await client.call_tool("bash.execute", {"command": "pwd"})
        assert where.content[0].text.startswith(f"{root / 'sub'}\n[exit 0, ") and where.content[0].text.endswith(
            ", cwd sub]"
        )
