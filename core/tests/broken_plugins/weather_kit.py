"""The weather plugin the broken variants are made from: a server with one forecast tool.

Written as a third-party author would from docs/plugin-authors.md. Each ``weather_<fault>``
package next to this module breaks it one way; ``weather_ok`` is the working original.
"""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, ConfigError, MCPServerBase, ToolBase, ToolResult, load_tool_definition


class Forecast(ToolBase):
    """Tomorrow's weather for a city (made up, deterministically)."""

    required_access_level = AccessLevel.READ

    def __init__(self, package: str = "weather_ok") -> None:
        super().__init__(load_tool_definition(package, "forecast"))

    def execute(self, args: dict[str, Any], ctx: Any) -> str | ToolResult:
        days = args.get("days", 1)
        return ToolResult.json(
            {"city": args["city"], "days": days, "sky": "sunny" if len(args["city"]) % 2 else "rain"}
        )


class WeatherServer(MCPServerBase):
    config_keys = frozenset({"units"})

    def __init__(self, name: str, *, root: Any, tool: ToolBase | None = None) -> None:
        super().__init__(name, root=root)
        self.units = "metric"
        self.register_tool(tool if tool is not None else Forecast())

    def configure(self, config: Any) -> None:
        super().configure(config)
        units = config.get("units", "metric")
        if units not in ("metric", "imperial"):
            raise ConfigError(f"[servers.{self.name}] units: expected 'metric' or 'imperial', got {units!r}")
        self.units = units
