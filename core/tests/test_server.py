import json
import sys
from pathlib import Path

import anyio
import pytest
from demo_server import DemoServer, Echo
from entropic_mcp import (
    AccessLevel,
    ConfigError,
    DuplicateNameError,
    MCPServerBase,
    ToolBase,
    ToolDefinition,
    ToolDefinitionError,
    load_tool_definition,
)
from entropic_mcp.directives import ContextAnchor

sys.path.insert(0, str(Path(__file__).parent))


def run(server, tool, args):
    return anyio.run(server.execute, tool, args)


def test_load_tool_definition_reads_package_data():
    definition = load_tool_definition("data_pkg", "good")
    assert definition.to_mcp() == {"name": "good", "description": "d", "inputSchema": {"type": "object"}}


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ("missing", "data_pkg/tools/missing.json: tool definition file not found"),
        ("noschema", "data_pkg/tools/noschema.json: missing required key(s) inputSchema"),
        ("badjson", "data_pkg/tools/badjson.json: invalid JSON"),
        ("misnamed", "data_pkg/tools/misnamed.json: 'name' is 'other', expected 'misnamed'"),
        ("arr", "data_pkg/tools/arr.json: inputSchema must be an object schema"),
    ],
)
def test_a_bad_definition_file_is_an_error_naming_the_file(tool, message):
    with pytest.raises(ToolDefinitionError) as excinfo:
        load_tool_definition("data_pkg", tool)
    assert message in str(excinfo.value)


@pytest.mark.parametrize("name", ["", "a.b", "a b", "x" * 65, "ü"])
def test_invalid_tool_names_are_refused(name):
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        ToolDefinition(name=name, description="", input_schema={"type": "object"})


def test_a_tool_without_definition_is_refused_at_construction():
    class Nameless(ToolBase):
        def execute(self, args, ctx):
            return ""

    with pytest.raises(ToolDefinitionError, match="has no ToolDefinition"):
        Nameless()


def test_registering_a_second_tool_with_one_name_names_both(tmp_path):
    server = DemoServer(root=tmp_path)
    with pytest.raises(DuplicateNameError, match="already has a tool named 'echo'"):
        server.register_tool(Echo())


def test_registering_a_class_hints_at_an_instance(tmp_path):
    server = DemoServer(root=tmp_path)
    with pytest.raises(TypeError, match="did you mean an instance"):
        server.register_tool(Echo)


def test_raising_tool_yields_the_barrier_envelope(tmp_path):
    response = run(DemoServer(root=tmp_path), "boom", {})
    assert response.to_dict() == {
        "result": "Error: tool 'demo.boom' failed: kaboom",
        "directives": [],
        "is_error": True,
    }


def test_anchor_on_success_carries_key_and_content(tmp_path):
    response = run(DemoServer(root=tmp_path), "echo", {"text": "hello"})
    assert response.directives == (ContextAnchor(key="echo:hello", content="hello"),)
    assert response.to_dict()["directives"] == [{"type": "context_anchor", "key": "echo:hello", "content": "hello"}]


def test_no_anchor_on_failure(tmp_path):
    response = run(DemoServer(root=tmp_path), "echo", {})  # KeyError inside the tool
    assert response.is_error and response.directives == ()


@pytest.mark.parametrize("raw", [None, "", "  ", "null", "[1]", [1], "junk", 7])
def test_arguments_are_normalised_to_an_empty_object(tmp_path, raw):
    server = DemoServer(root=tmp_path)
    seen = []

    class Probe(ToolBase):
        definition = ToolDefinition(name="probe", description="", input_schema={"type": "object"})

        def execute(self, args, ctx):
            seen.append(args)
            return "ok"

    server.register_tool(Probe())
    assert run(server, "probe", raw).result == "ok"
    assert seen == [{}]


def test_unknown_tool_is_an_error_naming_it(tmp_path):
    response = run(DemoServer(root=tmp_path), "nope", {})
    assert response.to_dict() == {"result": "Error: unknown tool 'demo.nope'", "directives": [], "is_error": True}


def test_a_tool_returning_garbage_is_a_failure_not_a_crash(tmp_path):
    server = DemoServer(root=tmp_path)

    class Garbage(ToolBase):
        definition = ToolDefinition(name="garbage", description="", input_schema={"type": "object"})

        def execute(self, args, ctx):
            return 42

    server.register_tool(Garbage())
    response = run(server, "garbage", {})
    assert response.is_error and "returned int" in response.result


def test_listing_is_in_registration_order_with_annotations(tmp_path):
    listing = DemoServer(root=tmp_path).list_tools()
    assert [t["name"] for t in listing][:3] == ["echo", "write", "fail"]
    assert listing[0]["annotations"] == {"readOnlyHint": True}
    assert listing[1]["annotations"] == {"readOnlyHint": False}
    assert MCPServerBase(name="empty").list_tools() == []


def test_access_level_defaults_to_write_and_is_ordered(tmp_path):
    server = DemoServer(root=tmp_path)
    assert server.access_level("boom") is AccessLevel.WRITE
    assert server.access_level("missing") is AccessLevel.WRITE
    assert AccessLevel.NONE < AccessLevel.READ < AccessLevel.WRITE


