"""Tools that answer NaN and Infinity, and one that echoes its number argument."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, ToolBase, ToolResult, hookimpl

from . import server_of, tool_definition


class NotANumber(ToolBase):
    definition = tool_definition("ratio")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> ToolResult:
        return ToolResult.json({"ratio": float("nan"), "limit": float("inf")})


class Number(ToolBase):
    definition = tool_definition("number", {"value": {"type": "number"}})
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        return repr(args.get("value"))


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    return server_of("nan", NotANumber(), Number(), root=config.root)
