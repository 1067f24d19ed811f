"""Delegation through MCP sampling: a real `entropic-mcp serve` runs the child tier's conversation
through the client's model (a scripted one here), and the store records it.

The lead is the client; `entropic.delegate` / `pipeline` / `resume_delegation` answer with the
child's summary once its turns (each a `sampling/createMessage`, or on 2026-07-28 an input
request) end in `entropic.complete`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import ENTROPIC_MCP, serve_env, start_http, stdio_params, stop, wait_until, write_project

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CONFIG = """\
[entropic_mcp]
plugins = ["entropic", "filesystem"]
[storage]
{storage}
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
"entropic.delegate" = "WRITE"
"""

Turn = Callable[[Any], Any]


def project_with(tmp_path: Path, *, max_turns: int = 10, deadline: float = 120, storage: str = "") -> Path:
    storage = storage or f'backend = "tinydb"\npath = {json.dumps(str(tmp_path / "store.json"))}'
    root = write_project(
        tmp_path / "project",
        CONFIG.format(storage=storage, max_turns=max_turns, deadline=deadline),
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


# -- the whole story, with every client, transport and era ---------------------------------------------


class Peer:
    """The official client or fastmcp's, the same calls."""

    def __init__(self, client: Any, fast: bool) -> None:
        self.client = client
        self.fast = fast

    async def names(self) -> set[str]:
        listed = await self.client.list_tools()
        tools = listed if self.fast else listed.tools
        return learn_spelling({tool.name for tool in tools})

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        if self.fast:
            return await self.client.call_tool(wire(name), arguments, raise_on_error=False)
        return await self.client.call_tool(wire(name), arguments)


@asynccontextmanager
async def peer(kind: str, transport: str, era: str, root: Path, model: Any) -> AsyncIterator[Peer]:
    served = start_http(root) if transport == "http" else None
    mode = "legacy" if era == "2025-11-25" else "auto"
    try:
        if kind == "official":
            from mcp import Client

            target: Any = served.url if served is not None else stdio_params(root)
            async with Client(
                target,
                mode=mode,
                sampling_callback=model,
                sampling_capabilities=sampling_capability(),
                read_timeout_seconds=60,
                input_required_max_rounds=50,
            ) as client:
                assert client.protocol_version == era
                yield Peer(client, False)
        else:
            from fastmcp import Client as FastClient
            from fastmcp.client.transports import StdioTransport

            async def handler(messages: Any, params: Any, context: Any) -> Any:
                answer = await model(context, params)
                if not hasattr(answer, "content"):
                    raise RuntimeError(answer.message)
                return answer

            target = (
                served.url
                if served is not None
                else StdioTransport(command=str(ENTROPIC_MCP), args=["serve"], env=serve_env(), cwd=str(root))
            )
            async with FastClient(
                target,
                mode=mode,
                sampling_handler=handler,
                sampling_capabilities=sampling_capability(),
                input_required_max_rounds=50,
            ) as client:
                assert client.protocol_version == era
                yield Peer(client, True)
    finally:
        if served is not None:
            stop(served.process)


STORY = [
    ("official", "stdio", "2025-11-25"),
    ("official", "stdio", "2026-07-28"),
    ("official", "http", "2025-11-25"),
    ("official", "http", "2026-07-28"),
    ("fastmcp", "stdio", "2025-11-25"),
    ("fastmcp", "stdio", "2026-07-28"),
    ("fastmcp", "http", "2025-11-25"),
    ("fastmcp", "http", "2026-07-28"),
]


@pytest.mark.parametrize(("kind", "transport", "era"), STORY, ids=["-".join(case) for case in STORY])
async def test_lead_delegates_recalls_resumes_and_runs_a_pipeline(
    tmp_path: Path, kind: str, transport: str, era: str
) -> None:
    await story(project_with(tmp_path), kind, transport, era)


async def test_the_story_on_the_postgres_store(tmp_path: Path) -> None:
    from entropic_mcp_postgres.testing import fresh_schema, test_dsn

    dsn = test_dsn()
    with fresh_schema(dsn, "sampling") as schema:
        storage = f'backend = "postgres"\noptions = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)} }}'
        root = project_with(tmp_path, storage=storage)
        (root / "entropic-mcp.toml").write_text(
            (root / "entropic-mcp.toml")
            .read_text()
            .replace('plugins = ["entropic", "filesystem"]', 'plugins = ["entropic", "filesystem", "postgres"]'),
            encoding="utf-8",
        )
        await story(root, "official", "stdio", "2026-07-28")


