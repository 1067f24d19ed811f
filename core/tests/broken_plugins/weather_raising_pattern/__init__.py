"""The permission-pattern hook raises."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_raising_pattern", root=config.root)


@hookimpl
def entropic_mcp_permission_pattern(server, tool, args):
    return "w_raising_pattern.forecast:" + args["city"]  # KeyError, and for every server
