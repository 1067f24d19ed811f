"""The permission-pattern hook returns a number."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_pattern_wrong_type", root=config.root)


@hookimpl
def entropic_mcp_permission_pattern(server, tool, args):
    if server.name == "w_pattern_wrong_type":
        return 42
    return None
