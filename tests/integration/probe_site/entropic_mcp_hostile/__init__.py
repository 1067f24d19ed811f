"""Hostile and broken plugins written from the docs (issue 21), one module per class.

No ``*.dist-info`` is committed for them: a test installs the ones it needs by writing entry
points into a site directory of its own (``test_holes_plugins.site_with``), so the other
integration tests never load them.
"""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, MCPServerBase, ToolBase, ToolDefinition


def tool_definition(name: str, properties: dict[str, Any] | None = None) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"A hostile probe tool ({name}).",
        input_schema={"type": "object", "properties": properties or {}},
    )


class Fine(ToolBase):
    """The one tool of a hostile server that behaves: it proves the server itself still serves."""

    definition = tool_definition("fine")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        return "fine"


def server_of(name: str, *tools: ToolBase, root: Any = None) -> MCPServerBase:
    server = MCPServerBase(name, root=root)
    for tool in (Fine(), *tools):
        server.register_tool(tool)
    return server
