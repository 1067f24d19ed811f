import types

import pytest
from demo_server import DemoServer
from entropic_mcp import MCPServerBase, ServerResponse, ToolBase, ToolDefinition, hookimpl
from entropic_mcp.testing import ConformanceError, check_plugin, check_server


class Strict(ToolBase):
    definition = ToolDefinition(
        name="strict",
        description="",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )

    def execute(self, args, ctx):
        return str(args["n"] + 1)


class RaisesOutsideTheBarrier(MCPServerBase):
    """A server that overrides execute and lets junk arguments escape."""

    name = "leaky"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.register_tool(Strict())

    async def execute(self, tool_name, raw_args, ctx=None):
        return ServerResponse(result=str(raw_args["n"]))


class NonEnvelope(MCPServerBase):
    name = "garbage"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.register_tool(Strict())

    async def execute(self, tool_name, raw_args, ctx=None):
        return {"result": "not an envelope"}


class ErrorWithDirectives(MCPServerBase):
    name = "steering"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.register_tool(Strict())

    async def execute(self, tool_name, raw_args, ctx=None):
        response = ServerResponse(result="x", is_error=True)
        object.__setattr__(response, "directives", ({"type": "stop_processing"},))
        return response


@pytest.mark.parametrize(
    ("server_class", "problem"),
    [
        (RaisesOutsideTheBarrier, "execute raised"),
        (NonEnvelope, "not a ServerResponse"),
        (ErrorWithDirectives, "an error carries directives"),
    ],
)
def test_check_server_fails_on_broken_servers(tmp_path, server_class, problem):
    with pytest.raises(ConformanceError, match=problem):
        check_server(server_class(root=tmp_path), examples=5)


def test_check_server_passes_a_good_server(tmp_path):
    server = DemoServer(root=tmp_path)
    for name in ("slow", "slow_sync"):  # tools that sleep for as long as they are told
        del server._tools[name]
    assert check_server(server, examples=10) == []


def test_check_server_reports_configure_accepting_anything(tmp_path):
    class Lax(MCPServerBase):
        name = "lax"

        def configure(self, config):
            pass

    problems = check_server(Lax(root=tmp_path), examples=2, raise_on_failure=False)
    assert problems == ["lax: configure accepted an unknown key"]


def test_check_plugin_builds_the_servers_of_a_module(tmp_path):
    module = types.ModuleType("leaky_plugin")

    @hookimpl
    def entropic_mcp_servers(config):
        return RaisesOutsideTheBarrier(root=config.root)

    module.entropic_mcp_servers = entropic_mcp_servers
    problems = check_plugin(module, root=tmp_path, examples=5, raise_on_failure=False)
    assert any("execute raised" in p for p in problems)


def test_check_plugin_needs_a_server():
    module = types.ModuleType("empty_plugin")
    with pytest.raises(ConformanceError, match="registers no server"):
        check_plugin(module, examples=2)


def test_served_client_lists_and_calls_through_mcp(tmp_path):
    import anyio
    from entropic_mcp.testing import make_manager, served_client

    manager = make_manager(tmp_path, config={"permissions": {"default": "allow"}}, servers=[DemoServer(root=tmp_path)])

    async def main():
        async with served_client(manager) as client:
            listing = await client.list_tools()
            names = [tool.name for tool in listing.tools]
            result = await client.call_tool("demo.echo", {"text": "over mcp"})
            refused = await client.call_tool("demo.write", {"path": "a", "status": "done"})
            return names, result, refused

    names, result, refused = anyio.run(main)
    assert "demo.echo" in names and "demo.write" in names
    assert result.is_error is False and result.content[0].text == "over mcp"
    assert result.meta["entropic-mcp/kind"] == "ok"
    assert result.meta["entropic-mcp/directives"] == [
        {"type": "context_anchor", "key": "echo:over mcp", "content": "over mcp"}
    ]
    assert refused.is_error is True and refused.meta["entropic-mcp/kind"] == "rejected_schema"
