"""A plugin that implements a hook no spec declares (a typo)."""

from entropic_mcp import hookimpl


@hookimpl
def entropic_mcp_server(config):
    return None
