"""The reference host's real-model adapters against local stub servers that speak each wire format.

Each stub is a real HTTP server on a loopback socket (``http.server`` in a thread). It checks every
request against the format as the vendor documents it — roles, keys, tool name pattern, tool call
ids answered by tool results in the right place, headers — and answers from a script per model
name, so a whole lead/researcher session runs through ``Host`` with ``OpenAICompatibleModel`` or
``AnthropicMessagesModel`` exactly as it would against llama.cpp, vLLM, Ollama or Anthropic.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from entropic_mcp import (
    AccessLevel,
    CallContext,
    ConfigError,
    MCPServerBase,
    ServerManager,
    ToolBase,
    ToolDefinition,
    ToolResult,
    config_from_dict,
)
from entropic_mcp._host_models import WireNames, wire_name
from entropic_mcp.directives import Complete, Delegate, StopProcessing
from entropic_mcp.host import (
    AnthropicMessagesModel,
    Host,
    ModelError,
    OpenAICompatibleModel,
    TierModels,
    model_from_config,
    models_from_config,
)
from entropic_mcp.testing import fresh_plugins
from hypothesis import given
from hypothesis import strategies as st

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
KEY = "sk-test-123"

# -- the stub servers ------------------------------------------------------------------------------------


@attrs.frozen
class Reply:
    """One scripted model turn, in neither wire format: the stub writes it in its own."""

    text: str = ""
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


@attrs.frozen
class Raw:
    """An answer sent as is (errors, broken bodies)."""

    status: int
    body: str
    content_type: str = "application/json"


Step = Reply | Raw | Callable[[dict[str, Any]], "Reply | Raw"]


def check_openai(path: str, headers: dict[str, str], body: dict[str, Any], api_key: str | None) -> list[str]:
    """What OpenAI's chat completions endpoint would refuse in this request."""
    problems: list[str] = []
    if path != "/v1/chat/completions":
        problems.append(f"path {path}")
    if not headers.get("content-type", "").startswith("application/json"):
        problems.append("content-type is not application/json")
    if api_key is not None and headers.get("authorization") != f"Bearer {api_key}":
        problems.append(f"authorization header {headers.get('authorization')!r}")
    if api_key is None and "authorization" in headers:
        problems.append("an authorization header though no key is configured")
    allowed = {"model", "messages", "tools", "max_tokens", "temperature", "tool_choice", "top_p"}
    if set(body) - allowed:
        problems.append(f"unknown body keys {sorted(set(body) - allowed)}")
    if not isinstance(body.get("model"), str):
        problems.append("model missing")
    names = []
    for tool in body.get("tools", []):
        if set(tool) != {"type", "function"} or tool["type"] != "function":
            problems.append(f"tool {tool!r}")
            continue
        function = tool["function"]
        if set(function) != {"name", "description", "parameters"}:
            problems.append(f"function keys {sorted(function)}")
        if not NAME.match(function.get("name", "")):
            problems.append(f"tool name {function.get('name')!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
        if function.get("parameters", {}).get("type") != "object":
            problems.append(f"parameters of {function.get('name')} are not an object schema")
        names.append(function.get("name"))
    if len(names) != len(set(names)):
        problems.append(f"duplicate tool names {names}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages missing"]
    pending: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        where = f"messages[{index}] ({role})"
        if role == "tool":
            if set(message) != {"role", "tool_call_id", "content"}:
                problems.append(f"{where} keys {sorted(message)}")
            if message.get("tool_call_id") not in pending:
                problems.append(f"{where} answers {message.get('tool_call_id')!r}, not a pending call of {pending}")
            else:
                pending.remove(message["tool_call_id"])
            if not isinstance(message.get("content"), str):
                problems.append(f"{where} content is not a string")
            continue
        if pending:
            problems.append(f"{where} comes before tool messages for {pending}")
            pending = []
        if role in ("system", "user"):
            if set(message) != {"role", "content"} or not isinstance(message["content"], str):
                problems.append(f"{where} {message!r}")
        elif role == "assistant":
            if set(message) - {"role", "content", "tool_calls"}:
                problems.append(f"{where} keys {sorted(message)}")
            calls = message.get("tool_calls")
            if calls is None and not isinstance(message.get("content"), str):
                problems.append(f"{where} has neither text nor tool calls")
            if message.get("content") is not None and not isinstance(message["content"], str):
                problems.append(f"{where} content {message['content']!r}")
            for call in calls or ():
                if set(call) != {"id", "type", "function"} or call["type"] != "function":
                    problems.append(f"{where} tool call {call!r}")
                    continue
                if not NAME.match(call["function"].get("name", "")):
                    problems.append(f"{where} tool call name {call['function'].get('name')!r}")
                arguments = call["function"].get("arguments")
                try:
                    if not isinstance(orjson.loads(arguments), dict):
                        raise ValueError
                except (TypeError, ValueError):
                    problems.append(f"{where} arguments {arguments!r} are not JSON text of an object")
                pending.append(call["id"])
        else:
            problems.append(f"{where}: unknown role")
    if pending:
        problems.append(f"tool calls {pending} never answered")
    if messages[-1].get("role") == "assistant":
        problems.append("the last message is the assistant's")
    return problems


def check_anthropic(path: str, headers: dict[str, str], body: dict[str, Any], api_key: str | None) -> list[str]:
    """What Anthropic's Messages API would refuse in this request."""
    problems: list[str] = []
    if path != "/v1/messages":
        problems.append(f"path {path}")
    if headers.get("anthropic-version") != "2023-06-01":
        problems.append(f"anthropic-version header {headers.get('anthropic-version')!r}")
    if api_key is not None and headers.get("x-api-key") != api_key:
        problems.append(f"x-api-key header {headers.get('x-api-key')!r}")
    if "authorization" in headers:
        problems.append("an authorization header (Anthropic takes x-api-key)")
    if not headers.get("content-type", "").startswith("application/json"):
        problems.append("content-type is not application/json")
    allowed = {"model", "max_tokens", "messages", "system", "tools", "temperature", "tool_choice", "top_p", "top_k"}
    if set(body) - allowed:
        problems.append(f"unknown body keys {sorted(set(body) - allowed)}")
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        problems.append("max_tokens is required")
    if "system" in body and not isinstance(body["system"], str):
        problems.append("system is not a string")
    names = []
    for tool in body.get("tools", []):
        if set(tool) != {"name", "description", "input_schema"}:
            problems.append(f"tool keys {sorted(tool)}")
        if not NAME.match(tool.get("name", "")):
            problems.append(f"tool name {tool.get('name')!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
        if tool.get("input_schema", {}).get("type") != "object":
            problems.append(f"input_schema of {tool.get('name')} is not an object schema")
        names.append(tool.get("name"))
    if len(names) != len(set(names)):
        problems.append(f"duplicate tool names {names}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages missing"]
    uses: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        where = f"messages[{index}] ({role})"
        if set(message) != {"role", "content"}:
            problems.append(f"{where} keys {sorted(message)}")
        expected = "user" if index % 2 == 0 else "assistant"
        if role != expected:
            problems.append(f"{where}: roles must alternate starting with user")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            problems.append(f"{where} has no content")
            continue
        answered: list[str] = []
        seen_other = False
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                seen_other = True
                if set(block) != {"type", "text"} or not isinstance(block["text"], str) or not block["text"]:
                    problems.append(f"{where} text block {block!r} (text blocks must be non-empty)")
            elif kind == "tool_use" and role == "assistant":
                if set(block) != {"type", "id", "name", "input"} or not isinstance(block.get("input"), dict):
                    problems.append(f"{where} tool_use {block!r}")
                if not NAME.match(block.get("name", "")):
                    problems.append(f"{where} tool_use name {block.get('name')!r}")
            elif kind == "tool_result" and role == "user":
                if set(block) - {"type", "tool_use_id", "content", "is_error"}:
                    problems.append(f"{where} tool_result keys {sorted(block)}")
                if seen_other:
                    problems.append(f"{where}: tool_result blocks must come first in the user turn")
                if block.get("tool_use_id") not in uses:
                    problems.append(f"{where} tool_result for {block.get('tool_use_id')!r}, not one of {uses}")
                answered.append(block.get("tool_use_id"))
                if not isinstance(block.get("content"), str):
                    problems.append(f"{where} tool_result content is not text")
            else:
                problems.append(f"{where}: block type {kind!r} is not allowed here")
        if role == "user":
            if sorted(answered) != sorted(uses):
                problems.append(f"{where} answers tool_use ids {answered}, expected {uses}")
            uses = []
        else:
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if messages[-1].get("role") != "user":
        problems.append("the last message is not the user's")
    return problems


def answer_openai(model: str, reply: Reply, count: int) -> dict[str, Any]:
    calls = [
        {"id": f"call_{count}_{i}", "type": "function", "function": {"name": n, "arguments": orjson.dumps(a).decode()}}
        for i, (n, a) in enumerate(reply.calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{count}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def answer_anthropic(model: str, reply: Reply, count: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{count}_{i}", "name": n, "input": a} for i, (n, a) in enumerate(reply.calls)
    ]
    return {
        "id": f"msg_{count}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


WIRES = {"openai": (check_openai, answer_openai), "anthropic": (check_anthropic, answer_anthropic)}


class Stub:
    """A model server on 127.0.0.1 speaking ``wire``: checks each request, answers from ``script``."""

    def __init__(self, wire: str, script: dict[str, list[Step]], *, api_key: str | None = KEY) -> None:
        self.wire = wire
        self.script = {model: list(steps) for model, steps in script.items()}
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.release = threading.Event()  # for the step that holds its answer back
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                status, payload, kind = stub.handle(self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                data = payload.encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (the timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Stub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, str, str]:
        check, answer = WIRES[self.wire]
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self.problems.append("the body is not JSON")
            return 400, '{"error": {"message": "bad JSON"}}', "application/json"
        self.requests.append(body)
        problems = check(path, headers, body, self.api_key)
        if problems:
            self.problems.extend(problems)
            error = {"type": "invalid_request_error", "message": "; ".join(problems)}
            return 400, orjson.dumps({"type": "error", "error": error}).decode(), "application/json"
        steps = self.script.get(body["model"])
        if not steps:
            self.problems.append(f"no scripted turn left for model {body['model']!r}")
            return 500, '{"error": {"message": "script exhausted"}}', "application/json"
        step = steps.pop(0)
        try:
            reply = step(body) if callable(step) else step
        except Exception as exc:  # a failed check of the script: the test reads it in problems
            self.problems.append(f"scripted turn of {body['model']!r} failed: {exc!r}")
            return 500, '{"error": {"message": "scripted turn failed"}}', "application/json"
        if isinstance(reply, Raw):
            if reply.status == 0:  # hold the answer back until the test is done
                self.release.wait()
                return 200, "{}", "application/json"
            return reply.status, reply.body, reply.content_type
        return 200, orjson.dumps(answer(body["model"], reply, len(self.requests))).decode(), "application/json"

    def of(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["model"] == model]


def last_text(body: dict[str, Any]) -> str:
    """The last text of the last message of a request in either format (the host's notes)."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return [b["text"] for b in content if b["type"] == "text"][-1]


def results_of(body: dict[str, Any]) -> list[str]:
    """The tool results the latest turn of a request carries, in order."""
    if body["messages"][-1].get("role") == "tool" or any(m["role"] == "tool" for m in body["messages"]):
        tail = []
        for message in reversed(body["messages"]):
            if message["role"] != "tool":
                if tail:
                    break
                continue
            tail.append(message["content"])
        return tail[::-1]
    blocks = body["messages"][-1]["content"]
    return [b["content"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]


def model_for(wire: str, stub: Stub, model: str, **options: Any) -> OpenAICompatibleModel | AnthropicMessagesModel:
    if wire == "openai":
        return OpenAICompatibleModel(base_url=stub.url + "/v1", model=model, api_key=KEY, **options)
    return AnthropicMessagesModel(base_url=stub.url, model=model, api_key=KEY, **options)


# -- the tools the session uses ---------------------------------------------------------------------------

OBJECT = {"type": "object"}


class Emit(ToolBase):
    required_access_level = AccessLevel.READ

    def __init__(self, name: str, description: str, schema: dict[str, Any], make: Callable[[dict], list]) -> None:
        super().__init__(ToolDefinition(name=name, description=description, input_schema=schema))
        self.make = make

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult(text="ok", directives=self.make(args))


class Agent(MCPServerBase):
    """The delegation tools, as the entropic plugin's return their directives."""

    name = "agent"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        task = {"type": "object", "properties": {"target": {"type": "string"}, "task": {"type": "string"}}}
        self.register_tool(
            Emit(
                "delegate",
                "Hand a task to another tier; its summary comes back. Finish with agent.complete.",
                {**task, "required": ["target", "task"]},
                lambda a: [Delegate(target=a["target"], task=a["task"]), StopProcessing()],
            )
        )
        summary = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}
        self.register_tool(
            Emit("complete", "End the task with a summary.", summary, lambda a: [Complete(summary=a["summary"])])
        )


class Read(ToolBase):
    required_access_level = AccessLevel.READ
    definition = ToolDefinition(
        name="read_file",
        description="Read a file under the root.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        return (self.root / args["path"]).read_text()


class Grep(Read):
    definition = ToolDefinition(
        name="grep",
        description="Lines matching a regular expression, as path:line:text.",
        input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
    )

    def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        pattern = re.compile(args["pattern"])
        return "\n".join(
            f"{path.relative_to(self.root)}:{number}:{line}"
            for path in sorted(self.root.rglob("*.toml"))
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if pattern.search(line)
        )


class Write(Read):
    required_access_level = AccessLevel.WRITE
    definition = ToolDefinition(
        name="write_file",
        description="Write a file under the root (read it with files.read_file first).",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    )

    def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        (self.root / args["path"]).write_text(args["content"])
        return "written"


class Files(MCPServerBase):
    name = "files"

    def __init__(self, root: Path, **kwargs: Any) -> None:
        super().__init__(root=root, **kwargs)
        for tool in (Read(root), Grep(root), Write(root)):
            self.register_tool(tool)


RETRY = "[http]\nretries = 5\nbackoff = 'exponential'\nmax_delay = 30\n"


@pytest.fixture
def manager(tmp_path: Path):
    project = tmp_path / "project"
    (project / "config").mkdir(parents=True)
    (project / "config" / "retry.toml").write_text(RETRY)
    config = config_from_dict(
        {
            "storage": {"backend": "tinydb", "path": str(tmp_path / "store")},
            "permissions": {"default": "allow"},
            "identities": {"researcher": {"keys": {"files.*": "READ", "agent.complete": "READ"}}},
        },
        root=project,
    )
    manager = ServerManager(config, plugins=fresh_plugins(), servers=[Agent(root=project), Files(root=project)])
    yield manager
    manager.close()


# -- the session --------------------------------------------------------------------------------------------

FINDING = "Retries: 5 with exponential backoff, max_delay = 30 s, in config/retry.toml [http]"


def session_script() -> dict[str, list[Step]]:
    def researcher_after_reading(body: dict[str, Any]) -> Reply:
        read, grep = results_of(body)
        assert "backoff = 'exponential'" in read and "config/retry.toml:4:max_delay = 30" in grep
        return Reply(calls=(("files__write_file", {"path": "config/retry.toml", "content": "retries = 0"}),))

    def researcher_after_refusal(body: dict[str, Any]) -> Reply:
        [refusal] = results_of(body)
        assert orjson.loads(refusal)["error"] == "access_denied"
        assert "READ access to 'files__write_file'" in refusal  # errors in the model's own spelling
        return Reply(text="Found it.", calls=(("agent__complete", {"summary": FINDING}),))

    def lead_after_grep(body: dict[str, Any]) -> Reply:
        [found] = results_of(body)
        assert found.startswith("config/retry.toml:2:retries = 5")
        return Reply(calls=(("agent__delegate", {"target": "researcher", "task": "How are retries configured?"}),))

    def lead_after_delegation(body: dict[str, Any]) -> Reply:
        note = last_text(body)
        assert "to 'researcher' completed" in note and FINDING in note
        return Reply(calls=(("agent__complete", {"summary": "lead: " + note.split("\n", 1)[1]}),))

    return {
        "lead-model": [
            Reply(text="Let me look first.", calls=(("files__grep", {"pattern": "retries"}),)),
            lead_after_grep,
            lead_after_delegation,
        ],
        "researcher-model": [
            Reply(
                text="Reading the config.",
                calls=(
                    ("files__read_file", {"path": "config/retry.toml"}),
                    ("files__grep", {"pattern": "max_delay"}),
                ),
            ),
            researcher_after_reading,
            researcher_after_refusal,
        ],
    }


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_lead_and_researcher_session_runs_through_each_wire_format(wire, manager):
    with Stub(wire, session_script()) as stub:
        base = stub.url + ("/v1" if wire == "openai" else "")
        models = models_from_config(
            {
                "default": {"api": wire, "base_url": base, "model": "lead-model", "api_key": KEY, "max_tokens": 512},
                "tiers": {"researcher": {"model": "researcher-model", "temperature": 0}},
            }
        )
        result = Host(manager, models).run_sync("Sort out how retries work", identity="lead")

    assert stub.problems == []
    assert result.status == "completed", result
    assert result.summary == f"lead: {FINDING}"
    assert [len(stub.of("lead-model")), len(stub.of("researcher-model"))] == [3, 3]

    # the researcher saw only what its keys allow, under names the API accepts, and was refused the write
    first = stub.of("researcher-model")[0]
    tools = [t["function"]["name"] if wire == "openai" else t["name"] for t in first["tools"]]
    assert sorted(tools) == ["agent__complete", "files__grep", "files__read_file", "files__write_file"]
    assert (manager.config.root / "config" / "retry.toml").read_text() == RETRY
    if wire == "anthropic":
        assert "'researcher' tier" in first["system"] and first["max_tokens"] == 512
        assert first["messages"][0] == {
            "role": "user",
            "content": [{"type": "text", "text": "How are retries configured?"}],
        }
    else:
        assert first["messages"][0]["role"] == "system" and first["temperature"] == 0

    [delegation] = result.delegations
    assert delegation.status == "completed" and delegation.summary == FINDING
    record = manager.storage.load_delegation_with_messages(delegation.delegation_id)
    assert record["status"] == "completed" and record["summary"] == FINDING and record["target_tier"] == "researcher"
    roles = [m["role"] for m in record["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "tool"]
    calls = [c["name"] for m in record["messages"] for c in m.get("tool_calls", ())]
    assert calls == ["files.read_file", "files.grep", "files.write_file", "agent.complete"]  # stored in host names
    refused = record["messages"][6]
    assert refused["is_error"] is True and refused["name"] == "files.write_file"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_model_calling_an_unknown_tool_gets_an_error_result_and_goes_on(wire, manager):
    def after(body: dict[str, Any]) -> Reply:
        [error] = results_of(body)
        assert "files__delete" in error
        return Reply(text="That tool does not exist; done.")

    with Stub(wire, {"m": [Reply(calls=(("files__delete", {"path": "x"}),)), after]}) as stub:
        result = Host(manager, model_for(wire, stub, "m")).run_sync("delete x")
    assert stub.problems == []
    assert result.status == "answered" and result.summary == "That tool does not exist; done."
    tool = next(m for m in result.messages if m["role"] == "tool")
    assert tool["is_error"] is True and tool["name"] == "files__delete"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_dotted_name_from_the_model_still_runs_and_goes_back_in_wire_spelling(wire, manager):
    def after(body: dict[str, Any]) -> Reply:
        assert results_of(body) == [RETRY]
        return Reply(text="read")

    with Stub(wire, {"m": [Reply(calls=(("files.read_file", {"path": "config/retry.toml"}),)), after]}) as stub:
        result = Host(manager, model_for(wire, stub, "m")).run_sync("read it")
    assert stub.problems == [] and result.status == "answered"


def test_openai_arguments_that_are_not_json_are_refused_as_a_tool_error(manager):
    bad = Raw(
        200,
        orjson.dumps(
            {
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {"name": "files__grep", "arguments": "{pat"},
                                }
                            ],
                        }
                    }
                ]
            }
        ).decode(),
    )

    def after(body: dict[str, Any]) -> Reply:
        [error] = results_of(body)
        sent = body["messages"][-2]["tool_calls"][0]["function"]["arguments"]
        assert orjson.loads(sent) == {"invalid_arguments": "{pat"}  # an object, as endpoints require
        assert orjson.loads(error)["error"] == "invalid_args" and "files__grep" in error
        return Reply(text="gave up")

    with Stub("openai", {"m": [bad, after]}) as stub:
        result = Host(manager, model_for("openai", stub, "m")).run_sync("grep")
    assert stub.problems == []
    assert result.messages[3]["is_error"] is True


# -- failures of the endpoint -----------------------------------------------------------------------------

ERRORS = [
    (Raw(500, '{"error": {"message": "CUDA out of memory", "type": "server_error"}}'), r"HTTP 500: CUDA out of memory"),
    (Raw(401, '{"error": {"message": "invalid x-api-key", "type": "authentication_error"}}'), r"HTTP 401.*API key"),
    (Raw(404, "<html>Not Found</html>", "text/html"), r"HTTP 404: <html>Not Found</html>.*base_url"),
    (Raw(429, '{"error": {"message": "slow down"}}'), r"HTTP 429: slow down.*try again later"),
    (Raw(200, "<!doctype html><p>hello", "text/html"), r"not JSON.*base_url"),
    (Raw(200, "[1, 2]"), r"not a JSON object"),
    (Raw(502, "", "text/plain"), r"HTTP 502: Bad Gateway; the model server failed"),
]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize(("raw", "message"), ERRORS, ids=["500", "401", "404", "429", "html", "array", "empty-502"])
def test_endpoint_failures_are_model_errors_that_say_what_to_check(wire, raw, message, manager):
    with Stub(wire, {"m": [raw]}) as stub, pytest.raises(ModelError, match=message) as caught:
        Host(manager, model_for(wire, stub, "m")).run_sync("anything")
    assert stub.url in str(caught.value) and stub.problems == []
    assert caught.value.__cause__ is None and (caught.value.__context__ is None or caught.value.__suppress_context__)


@pytest.mark.parametrize(
    ("wire", "body", "message"),
    [
        ("openai", {"object": "chat.completion"}, "without choices"),
        ("openai", {"choices": [{"delta": {"content": "x"}}]}, r"without choices\[0\].message"),
        ("openai", {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {}}]}}]}, "function.name"),
        ("anthropic", {"type": "message", "content": "text"}, "without a content list"),
        ("anthropic", {"type": "message", "content": [{"type": "tool_use", "input": {}}]}, "without a name and id"),
        ("anthropic", {"type": "message", "content": [], "stop_reason": "max_tokens"}, "raise max_tokens"),
        ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "Overloaded"),
    ],
)
def test_answers_not_in_the_format_are_model_errors(wire, body, message, manager):
    with Stub(wire, {"m": [Raw(200, orjson.dumps(body).decode())]}) as stub, pytest.raises(ModelError, match=message):
        Host(manager, model_for(wire, stub, "m")).run_sync("anything")


