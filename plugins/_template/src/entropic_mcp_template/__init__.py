"""A one-tool entropic-mcp plugin to copy (TEMPLATE: describe your plugin)."""

from __future__ import annotations

from typing import Any

from entropic_mcp import (
    AccessLevel,
    MCPServerBase,
    PluginConfig,
    ToolBase,
    ToolError,
    ToolResult,
    hookimpl,
    load_tool_definition,
)

__all__ = ["TemplateServer", "WordCount", "entropic_mcp_servers"]


class WordCount(ToolBase):
    definition = load_tool_definition(__name__, "word_count")
    required_access_level = AccessLevel.READ
    open_world = False

    def execute(self, args: dict[str, Any], ctx: Any) -> ToolResult:
        text = args.get("text")
        if not isinstance(text, str):
            raise ToolError("invalid_args", '\'text\' must be a string; call word_count with {"text": "..."}')
        return ToolResult.json({"words": len(text.split()), "lines": len(text.splitlines()), "characters": len(text)})


class TemplateServer(MCPServerBase):  # TEMPLATE: rename
    name = "template"  # TEMPLATE: the server name users type in config, also the tool prefix

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.register_tool(WordCount())


@hookimpl
def entropic_mcp_servers(config: PluginConfig) -> MCPServerBase:
    return TemplateServer(root=config.root)
