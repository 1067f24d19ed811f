"""The storage interface: one protocol, backends offered through ``entropic_mcp_storage_backends``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from .._errors import ConfigError, StorageError

if TYPE_CHECKING:
    from .._config import Config
    from .._pipeline import CallOutcome
    from .._plugins import Plugins


@runtime_checkable
class StorageBackend(Protocol):
    """Where conversations, delegations and the audit trail live.

    Every method does what it says or raises ``StorageError`` with the reason.
    IDs are UUID strings; times are UTC ISO 8601 strings.
    """

    def create_conversation(self, title: str, metadata: Mapping[str, Any] | None = None) -> str: ...
    def save_messages(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> None: ...
    def load_conversation(self, conversation_id: str) -> dict[str, Any]: ...
    def list_conversations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]: ...
    def delete_conversation(self, conversation_id: str) -> None: ...
    def save_snapshot(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> str: ...
    def create_delegation(
        self,
        parent_id: str,
        delegating_tier: str,
        target_tier: str,
        task: str,
        max_turns: int = -1,
        context: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[str, str]: ...
    def complete_delegation(self, delegation_id: str, status: str, summary: str) -> None: ...
    def load_delegation_with_messages(self, delegation_id: str) -> dict[str, Any]: ...
    def latest_delegation_for_target(self, target_tier: str) -> str | None: ...
    def search_delegations(self, query: str, max_results: int = 3) -> list[dict[str, Any]]: ...
    def list_delegations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]: ...
    def record_tool_call(self, outcome: CallOutcome) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...


StorageFactory = Callable[["Config"], StorageBackend]


@attrs.frozen(kw_only=True)
class StorageBackendSpec:
    """A named backend; ``factory(config)`` opens it (``config.storage`` holds its settings)."""

    name: str = attrs.field(validator=attrs.validators.instance_of(str))
    factory: StorageFactory


def backend_specs(plugins: Plugins) -> dict[str, tuple[str, StorageBackendSpec]]:
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


def open_storage(config: Config, plugins: Plugins) -> StorageBackend | None:
    """Open the backend ``[storage] backend`` names; ``"none"`` means no storage."""
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
    return backend


__all__ = ["StorageBackend", "StorageBackendSpec", "StorageError", "open_storage"]