async def story(root: Path, kind: str, transport: str, era: str) -> None:
    """Delegate, followup, resume, pipeline; then every record in the store."""
    model = ScriptedModel(
        {
            "researcher": [
                *researcher_turns("RETRIES = 3 in settings.py"),
                # resumed: it still has its earlier conversation, and looks for one more thing
                [tool_use("filesystem.grep", {"pattern": "BACKOFF", "path": "."}, "s1")],
                [tool_use("entropic.complete", {"summary": "BACKOFF = 2.5 next to RETRIES"}, "s2")],
                # the pipeline's first stage
                [tool_use("entropic.complete", {"summary": "retry settings: RETRIES, BACKOFF"}, "p1")],
            ],
            "writer": [[tool_use("entropic.complete", {"summary": "note drafted from the retry settings"}, "w1")]],
        }
    )
    async with peer(kind, transport, era, root, model) as lead:
        listed = await lead.names()
        assert {wire("entropic.delegate"), wire("entropic.pipeline"), wire("entropic.resume_delegation")} <= listed
        first = await lead.call("entropic.delegate", {"target": "researcher", "task": "Where are retries configured?"})
        body = payload(first)
        assert first.is_error is False, body
        assert body["summary"] == "RETRIES = 3 in settings.py"
        delegation_id = body["delegation_id"]

        found = payload(await lead.call("entropic.followup", {"query": "retries configured"}))
        assert [r["delegation_id"] for r in found["results"]] == [delegation_id]
        assert found["results"][0]["summary"] == "RETRIES = 3 in settings.py"

        resumed = await lead.call(
            "entropic.resume_delegation", {"delegation_id": delegation_id, "task": "And the backoff?"}
        )
        again = payload(resumed)
        assert resumed.is_error is False, again
        assert again["summary"] == "BACKOFF = 2.5 next to RETRIES" and again["resumed_from"] == delegation_id
        seeded = model.requests[3]
        # The resumed child starts from the earlier conversation: its tool results and the new task.
        assert [m.role for m in seeded.messages][:2] == ["user", "assistant"]
        assert seeded.messages[-1].content.text == "And the backoff?"
        assert any(getattr(c, "type", "") == "tool_result" for m in seeded.messages for c in _blocks(m.content)), (
            seeded.messages
        )

        piped = await lead.call(
            "entropic.pipeline", {"stages": ["researcher", "writer"], "task": "Write a note on the retry settings"}
        )
        stages = payload(piped)
        assert piped.is_error is False, stages
        assert [s["target"] for s in stages["stages"]] == ["researcher", "writer"]
        assert stages["summary"] == "note drafted from the retry settings"
        writer_request = next(r for r in model.requests if r.metadata["entropic-mcp/tier"] == "writer")
        assert "retry settings: RETRIES, BACKOFF" in writer_request.messages[0].content.text
        assert writer_request.system_prompt == "You are the writer."

    manager, storage = store_of(root)
    with manager:
        rows = storage.list_delegations()
        assert len(rows) == 4 and {r["status"] for r in rows} == {"completed"}
        by_id = {r["delegation_id"]: r for r in rows}
        parents = {r["parent_id"] for r in rows}
        assert len(parents) == 1  # one client conversation, stored once
        parent = storage.load_conversation(parents.pop())
        assert parent["conversation"]["metadata"]["serve_conversation"]
        resumed_record = storage.load_delegation_with_messages(again["delegation_id"])
        first_record = storage.load_delegation_with_messages(delegation_id)
        # The resumed child's conversation begins with the first one's messages.
        prior = [(m["role"], m["content"]) for m in first_record["messages"]]
        assert [(m["role"], m["content"]) for m in resumed_record["messages"]][: len(prior)] == prior
        assert resumed_record["summary"] == "BACKOFF = 2.5 next to RETRIES"
        assert {by_id[s["delegation_id"]]["target_tier"] for s in stages["stages"]} == {"researcher", "writer"}
        writer = storage.load_delegation_with_messages(stages["stages"][1]["delegation_id"])
        assert writer["messages"][0] == {**writer["messages"][0], "role": "system", "content": "You are the writer."}


def _blocks(content: Any) -> list[Any]:
    return content if isinstance(content, list) else [content]


# -- what goes wrong: each a clear result for the lead and a consistent record -----------------------------


