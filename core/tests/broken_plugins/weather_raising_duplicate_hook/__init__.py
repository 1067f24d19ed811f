"""The duplicate-check hook raises."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_raising_duplicate_hook", root=config.root)


@hookimpl
def entropic_mcp_skip_duplicate_check(server, tool):
    raise ValueError(f"no duplicate policy for {tool}")
