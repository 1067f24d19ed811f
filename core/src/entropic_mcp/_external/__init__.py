"""External MCP servers as plugins: ``[external.<name>]`` servers reached through a client pool.

Imported only when a config names external servers (the SDK client is heavy).
"""

from __future__ import annotations

from ._client import ClientBroken, ToolListIncompleteError
from ._pool import (
    Binding,
    BindingChangedError,
    BusyError,
    DisconnectedError,
    DiscoveryFailedError,
    Pool,
    PoolError,
    UseRecord,
)
from ._server import (
    DiscoveryFailure,
    ExternalServer,
    ExternalTool,
    ToolDiscovery,
    close_external_servers,
    discover_tools,
    start_external_servers,
    to_response,
)

__all__ = [
    "Binding",
    "BindingChangedError",
    "BusyError",
    "ClientBroken",
    "DisconnectedError",
    "DiscoveryFailedError",
    "DiscoveryFailure",
    "ExternalServer",
    "ExternalTool",
    "Pool",
    "PoolError",
    "ToolDiscovery",
    "ToolListIncompleteError",
    "UseRecord",
    "close_external_servers",
    "discover_tools",
    "start_external_servers",
    "to_response",
]
