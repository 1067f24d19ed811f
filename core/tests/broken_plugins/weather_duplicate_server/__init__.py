"""Registers two servers with one name."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return [
        WeatherServer("w_duplicate_server", root=config.root),
        WeatherServer("w_duplicate_server", root=config.root),
    ]
