"""entropic-mcp-filesystem: the ``filesystem`` server, confined to the project root."""

from __future__ import annotations

from typing import TYPE_CHECKING

from entropic_mcp import hookimpl

from ._server import FilesystemServer

if TYPE_CHECKING:
    from entropic_mcp import PluginConfig

__all__ = ["FilesystemServer", "entropic_mcp_servers"]


@hookimpl
def entropic_mcp_servers(config: PluginConfig) -> FilesystemServer:
    """The filesystem server, rooted at the project root (configured by the manager)."""
    return FilesystemServer(root=config.root)
