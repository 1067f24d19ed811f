"""The storage interface: one protocol, backends offered through ``entropic_mcp_storage_backends``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from .._errors import ConfigError, StorageError
from ._protocols import AsyncStateStore as AsyncStateStore
from ._protocols import StateStore as StateStore
from ._protocols import StorageBackend as StorageBackend
from ._records import DEFAULT_SCOPE, ToolCallRecord
from ._rules import MAX_STATE_BYTES as MAX_STATE_BYTES
from ._rules import validate_messages as validate_messages
from ._rules import validate_prune as validate_prune
from ._rules import validate_state as validate_state

if TYPE_CHECKING:
    from .._config import Config


class PluginHooks(Protocol):
    """What finding the backends needs of the plugin loader (``_plugins.Plugins``), which loads
    the built-ins that name this package: typed here so the package never imports the loader."""

    def implementations(self, hook_name: str) -> list[tuple[str, Any]]: ...

    def fail(self, name: str, error: str, *, config_error: bool = False, **fields: Any) -> None: ...


#: State namespaces whose documents a backend may commit without waiting for its disk: heuristic
#: state whose last changes, lost when the store's server crashes, only delay a notice (the
#: pipeline's duplicate and loop guards). Every other namespace is durable as ``save_state`` says:
#: todo lists, paused approvals, "always" answers, tasks, runs, the read tracker.
HEURISTIC_NAMESPACES = frozenset({"pipeline.guards"})


StorageFactory = Callable[["Config"], StorageBackend]


@attrs.frozen(kw_only=True)
class StorageBackendSpec:
    """A named backend; ``factory(config)`` opens it (``config.storage`` holds its settings)."""

    name: str = attrs.field(validator=attrs.validators.instance_of(str))
    factory: StorageFactory


def backend_specs(plugins: PluginHooks) -> dict[str, tuple[str, StorageBackendSpec]]:
    """Every offered backend by name, with the plugin offering it."""
    specs: dict[str, tuple[str, StorageBackendSpec]] = {}
    for plugin_name, function in plugins.implementations("entropic_mcp_storage_backends"):
        try:
            value = function()
        except Exception as exc:
            plugins.fail(plugin_name, f"entropic_mcp_storage_backends raised {type(exc).__name__}: {exc}")
            continue
        values = value if isinstance(value, (list, tuple)) else [value] if value is not None else []
        for spec in values:
            if isinstance(spec, StorageBackendSpec):
                specs.setdefault(spec.name, (plugin_name, spec))
    return specs


def open_storage(config: Config, plugins: PluginHooks) -> StorageBackend | None:
    """Open the backend ``[storage] backend`` names, behind ``CheckedStorage``; ``"none"`` means
    no storage."""
    name = config.storage.backend
    if name == "none":
        return None
    specs = backend_specs(plugins)
    if name not in specs:
        hint = " (pip install entropic-mcp-postgres)" if name == "postgres" else ""
        raise ConfigError(
            f'[storage] backend {name!r} is not available{hint}; available: {", ".join(sorted(specs)) or "none"}, or "none"'
        )
    backend = specs[name][1].factory(config)
    if not isinstance(backend, StorageBackend):
        raise StorageError(
            f"storage backend {name!r} returned {type(backend).__name__}, which lacks the StorageBackend methods"
        )
    from ._checked import checked

    return checked(backend)


__all__ = [
    "DEFAULT_SCOPE",
    "MAX_STATE_BYTES",
    "AsyncStateStore",
    "StateStore",
    "StorageBackend",
    "StorageBackendSpec",
    "StorageError",
    "ToolCallRecord",
    "open_storage",
    "validate_messages",
    "validate_prune",
    "validate_state",
]
