"""configure raises ValueError instead of ConfigError."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


class Picky(WeatherServer):
    def configure(self, config):
        raise ValueError("units must be set")


@hookimpl
def entropic_mcp_servers(config):
    return Picky("w_raising_configure", root=config.root)
