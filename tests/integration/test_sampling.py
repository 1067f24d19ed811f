"""Delegation through MCP sampling: a real `entropic-mcp serve` runs the child tier's conversation
through the client's model (a scripted one here), and the store records it.

The lead is the client; `entropic.delegate` / `pipeline` / `resume_delegation` answer with the
child's summary once its turns (each a `sampling/createMessage`, or on 2026-07-28 an input
request) end in `entropic.complete`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import stdio_params, write_project

pytestmark = pytest.mark.anyio

CONFIG = """\
[entropic_mcp]
plugins = ["entropic", "filesystem"]
[storage]
backend = "tinydb"
path = "{store}"
[permissions]
default = "allow"
[servers.entropic]
tiers = ["lead", "researcher", "writer"]
delegation_deadline = {deadline}
[servers.entropic.profiles.researcher]
system_prompt = "You are the researcher. Read, search, then call {{complete}}."
model_hints = ["scripted-small"]
tools = ["filesystem.read_file", "filesystem.grep", "filesystem.write_file"]
max_tokens = 1234
max_turns = {max_turns}
[servers.entropic.profiles.writer]
system_prompt = "You are the writer."
[identities.researcher.keys]
"filesystem.read_file" = "READ"
"filesystem.grep" = "READ"
"entropic.complete" = "WRITE"
[identities.writer.keys]
"filesystem.*" = "READ"
"entropic.complete" = "WRITE"
"""

Turn = Callable[[Any], Any]


def project_with(tmp_path: Path, *, max_turns: int = 10, deadline: float = 120) -> Path:
    root = write_project(
        tmp_path / "project",
        CONFIG.format(store=tmp_path / "store.json", max_turns=max_turns, deadline=deadline),
    )
    (root / "README.md").write_text("# Demo\n\nRetries are configured in settings.py.\n", encoding="utf-8")
    (root / "settings.py").write_text("RETRIES = 3\nBACKOFF = 2.5\n", encoding="utf-8")
    return root


#: How serve spells ``server.tool`` on the wire (learnt from the listing: the default changes with
#: ``[serve] tool_names``).
SEPARATOR = ["."]


def wire(name: str) -> str:
    """``server.tool`` as serve lists it."""
    return name.replace(".", SEPARATOR[0], 1)


def learn_spelling(listed: set[str]) -> set[str]:
    for separator in ("_", "__", "."):
        if "entropic" + separator + "complete" in listed:
            SEPARATOR[0] = separator
    return listed


def tool_use(name: str, arguments: dict[str, Any], call_id: str) -> Any:
    """A tool call of the scripted model (spelt as serve lists the tool when it is sent)."""
    return ("tool_use", name, arguments, call_id)


def block(item: Any) -> Any:
    from mcp_types import ToolUseContent

    if isinstance(item, tuple):
        _, name, arguments, call_id = item
        return ToolUseContent(type="tool_use", id=call_id, name=wire(name), input=arguments)
    return item


def text(value: str) -> Any:
    from mcp_types import TextContent

    return TextContent(type="text", text=value)


class ScriptedModel:
    """A sampling callback: each tier's turns in order; every request it got is kept to check."""

    def __init__(self, script: dict[str, list[list[Any]]]) -> None:
        self.script = {tier: list(turns) for tier, turns in script.items()}
        self.requests: list[Any] = []
        self.refuse = False

    async def __call__(self, context: Any, params: Any) -> Any:
        from mcp_types import CreateMessageResultWithTools, ErrorData

        self.requests.append(params)
        if self.refuse:
            return ErrorData(code=-1, message="the user declined the sampling request")
        tier = (params.metadata or {})["entropic-mcp/tier"]
        turns = self.script[tier]
        content = [block(item) for item in turns.pop(0)] if turns else [text("nothing more to do")]
        uses = any(getattr(block, "type", "") == "tool_use" for block in content)
        return CreateMessageResultWithTools(
            role="assistant", content=content, model="scripted", stop_reason="toolUse" if uses else "endTurn"
        )


def researcher_turns(summary: str) -> list[list[Any]]:
    return [
        [
            tool_use("filesystem.read_file", {"path": "README.md"}, "r1"),
            tool_use("filesystem.grep", {"pattern": "RETRIES", "path": "."}, "r2"),
        ],
        [tool_use("filesystem.write_file", {"path": "notes.md", "content": "x"}, "r3")],
        [text("Done looking."), tool_use("entropic.complete", {"summary": summary}, "r4")],
    ]


def sampling_capability() -> Any:
    from mcp_types import SamplingCapability, SamplingToolsCapability

    return SamplingCapability(tools=SamplingToolsCapability())


def payload(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)


def store_of(root: Path) -> Any:
    from entropic_mcp import ServerManager, load_config

    manager = ServerManager.from_config(load_config(root / "entropic-mcp.toml"))
    return manager, manager.storage


async def test_delegate_through_sampling_stdio_official_client(tmp_path: Path) -> None:
    from mcp import Client

    root = project_with(tmp_path)
    model = ScriptedModel({"researcher": researcher_turns("RETRIES = 3 in settings.py")})
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with Client(
        stdio_params(root),
        mode="legacy",
        sampling_callback=model,
        sampling_capabilities=sampling_capability(),
        read_timeout_seconds=60,
    ) as client:
        names = learn_spelling({tool.name for tool in (await client.list_tools()).tools})
        assert {wire("entropic.delegate"), wire("entropic.pipeline"), wire("entropic.resume_delegation")} <= names
        result = await client.call_tool(
            wire("entropic.delegate"),
            {"target": "researcher", "task": "Where are retries configured?"},
            progress_callback=on_progress,
        )
        body = payload(result)
        assert result.is_error is False, body
        assert body["status"] == "completed" and body["summary"] == "RETRIES = 3 in settings.py"
        delegation_id = body["delegation_id"]
        assert body["turns"] == 3

    first = model.requests[0]
    assert (
        first.system_prompt.startswith("You are the researcher.") and wire("entropic.complete") in first.system_prompt
    )
    assert first.max_tokens == 1234
    assert [h.name for h in first.model_preferences.hints] == ["scripted-small"]
    offered = {tool.name for tool in first.tools}
    # The profile names write_file, but the researcher's keys deny it: never offered.
    assert offered == {wire("filesystem.read_file"), wire("filesystem.grep"), wire("entropic.complete")}
    # The refused write came back to the child as an error result.
    third = model.requests[2]
    refused = third.messages[-1].content[0]
    assert refused.type == "tool_result" and refused.is_error is True
    assert not (root / "notes.md").exists()
    assert len(progress) >= 3 and "researcher: turn 3 of 10" in (progress[2][2] or "")

    manager, storage = store_of(root)
    with manager:
        record = storage.load_delegation_with_messages(delegation_id)
        assert record["status"] == "completed" and record["target_tier"] == "researcher"
        assert record["summary"] == "RETRIES = 3 in settings.py"
        roles = [m["role"] for m in record["messages"]]
        assert roles[:2] == ["system", "user"] and roles.count("assistant") == 3
        tools = [m["name"] for m in record["messages"] if m["role"] == "tool"]
        assert tools == ["filesystem.read_file", "filesystem.grep", "filesystem.write_file", "entropic.complete"]
        grep = next(m for m in record["messages"] if m.get("name") == "filesystem.grep")
        assert "RETRIES = 3" in grep["content"]
