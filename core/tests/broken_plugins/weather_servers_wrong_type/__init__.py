"""The servers hook returns the server's name instead of a server."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer  # noqa: F401  (as the working plugin has it)


@hookimpl
def entropic_mcp_servers(config):
    return "w_servers_wrong_type"
