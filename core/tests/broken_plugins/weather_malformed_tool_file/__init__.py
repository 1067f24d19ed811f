"""A tool definition file that is not valid JSON."""

from entropic_mcp import hookimpl
from weather_kit import Forecast, WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_malformed_tool_file", root=config.root, tool=Forecast("weather_malformed_tool_file"))
