"""A tool that overrides ``name`` with a name no client can call safely."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, ToolBase, hookimpl

from . import server_of, tool_definition


class Evil(ToolBase):
    definition = tool_definition("evil")
    required_access_level = AccessLevel.READ

    @property
    def name(self) -> str:
        return "evil/../name with space"

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        return "evil"


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    return server_of("badname", Evil(), root=config.root)
