"""A plugin serving a server named like another plugin's ("probe"); configure rejects that table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entropic_mcp import ConfigError, MCPServerBase, hookimpl

from . import Fine


class Clash(MCPServerBase):
    name = "probe"

    def __init__(self, root: Any) -> None:
        super().__init__(root=root)
        self.register_tool(Fine())

    def configure(self, config: Mapping[str, Any]) -> None:
        raise ConfigError("[servers.probe] region is required")


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    return Clash(config.root)
