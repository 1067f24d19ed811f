"""Implements entropic_mcp_server (singular): pluggy would never call it."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_server(config):
    return WeatherServer("w_misspelled_hook", root=config.root)
