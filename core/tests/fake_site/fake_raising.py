"""A plugin whose registration hook raises."""

from entropic_mcp import hookimpl


@hookimpl
def entropic_mcp_servers(config):
    raise RuntimeError("cannot start the raising server")
