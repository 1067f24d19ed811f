"""entropic-mcp-bash: the ``bash`` server — shell commands with parsed permission rules."""

from __future__ import annotations

from entropic_mcp import PluginConfig, hookimpl

from ._server import BashServer

__all__ = ["BashServer", "entropic_mcp_servers"]


@hookimpl
def entropic_mcp_servers(config: PluginConfig) -> BashServer:
    """The bash server, rooted at the project root (configured by the manager afterwards)."""
    return BashServer(root=config.root)
