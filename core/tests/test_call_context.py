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


class Preparing(MCPServerBase):
    """Prepares, in its permission parts, the square of ``n``; its tool reads it back."""

    name = "prep"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.prepared: list[object] = []
        self.worked_out = 0
        server = self

        class Square(ToolBase):
            required_access_level = AccessLevel.READ

            async def execute(self, args, ctx):
                server.prepared.append(ctx.prepared_for(args))
                return str(args["n"])

        self.register_tool(Square(ToolDefinition(name="square", description="", input_schema=SCHEMA)))

    def permission_parts(self, tool_name, args):
        from entropic_mcp.toolkit.paths import PermissionPart, PreparedParts

        self.worked_out += 1
        full = f"{self.name}.{tool_name}:{args['n']}"
        return PreparedParts([PermissionPart(names=(full,), store=full)], prepared=args["n"] ** 2)


def test_what_the_permission_parts_prepared_reaches_the_tool_for_its_own_arguments(tmp_path):
    server = Preparing(root=tmp_path)
    manager = make_manager(tmp_path, servers=[server], config={"permissions": {"default": "allow"}})
    ctx = CallContext()
    for n in (3, 4):
        assert manager.call_sync("prep.square", {"n": n}, ctx).kind == "ok"
    assert (server.prepared, server.worked_out) == ([9, 16], 2)
    assert ctx.prepared == 16
    # Prepared for another argument dict (an equal one included), or no pipeline: nothing.
    assert ctx.prepared_for({"n": 4}) is None
    anyio.run(server.execute, "square", {"n": 5}, CallContext())
    assert server.prepared[-1] is None
    # A pattern that comes from the parts (manager.permission_pattern) hands nothing to any context.
    assert manager.permission_pattern("prep.square", {"n": 6}) == "prep.square:6" and ctx.prepared == 16
