"""A tool that never returns and ignores ctx.cancelled."""

import threading

from entropic_mcp import hookimpl
from weather_kit import Forecast, WeatherServer


class Stuck(Forecast):
    def execute(self, args, ctx):
        threading.Event().wait()  # waits for an event nobody sets


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_blocking_tool", root=config.root, tool=Stuck())
