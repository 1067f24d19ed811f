"""Imports a dependency that is not installed."""

import weather_api_client  # noqa: F401  (not installed)
from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_import_error", root=config.root)