def test_an_endpoint_nobody_listens_on_is_a_model_error(manager):
    with Stub("openai", {}) as stub:
        url = stub.url
    with pytest.raises(ModelError, match="could not reach .* is the server running"):
        Host(manager, OpenAICompatibleModel(base_url=url + "/v1", model="m")).run_sync("anything")


def test_an_endpoint_that_does_not_answer_in_time_is_a_model_error(manager):
    with Stub("anthropic", {"m": [Raw(0, "")]}) as stub, pytest.raises(ModelError, match="no answer within 0.2 s"):
        Host(manager, model_for("anthropic", stub, "m", timeout=0.2)).run_sync("anything")


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_childs_endpoint_failing_fails_its_delegation_and_the_lead_goes_on(wire, manager):
    def lead_after(body: dict[str, Any]) -> Reply:
        note = last_text(body)
        assert "to 'researcher' failed" in note and "HTTP 503" in note
        return Reply(calls=(("agent__complete", {"summary": "the researcher is down"}),))

    script: dict[str, list[Step]] = {
        "lead": [Reply(calls=(("agent__delegate", {"target": "researcher", "task": "look"}),)), lead_after],
        "researcher": [Raw(503, '{"error": {"message": "model loading"}}')],
    }
    with Stub(wire, script) as stub:
        models = {"lead": model_for(wire, stub, "lead"), "researcher": model_for(wire, stub, "researcher")}
        result = Host(manager, models).run_sync("go")
    assert stub.problems == [] and result.status == "completed"
    [delegation] = result.delegations
    assert delegation.status == "failed" and "model loading" in delegation.summary
    assert manager.storage.load_delegation_with_messages(delegation.delegation_id)["status"] == "failed"


