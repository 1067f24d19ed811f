"""A plugin that prints to stdout at import and in a tool."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, ToolBase, hookimpl

from . import server_of, tool_definition

print("printer plugin loaded")


class Shout(ToolBase):
    definition = tool_definition("shout")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        print("SHOUTING FROM A TOOL")
        return "shouted"


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    return server_of("printer", Shout(), root=config.root)
