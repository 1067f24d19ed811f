"""The servers hook returns the server class, not an instance."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


class Weather(WeatherServer):
    name = "w_servers_class"


@hookimpl
def entropic_mcp_servers(config):
    return [Weather]