@asynccontextmanager
async def official(root: Path, model: Any, era: str = "2025-11-25") -> AsyncIterator[Any]:
    from mcp import Client

    async with Client(
        stdio_params(root),
        mode="legacy" if era == "2025-11-25" else "auto",
        sampling_callback=model,
        sampling_capabilities=sampling_capability(),
        read_timeout_seconds=60,
        input_required_max_rounds=50,
    ) as client:
        learn_spelling({tool.name for tool in (await client.list_tools()).tools})
        yield client


def record_of(root: Path, delegation_id: str) -> dict[str, Any]:
    manager, storage = store_of(root)
    with manager:
        return dict(storage.load_delegation_with_messages(delegation_id))


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_child_that_never_completes_stops_at_max_turns(tmp_path: Path, era: str) -> None:
    root = project_with(tmp_path, max_turns=2)
    reads = [[tool_use("filesystem.read_file", {"path": "README.md"}, f"m{n}")] for n in range(5)]
    model = ScriptedModel({"researcher": reads})
    async with official(root, model, era) as client:
        result = await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Read forever"})
    body = payload(result)
    assert result.is_error is True
    assert body["error"] == "delegation_max_turns" and body["status"] == "max_turns" and body["turns"] == 2
    assert "max_turns (2)" in body["message"] and "resume_delegation" in body["message"]
    assert len(model.requests) == 2
    record = record_of(root, body["delegation_id"])
    assert record["status"] == "failed" and "max_turns (2)" in record["summary"]
    assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]


