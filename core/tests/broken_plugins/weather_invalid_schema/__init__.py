"""A tool definition whose schema is not a valid JSON Schema (minLength is text)."""

from entropic_mcp import hookimpl
from weather_kit import Forecast, WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_invalid_schema", root=config.root, tool=Forecast("weather_invalid_schema"))
