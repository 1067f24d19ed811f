"""The plugin-author kit: conformance checks, fixtures and helpers for testing plugins.

Installed as a pytest plugin, so ``entropic_plugins``, ``entropic_manager_factory`` and
``entropic_call`` are available in any test once entropic-mcp is installed; ``served_client``
connects the official MCP client to a manager in memory.

The checks generate arguments with hypothesis, an optional dependency: install the kit with
``pip install entropic-mcp[testing]``.
"""

from ._checks import CALL_LIMIT_SECONDS, JUNK, ConformanceError, check_server
from ._fixtures import call, fresh_plugins, make_manager
from ._mcp import served_client
from ._memory_storage import MemoryStorage
from ._plugin_checks import NoSuchPlugin, check_plugin
from ._strategies import schema_strategy, valid_arguments

__all__ = [
    "CALL_LIMIT_SECONDS",
    "JUNK",
    "ConformanceError",
    "MemoryStorage",
    "NoSuchPlugin",
    "StorageContract",
    "call",
    "check_plugin",
    "check_server",
    "fresh_plugins",
    "make_manager",
    "schema_strategy",
    "served_client",
    "valid_arguments",
]


def __getattr__(name: str) -> object:
    # The contract suite is pytest test classes; importing it needs pytest, the rest of the kit not.
    if name == "StorageContract":
        from ._storage_contract import StorageContract

        return StorageContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
