"""A one-tool entropic-mcp plugin to copy (TEMPLATE: describe your plugin)."""

from __future__ import annotations

from typing import Any

from entropic_mcp import (
    AccessLevel,
    CallContext,
    MCPServerBase,
    PluginConfig,
    ToolBase,
    ToolResult,
    hookimpl,
    load_tool_definition,
)
from entropic_mcp.toolkit import text

__all__ = ["TemplateServer", "WordCount", "entropic_mcp_servers"]


class WordCount(ToolBase):
    definition = load_tool_definition(__name__, "word_count")
    required_access_level = AccessLevel.READ
    open_world = False

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        # The pipeline checks arguments against the schema, but a server can be called directly:
        # the toolkit's readers refuse what the tool cannot use with a message saying what to send.
        value = text(args, "text", required=True, allow_empty=True)
        return ToolResult.json(
            {"words": len(value.split()), "lines": len(value.splitlines()), "characters": len(value)}
        )


class TemplateServer(MCPServerBase):  # TEMPLATE: rename
    name = "template"  # TEMPLATE: the server name users type in config, also the tool prefix

    def __init__(self, *, root: Any = None) -> None:
        super().__init__(root=root)
        self.register_tool(WordCount())


@hookimpl
def entropic_mcp_servers(config: PluginConfig) -> MCPServerBase:
    return TemplateServer(root=config.root)
