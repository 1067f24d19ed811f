"""The servers hook raises."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer  # noqa: F401  (as the working plugin has it)


@hookimpl
def entropic_mcp_servers(config):
    raise RuntimeError("no API key in WEATHER_API_KEY")
