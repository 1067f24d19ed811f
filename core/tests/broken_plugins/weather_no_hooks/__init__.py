"""Forgot @hookimpl: the module implements no hook."""

from weather_kit import WeatherServer


def entropic_mcp_servers(config):
    return WeatherServer("w_no_hooks", root=config.root)
