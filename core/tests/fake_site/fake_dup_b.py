"""One of two plugins that register the same server name."""

from entropic_mcp import MCPServerBase, hookimpl


class DupServer(MCPServerBase):
    name = "dup"


@hookimpl
def entropic_mcp_servers(config):
    return DupServer(root=config.root)
