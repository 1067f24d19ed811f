"""A tool that starts a child process of its own and leaves it running."""

from __future__ import annotations

import subprocess
from typing import Any

from entropic_mcp import AccessLevel, ToolBase, hookimpl

from . import server_of, tool_definition


class Spawn(ToolBase):
    definition = tool_definition("spawn")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        child = subprocess.Popen(
            ["sleep", "300"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return str(child.pid)


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    return server_of("spawner", Spawn(), root=config.root)
