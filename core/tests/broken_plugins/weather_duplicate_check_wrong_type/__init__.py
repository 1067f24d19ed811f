"""The duplicate-check hook returns a string."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_duplicate_check_wrong_type", root=config.root)


@hookimpl
def entropic_mcp_skip_duplicate_check(server, tool):
    return "yes" if server.name == "w_duplicate_check_wrong_type" else None
