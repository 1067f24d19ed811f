"""What the pipeline hands a tool on its call's context."""

from __future__ import annotations

import anyio
from entropic_mcp import AccessLevel, CallContext, MCPServerBase, ToolBase, ToolDefinition
from entropic_mcp.testing import make_manager

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Seen(ToolBase):
    required_access_level = AccessLevel.READ

    def __init__(self, definition: ToolDefinition) -> None:
        super().__init__(definition)
        self.validated: list[bool] = []

    async def execute(self, args, ctx):
        self.validated.append(ctx.validated)
        return str(args["n"])


class Demo(MCPServerBase):
    name = "demo"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.tool = Seen(ToolDefinition(name="seen", description="", input_schema=SCHEMA))
        self.register_tool(self.tool)


def test_a_call_through_the_pipeline_reaches_the_tool_validated(tmp_path):
    server = Demo(root=tmp_path)
    manager = make_manager(tmp_path, servers=[server], config={"permissions": {"default": "allow"}})
    outcome = manager.call_sync("demo.seen", {"n": 3})
    assert outcome.kind == "ok" and outcome.response.result == "3"
    assert server.tool.validated == [True]


def test_execute_checks_arguments_no_pipeline_validated_even_with_a_host(tmp_path):
    server = Demo(root=tmp_path)
    manager = make_manager(tmp_path, servers=[server], config={"permissions": {"default": "allow"}})
    ctx = CallContext(manager=manager)
    response = anyio.run(server.execute, "seen", {"n": "three"}, ctx)
    assert response.is_error and "invalid_args" in response.result
    assert server.tool.validated == []
