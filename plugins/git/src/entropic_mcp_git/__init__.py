"""entropic-mcp-git: the `git` server — status, diff, log, show, branch, add, commit, create_branch,
checkout and reset over the repository containing the project root, through the real git program."""

from __future__ import annotations

from entropic_mcp import MCPServerBase, PluginConfig, hookimpl

from ._server import GitServer

__all__ = ["GitServer", "entropic_mcp_servers"]


@hookimpl
def entropic_mcp_servers(config: PluginConfig) -> MCPServerBase:
    """The git server, rooted at the project root (configured by the manager from `[servers.git]`)."""
    return GitServer(root=config.root)
