"""A plugin whose servers hook raises ConfigError: a required setting is missing."""

from __future__ import annotations

from typing import Any

from entropic_mcp import ConfigError, hookimpl


@hookimpl
def entropic_mcp_servers(config: Any) -> Any:
    raise ConfigError("[servers.needy] api_key is required: set it to your service's key")
