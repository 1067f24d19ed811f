"""Loads a tool definition file that is not in the package."""

from entropic_mcp import hookimpl
from weather_kit import Forecast, WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_missing_tool_file", root=config.root, tool=Forecast("weather_missing_tool_file"))