async def test_client_refusing_sampling_is_a_clear_error_and_a_failed_record(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    model = ScriptedModel({"researcher": researcher_turns("never")})
    model.refuse = True
    async with official(root, model) as client:
        result = await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Look"})
    body = payload(result)
    assert result.is_error is True and body["error"] == "delegation_failed"
    assert "the user declined the sampling request" in body["message"]
    record = record_of(root, body["delegation_id"])
    assert record["status"] == "failed" and "declined" in record["summary"]
    assert [m["role"] for m in record["messages"]] == ["system", "user"]


async def test_child_calling_a_denied_tool_is_refused_and_the_file_untouched(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    model = ScriptedModel(
        {
            "researcher": [
                [tool_use("filesystem.write_file", {"path": "README.md", "content": "overwritten"}, "d1")],
                [tool_use("filesystem.delete_file", {"path": "settings.py"}, "d2")],
                [tool_use("entropic.complete", {"summary": "could not write"}, "d3")],
            ]
        }
    )
    async with official(root, model) as client:
        result = await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Change things"})
    body = payload(result)
    assert result.is_error is False and body["summary"] == "could not write"
    assert (root / "README.md").read_text(encoding="utf-8").startswith("# Demo")
    assert (root / "settings.py").exists()
    record = record_of(root, body["delegation_id"])
    refusals = [m for m in record["messages"] if m["role"] == "tool" and m["name"] != "entropic.complete"]
    assert len(refusals) == 2 and all(m["is_error"] for m in refusals)
    assert all("researcher" in m["content"] and "access" in m["content"].lower() for m in refusals), refusals
    assert record["status"] == "completed"


async def test_cancelling_the_parent_call_stops_the_child_and_records_it_cancelled(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    asked = anyio.Event()
    released = anyio.Event()

    class Stalling(ScriptedModel):
        async def __call__(self, context: Any, params: Any) -> Any:
            if len(self.requests) == 1:
                self.requests.append(params)
                asked.set()
                await released.wait()  # the model "thinks" until the lead gives up
            return await super().__call__(context, params)

    model = Stalling({"researcher": researcher_turns("never")})
    async with official(root, model) as client:
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Take long"})

                group.start_soon(call)
                await asked.wait()
                group.cancel_scope.cancel()
        assert not scope.cancelled_caught
        released.set()
        # The server is still serving: a later call answers, and sees the record closed.
        found = await client.call_tool(wire("entropic.followup"), {"query": "Take long"})
        assert found.is_error is False
    manager, storage = store_of(root)
    with manager:
        rows = storage.list_delegations()
        assert len(rows) == 1
        record = storage.load_delegation_with_messages(rows[0]["delegation_id"])
    assert record["status"] == "failed" and record["summary"].startswith("cancelled")
    assert [m["role"] for m in record["messages"]][:4] == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_client_without_sampling_is_not_listed_the_delegation_tools(tmp_path: Path, era: str) -> None:
    from mcp import Client

    root = project_with(tmp_path)
    mode = "legacy" if era == "2025-11-25" else "auto"
    async with Client(stdio_params(root), mode=mode, read_timeout_seconds=60) as client:
        names = learn_spelling({tool.name for tool in (await client.list_tools()).tools})
        assert wire("entropic.followup") in names
        assert not {wire("entropic.delegate"), wire("entropic.pipeline"), wire("entropic.resume_delegation")} & names
        refused = await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Look"})
        body = payload(refused)
        assert refused.is_error is True and body["error"] == "sampling_unsupported"
        assert "entropic-mcp/directives" in body["message"]


async def test_client_declaring_the_directives_extension_gets_the_directive(tmp_path: Path) -> None:
    from mcp import ClientSession, stdio_client
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
    from mcp_types import (
        ClientCapabilities,
        Implementation,
        InitializedNotification,
        InitializeRequest,
        InitializeRequestParams,
        InitializeResult,
    )

    root = project_with(tmp_path)
    async with stdio_client(stdio_params(root)) as (read, write):
        session = ClientSession(dispatcher=JSONRPCDispatcher(read, write), read_timeout_seconds=30)
        async with session:
            result = await session.send_request(
                InitializeRequest(
                    params=InitializeRequestParams(
                        protocol_version="2025-11-25",
                        capabilities=ClientCapabilities(experimental={"entropic-mcp/directives": {}}),
                        client_info=Implementation(name="directive-host", version="1"),
                    )
                ),
                InitializeResult,
            )
            session.adopt(result)
            await session.send_notification(InitializedNotification())
            listed = learn_spelling({tool.name for tool in (await session.list_tools()).tools})
            assert wire("entropic.delegate") in listed
            answer = await session.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Look"})
            assert answer.is_error is False
            directives = answer.meta["entropic-mcp/directives"]
            assert directives[0]["type"] == "delegate" and directives[0]["target"] == "researcher"


async def test_child_past_the_delegation_deadline_is_stopped_and_recorded(tmp_path: Path) -> None:
    root = project_with(tmp_path, deadline=2)
    never = anyio.Event()

    class Silent(ScriptedModel):
        async def __call__(self, context: Any, params: Any) -> Any:
            self.requests.append(params)
            await never.wait()  # a model that never answers
            raise AssertionError("unreachable")

    model = Silent({})
    async with official(root, model) as client:
        result = await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Think forever"})
        never.set()
    body = payload(result)
    assert result.is_error is True and body["error"] == "delegation_deadline" and body["turns"] == 0
    assert "deadline" in body["message"]
    record = record_of(root, body["delegation_id"])
    assert record["status"] == "failed" and "deadline passed" in record["summary"]


async def test_pipeline_stops_at_a_stage_that_does_not_complete(tmp_path: Path) -> None:
    root = project_with(tmp_path, max_turns=1)
    model = ScriptedModel(
        {
            "researcher": [[tool_use("filesystem.read_file", {"path": "README.md"}, "q1")]],
            "writer": [[tool_use("entropic.complete", {"summary": "never asked"}, "q2")]],
        }
    )
    async with official(root, model) as client:
        result = await client.call_tool(
            wire("entropic.pipeline"), {"stages": ["researcher", "writer"], "task": "Research, then write"}
        )
    body = payload(result)
    assert result.is_error is True and body["error"] == "pipeline_stopped" and body["status"] == "failed"
    assert [s["target"] for s in body["stages"]] == ["researcher"] and body["stages"][0]["status"] == "max_turns"
    assert "stopped at stage 'researcher'" in body["message"]
    assert {r.metadata["entropic-mcp/tier"] for r in model.requests} == {"researcher"}
    manager, storage = store_of(root)
    with manager:
        rows = storage.list_delegations()
    assert [(r["target_tier"], r["status"]) for r in rows] == [("researcher", "failed")]


async def test_2026_client_abandoning_the_call_mid_child_leaves_it_recorded_cancelled(tmp_path: Path) -> None:
    """On 2026-07-28 the child waits between rounds for the client's retry; a client that goes away
    instead leaves no request to cancel: serve stopping cancels the suspended child, recorded so."""
    root = project_with(tmp_path)
    asked = anyio.Event()

    class Stalling(ScriptedModel):
        async def __call__(self, context: Any, params: Any) -> Any:
            if len(self.requests) == 1:
                self.requests.append(params)
                asked.set()
                await anyio.sleep_forever()
            return await super().__call__(context, params)

    model = Stalling({"researcher": researcher_turns("never")})
    async with official(root, model, "2026-07-28") as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Take long"})

            group.start_soon(call)
            await asked.wait()
            group.cancel_scope.cancel()

    def closed() -> dict[str, Any] | None:
        manager, storage = store_of(root)
        with manager:
            rows = storage.list_delegations()
            assert len(rows) == 1
            found = dict(storage.load_delegation_with_messages(rows[0]["delegation_id"]))
        return found if found["status"] != "running" else None

    # The client has closed serve's stdin; serve records the child as it stops.
    assert wait_until(closed, 20)
    record = closed()
    assert record is not None
    assert record["status"] == "failed" and record["summary"].startswith("cancelled"), record["summary"]
    assert [m["role"] for m in record["messages"]][:4] == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_child_tool_calls_are_asked_of_the_user_like_any_call(tmp_path: Path, era: str) -> None:
    from mcp import Client
    from mcp_types import ElicitResult

    root = project_with(tmp_path)
    config = root / "entropic-mcp.toml"
    config.write_text(
        config.read_text().replace('default = "allow"', 'default = "ask"\nallow_read = false\nallow = ["entropic.*"]'),
        encoding="utf-8",
    )
    questions: list[str] = []
    answers = iter(["allow_once", "deny_once"])

    async def elicit(context: Any, params: Any) -> Any:
        questions.append(params.message)
        return ElicitResult(action="accept", content={"decision": next(answers)})

    model = ScriptedModel(
        {
            "researcher": [
                [tool_use("filesystem.read_file", {"path": "README.md"}, "a1")],
                [tool_use("filesystem.grep", {"pattern": "RETRIES", "path": "."}, "a2")],
                [tool_use("entropic.complete", {"summary": "read one, refused one"}, "a3")],
            ]
        }
    )
    async with Client(
        stdio_params(root),
        mode="legacy" if era == "2025-11-25" else "auto",
        sampling_callback=model,
        sampling_capabilities=sampling_capability(),
        elicitation_callback=elicit,
        read_timeout_seconds=60,
        input_required_max_rounds=50,
    ) as client:
        learn_spelling({tool.name for tool in (await client.list_tools()).tools})
        result = await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Look, asking"})
    body = payload(result)
    assert result.is_error is False and body["summary"] == "read one, refused one", body
    assert len(questions) == 2 and "filesystem.read_file" in questions[0] and "filesystem.grep" in questions[1]
    record = record_of(root, body["delegation_id"])
    read, grep = [m for m in record["messages"] if m["role"] == "tool"][:2]
    assert read["is_error"] is False and "Retries are configured" in read["content"]
    assert grep["is_error"] is True and "RETRIES = 3" not in grep["content"]


async def test_client_sampling_without_tools_gets_a_child_that_answers_in_text(tmp_path: Path) -> None:
    from mcp import Client

    root = project_with(tmp_path)
    model = ScriptedModel({"researcher": [[text("Retries are likely in settings.py.")]]})
    async with Client(stdio_params(root), mode="legacy", sampling_callback=model, read_timeout_seconds=60) as client:
        learn_spelling({tool.name for tool in (await client.list_tools()).tools})
        result = await client.call_tool(wire("entropic.delegate"), {"target": "researcher", "task": "Guess"})
    body = payload(result)
    assert result.is_error is False and body["summary"] == "Retries are likely in settings.py." and body["turns"] == 1
    assert model.requests[0].tools is None
    record = record_of(root, body["delegation_id"])
    assert record["status"] == "completed" and record["summary"] == "Retries are likely in settings.py."


async def test_child_naming_a_delegation_tool_is_told_it_is_not_available(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    model = ScriptedModel(
        {
            "writer": [
                [tool_use("entropic.delegate", {"target": "researcher", "task": "do it for me"}, "n1")],
                [tool_use("entropic.complete", {"summary": "wrote it myself"}, "n2")],
            ]
        }
    )
    async with official(root, model) as client:
        result = await client.call_tool(wire("entropic.delegate"), {"target": "writer", "task": "Write"})
    body = payload(result)
    assert result.is_error is False and body["summary"] == "wrote it myself"
    # Its keys allow entropic.delegate, but a child is neither offered it nor run it.
    assert wire("entropic.delegate") not in {tool.name for tool in model.requests[0].tools}
    refused = model.requests[1].messages[-1].content[0]
    assert refused.is_error is True and "not_available" in refused.content[0].text
    manager, storage = store_of(root)
    with manager:
        assert [r["target_tier"] for r in storage.list_delegations()] == ["writer"]
