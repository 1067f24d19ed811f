"""The entropic server: delegation, pipelines, follow-up recall, todo, completion, engine state."""

from __future__ import annotations

from typing import Any

from entropic_mcp import PluginConfig, hookimpl

from ._server import EntropicServer
from ._state import EngineState

__all__ = ["EngineState", "EntropicServer", "entropic_mcp_add_hookspecs", "entropic_mcp_servers"]


@hookimpl
def entropic_mcp_add_hookspecs(plugin_manager: Any) -> None:
    from . import hookspecs

    plugin_manager.add_hookspecs(hookspecs)


@hookimpl
def entropic_mcp_servers(config: PluginConfig) -> EntropicServer:
    return EntropicServer(root=config.root)
