"""A tool's own result budget (``ToolBase.result_budget_bytes``) raises the pipeline's cap for it alone."""

from __future__ import annotations

import anyio
from entropic_mcp import AccessLevel, CallContext, MCPServerBase, ToolBase, ToolDefinition, toolkit
from entropic_mcp.testing import call, make_manager


def definition(name: str) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"the {name} tool",
        input_schema={"type": "object", "properties": {"size": {"type": "integer"}}, "additionalProperties": False},
    )


class Plain(ToolBase):
    definition = definition("plain")
    required_access_level = AccessLevel.READ

    def execute(self, args, ctx):
        self.seen = toolkit.result_limit(ctx)
        return "x" * args["size"]


class Reader(Plain):
    definition = definition("reader")
    result_budget_bytes = 64 * 1024


class Budgets(MCPServerBase):
    name = "budgets"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.plain, self.reader = Plain(), Reader()
        self.register_tool(self.plain)
        self.register_tool(self.reader)


def manager_for(tmp_path, cap):
    server = Budgets(root=tmp_path)
    config = {"permissions": {"default": "allow"}, "pipeline": {"max_result_bytes": cap}}
    return make_manager(tmp_path, config=config, servers=[server]), server


def test_a_tool_with_a_budget_gets_results_up_to_it_and_others_keep_the_configured_cap(tmp_path):
    manager, server = manager_for(tmp_path, 16384)
    assert call(manager, "budgets.reader", {"size": 60000}).response.result == "x" * 60000
    assert server.reader.seen == 64 * 1024  # what the tool is told it may return
    cut = call(manager, "budgets.reader", {"size": 70000}).response.result
    assert cut.startswith("x" * 65536 + "\n[... truncated, ") and cut.endswith(f"{70000 - 65536} more bytes]")
    plain = call(manager, "budgets.plain", {"size": 60000}).response.result
    assert plain.startswith("x" * 16384 + "\n[... truncated, ") and server.plain.seen == 16384
    # The budget belongs to the call: the next call of another tool on the same context is not raised.
    ctx = CallContext(conversation_id="shared")
    anyio.run(manager.call, "budgets.reader", {"size": 10}, ctx)
    anyio.run(manager.call, "budgets.plain", {"size": 60000}, ctx)
    assert server.plain.seen == 16384


def test_a_budget_only_raises_the_cap(tmp_path):
    manager, server = manager_for(tmp_path, 100_000)
    assert len(call(manager, "budgets.reader", {"size": 90000}).response.result) == 90000
    assert server.reader.seen == 100_000
    manager, server = manager_for(tmp_path, 0)  # no cap stays no cap
    assert len(call(manager, "budgets.reader", {"size": 90000}).response.result) == 90000
    assert server.reader.seen == 0