# -- tool names -------------------------------------------------------------------------------------------


def test_wire_names_map_dotted_names_and_back():
    names = WireNames.build(["filesystem.read_file", "git.log", "a-b.c.d", "x" * 70 + ".y"])
    assert names.wire("filesystem.read_file") == "filesystem__read_file"
    assert names.wire("a-b.c.d") == "a-b__c_d"
    assert len(names.wire("x" * 70 + ".y")) == 64
    for internal, wire in names.to_wire.items():
        assert NAME.match(wire) and names.internal(wire) == internal
    assert names.internal("nope") == "nope"
    assert (
        names.rewrite("read with filesystem.read_file, then git.log")
        == "read with filesystem__read_file, then git__log"
    )


@given(st.lists(st.text(min_size=1, max_size=90), unique=True, max_size=12))
def test_every_listing_gets_distinct_allowed_names_that_map_back(internal_names):
    names = WireNames.build(internal_names)
    wires = [names.wire(n) for n in internal_names]
    assert all(NAME.match(w) for w in wires)
    assert len(set(wires)) == len(wires)
    assert [names.internal(w) for w in wires] == internal_names
    assert all(NAME.match(wire_name(n)) for n in internal_names)


# -- configuration ------------------------------------------------------------------------------------------


def test_tiers_lay_their_table_over_the_default_and_unnamed_tiers_use_it(monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", "from-env")
    models = models_from_config(
        {
            "default": {"base_url": "http://127.0.0.1:8080/v1", "model": "qwen", "api_key_env": "LOCAL_KEY"},
            "tiers": {"lead": {"api": "anthropic", "model": "claude-x", "base_url": "http://127.0.0.1:9"}},
        }
    )
    assert isinstance(models, TierModels) and list(models) == ["lead"]
    assert isinstance(models["lead"], AnthropicMessagesModel) and models["lead"].api_key == "from-env"
    assert models["researcher"] is models["coder"] is models.default
    assert isinstance(models.default, OpenAICompatibleModel) and models.default.model == "qwen"
    with pytest.raises(KeyError):
        models_from_config({"tiers": {"lead": {"base_url": "http://h/v1", "model": "m"}}})["researcher"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"model": "m"}, r"base_url: required for api = 'openai'.*11434"),
        ({"api": "anthropic"}, "model: required"),
        ({"api": "gemini", "model": "m"}, "api: expected 'openai'"),
        ({"api": "anthropic", "model": "m", "max_token": 5}, r"unknown key\(s\) \['max_token'\]"),
        ({"api": "anthropic", "model": "m", "timeout": "fast"}, "timeout: expected a number"),
        ({"api": "anthropic", "model": "m", "max_tokens": 0}, "max_tokens: must be positive"),
        ({"api": "anthropic", "model": "m", "api_key_env": "ENTROPIC_UNSET_KEY"}, "ENTROPIC_UNSET_KEY is not set"),
    ],
)
def test_a_bad_model_table_is_a_config_error_naming_the_key(table, message):
    with pytest.raises(ConfigError, match=message):
        model_from_config(table)


def test_a_models_table_without_any_model_is_a_config_error():
    with pytest.raises(ConfigError, match="no model"):
        models_from_config({})
    with pytest.raises(ConfigError, match="unknown key"):
        models_from_config({"lead": {"model": "m"}})