def test_configure_rejects_unknown_keys_and_bad_timeouts(tmp_path):
    server = DemoServer(root=tmp_path)
    with pytest.raises(ConfigError, match=r"\[servers.demo\] unknown key\(s\) 'colour'"):
        server.configure({"colour": "red"})
    with pytest.raises(ConfigError, match="timeout_seconds: expected a positive number"):
        server.configure({"timeout_seconds": -1})
    server.configure({"timeout_seconds": 2})
    assert server.default_timeout_seconds == 2.0


def test_set_working_dir_and_close(tmp_path):
    server = DemoServer(root=tmp_path)
    (tmp_path / "sub").mkdir()
    assert server.set_working_dir(tmp_path / "sub") is True
    assert server.root == (tmp_path / "sub").resolve()
    assert server.set_working_dir(tmp_path / "missing") is False
    server.close()
    server.close()
    assert server.closed


def test_default_permission_pattern_is_the_qualified_tool_name(tmp_path):
    server = DemoServer(root=tmp_path)
    assert server.permission_pattern("echo", {"text": "x"}) == "demo.echo"
    assert server.skip_duplicate_check("echo") is False
    assert json.loads(json.dumps(server.list_tools()))


def test_stuck_sync_tools_of_one_server_never_starve_another(tmp_path):
    import threading

    import anyio
    from entropic_mcp import AccessLevel, MCPServerBase, ToolBase
    from entropic_mcp import ToolDefinition as TD
    from entropic_mcp.testing import make_manager

    release = threading.Event()

    class Stuck(ToolBase):
        definition = TD(name="stuck", description="", input_schema={"type": "object"})
        required_access_level = AccessLevel.READ

        def execute(self, args, ctx):
            release.wait(30)
            return "released"

    class Quick(ToolBase):
        definition = TD(name="quick", description="", input_schema={"type": "object"})
        required_access_level = AccessLevel.READ

        def execute(self, args, ctx):
            return "quick"

    class Jammed(MCPServerBase):
        name = "jammed"
        default_timeout_seconds = None

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Stuck())

    class Fine(MCPServerBase):
        name = "fine"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Quick())

    manager = make_manager(
        tmp_path,
        config={"permissions": {"default": "allow"}, "servers": {"jammed": {"max_threads": 2}}},
        servers=[Jammed(root=tmp_path), Fine(root=tmp_path)],
    )
    jammed = manager.servers["jammed"]
    assert jammed.max_threads == 2

    async def main():
        async with anyio.create_task_group() as tg:
            for n in range(40):
                tg.start_soon(manager.call, "jammed.stuck", {"n": n})
            await anyio.sleep(0.2)
            assert jammed._pool.busy == 2  # bounded: 38 calls wait, no more threads
            for n in range(5):
                assert (await manager.call("fine.quick", {"n": n})).response.result == "quick"
            release.set()

    anyio.run(main)
    manager.close()


def test_worker_threads_are_daemons_so_a_stuck_tool_never_holds_the_process(tmp_path):
    from entropic_mcp._workers import WorkerPool

    pool = WorkerPool(1, "t")
    blocker = __import__("threading").Event()
    future = pool.submit(blocker.wait, 5)
    thread = next(t for t in __import__("threading").enumerate() if t.name.startswith("t-"))
    assert thread.daemon
    pool.shutdown(wait=True)  # returns at once: the running call is abandoned, not joined
    blocker.set()
    assert future.result(timeout=5) is True


def test_a_bare_server_checks_arguments_against_the_compiled_schema(tmp_path):
    import anyio
    from demo_server import DemoServer

    server = DemoServer(root=tmp_path)
    missing = anyio.run(server.execute, "echo", {})
    assert missing.is_error and "Missing required argument: text" in missing.result
    coerced = anyio.run(server.execute, "echo", {"text": 7})
    assert not coerced.is_error and coerced.result == "7"
    for odd in ({"text": "\udcff"}, {"text": "x", "n": "\udcff"}):
        anyio.run(server.execute, "echo", odd)  # an answer, never an exception
    assert server.get_tool("echo").validator is server.get_tool("echo").validator  # compiled once


# -- ending a conversation ---------------------------------------------------------------------------


class Keeper(MCPServerBase):
    """Keeps something per conversation; records how it was told the conversation ended."""

    name = "keeper"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ended = []

    def conversation_ended(self, ctx):
        self.ended.append((ctx.conversation_id, ctx.services.storage))


class OldStyle(MCPServerBase):
    name = "oldstyle"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ended = []

    def end_conversation(self, conversation_id):
        self.ended.append(conversation_id)


class Broken(MCPServerBase):
    name = "broken"

    def conversation_ended(self, ctx):
        raise RuntimeError("cannot let go")


def test_ending_a_conversation_reaches_every_server_with_the_hosts_services(tmp_path, caplog):
    from entropic_mcp.testing import make_manager

    keeper, old, broken = Keeper(root=tmp_path), OldStyle(root=tmp_path), Broken(root=tmp_path)
    manager = make_manager(
        tmp_path,
        config={"storage": {"backend": "tinydb", "path": str(tmp_path / "store")}},
        servers=[broken, keeper, old],
    )
    manager.end_conversation("c1")
    assert keeper.ended == [("c1", manager.storage)]  # the store, for state kept there
    assert old.ended == ["c1"]  # servers overriding only end_conversation still hear of it
    assert "server broken failed to end conversation 'c1'" in caplog.text
    manager.end_conversation("c2", servers={"oldstyle"})
    assert keeper.ended == [("c1", manager.storage)] and old.ended == ["c1", "c2"]
    manager.close()
