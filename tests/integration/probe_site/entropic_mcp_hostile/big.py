"""A tool that answers 100 MB."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, ToolBase, hookimpl

from . import server_of, tool_definition


class Flood(ToolBase):
    definition = tool_definition("flood", {"megabytes": {"type": "integer"}})
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        return "x" * (int(args.get("megabytes", 100)) * 1024 * 1024)


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    return server_of("big", Flood(), root=config.root)
