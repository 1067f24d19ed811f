"""The working weather plugin: its hooks answer only for its own server."""

from entropic_mcp import hookimpl
from weather_kit import WeatherServer


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("weather", root=config.root)


@hookimpl
def entropic_mcp_permission_pattern(server, tool, args):
    if server.name != "weather":
        return None
    return f"weather.{tool}:{args.get('city', '')}"


@hookimpl
def entropic_mcp_skip_duplicate_check(server, tool):
    return True if server.name == "weather" else None
