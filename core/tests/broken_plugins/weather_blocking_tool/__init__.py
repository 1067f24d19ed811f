"""A tool that never returns and ignores ctx.cancelled."""

import os
import threading
from pathlib import Path

from entropic_mcp import hookimpl
from weather_kit import Forecast, WeatherServer


class Stuck(Forecast):
    def execute(self, args, ctx):
        # Tests learn that a call is inside the tool (not still on its way) from this file.
        marker = os.environ.get("WEATHER_STUCK_MARKER")
        if marker:
            Path(marker).write_text("entered")
        threading.Event().wait()  # waits for an event nobody sets


@hookimpl
def entropic_mcp_servers(config):
    return WeatherServer("w_blocking_tool", root=config.root, tool=Stuck())
