"""A tool that raises for every schema-valid call."""

from entropic_mcp import hookimpl
from weather_kit import Forecast, WeatherServer


class Broken(Forecast):
    def execute(self, args, ctx):
        raise ConnectionError("weather service unreachable")


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_raising_tool", root=config.root, tool=Broken())
