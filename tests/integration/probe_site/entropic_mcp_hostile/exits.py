"""Tools that raise SystemExit (argparse on a bad value) and KeyboardInterrupt."""

from __future__ import annotations

import argparse
from typing import Any

from entropic_mcp import AccessLevel, ToolBase, hookimpl

from . import server_of, tool_definition

PARSER = argparse.ArgumentParser(prog="count")
PARSER.add_argument("--count", type=int)


class Parse(ToolBase):
    definition = tool_definition("parse", {"value": {"type": "string"}})
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        return str(PARSER.parse_args(["--count", args.get("value", "x")]).count)


class Interrupt(ToolBase):
    definition = tool_definition("interrupt")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: Any) -> str:
        raise KeyboardInterrupt


class Quit(ToolBase):
    definition = tool_definition("quit")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: Any) -> str:
        raise SystemExit(0)


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    return server_of("exits", Parse(), Interrupt(), Quit(), root=config.root)
