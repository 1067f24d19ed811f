"""A tool that returns a set instead of a str or ToolResult."""

from entropic_mcp import hookimpl
from weather_kit import Forecast, WeatherServer


class Garbage(Forecast):
    def execute(self, args, ctx):
        return {"sunny", args["city"]}


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_garbage_tool", root=config.root, tool=Garbage())
