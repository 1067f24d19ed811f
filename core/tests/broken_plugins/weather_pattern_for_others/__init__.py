"""The permission-pattern hook answers for every server, not only its own."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_pattern_for_others", root=config.root)


@hookimpl
def entropic_mcp_permission_pattern(server, tool, args):
    return f"{server.name}.{tool}"  # no check of server.name: answers for everyone
