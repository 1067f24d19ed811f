"""The plugin-author kit: conformance checks, fixtures and helpers for testing plugins.

Installed as a pytest plugin, so ``entropic_plugins``, ``entropic_manager_factory`` and
``entropic_call`` are available in any test once entropic-mcp is installed; ``served_client``
connects the official MCP client to a manager in memory.
"""

from ._checks import JUNK, ConformanceError, check_plugin, check_server
from ._fixtures import call, fresh_plugins, make_manager
from ._mcp import served_client
from ._memory_storage import MemoryStorage

__all__ = [
    "JUNK",
    "ConformanceError",
    "MemoryStorage",
    "StorageContract",
    "call",
    "check_plugin",
    "check_server",
    "fresh_plugins",
    "make_manager",
    "served_client",
]


def __getattr__(name: str) -> object:
    # The contract suite is pytest test classes; importing it needs pytest, the rest of the kit not.
    if name == "StorageContract":
        from ._storage_contract import StorageContract

        return StorageContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
