"""An async tool that blocks the event loop with time.sleep."""

from __future__ import annotations

import time
from typing import Any

from entropic_mcp import AccessLevel, ToolBase, hookimpl

from . import server_of, tool_definition


class Block(ToolBase):
    definition = tool_definition("block", {"seconds": {"type": "number"}})
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: Any) -> str:
        time.sleep(float(args.get("seconds", 1.5)))
        return "blocked"


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    return server_of("blocker", Block(), root=config.root)
