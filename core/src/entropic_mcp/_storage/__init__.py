"""The storage interface: one protocol, backends offered through ``entropic_mcp_storage_backends``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from .._errors import ConfigError, StorageError
from ._records import DEFAULT_SCOPE, ToolCallRecord

if TYPE_CHECKING:
    from .._config import Config
    from .._plugins import Plugins


@runtime_checkable
class StorageBackend(Protocol):
    """Where conversations, delegations and the audit trail live.

    Every method does what it says or raises ``StorageError`` with the reason.
    IDs are UUID strings; times are UTC ISO 8601 strings.

    Every conversation belongs to a *scope* (a tenant: a project, a user, a team — whatever the
    host separates); a delegation and its child conversation take the scope of the conversation
    they were made from. ``search_delegations`` and ``latest_delegation_for_target`` given a scope
    see only that scope's delegations, so one tenant's follow-up never sees another's.
    """

    def create_conversation(
        self, title: str, metadata: Mapping[str, Any] | None = None, scope: str = DEFAULT_SCOPE
    ) -> str:
        """Create a root conversation in ``scope`` (a non-empty string); returns its id."""
        ...

    def scope_of(self, conversation_id: str) -> str | None:
        """The scope of a stored conversation; None when no conversation has that id."""
        ...

    def save_messages(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        """Append messages (objects with a ``role``), durably; unknown conversation → StorageError."""
        ...

    def load_conversation(self, conversation_id: str) -> dict[str, Any]:
        """``{"conversation": {conversation_id, title, metadata, scope, created_at, updated_at,
        parent_delegation_id, message_count}, "messages": [...]}``, messages in order as saved."""
        ...

    def list_conversations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """Conversation records (as in ``load_conversation``), newest first."""
        ...

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete with its messages, snapshots and delegations (made from it or running in it),
        and recursively the child conversations of those delegations."""
        ...

    def save_snapshot(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> str:
        """Store the full history before a compaction; returns the snapshot id."""
        ...

    def create_delegation(
        self,
        parent_id: str,
        delegating_tier: str,
        target_tier: str,
        task: str,
        max_turns: int = -1,
        context: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[str, str]:
        """Create a running delegation and its child conversation; returns
        ``(delegation_id, child_conversation_id)``. Empty or unknown parent → StorageError."""
        ...

    def complete_delegation(self, delegation_id: str, status: str, summary: str) -> None:
        """Set status ``completed`` | ``failed`` and the summary; unknown id or a second
        completion → StorageError."""
        ...

    def load_delegation_with_messages(self, delegation_id: str) -> dict[str, Any]:
        """The delegation record (delegation_id, parent_id, child_conversation_id, delegating_tier,
        target_tier, task, max_turns, context, scope, status, summary, created_at, completed_at) plus
        ``messages``: the child conversation's messages in order."""
        ...

    def latest_delegation_for_target(self, target_tier: str, scope: str | None = None) -> str | None:
        """The most recently completed (status ``completed``) delegation to the tier in ``scope``
        (None: in any scope — for administration, never for a tool answering one tenant), or None."""
        ...

    def search_delegations(self, query: str, max_results: int = 3, scope: str | None = None) -> list[dict[str, Any]]:
        """Completed delegations in ``scope`` (None: every scope) where every query word occurs
        (case-insensitive, as a literal substring) in the summary or the task; best first (most
        words in the summary, then newest). Each result: ``{delegation_id, target_tier, task,
        summary, completed_at}``."""
        ...

    def list_delegations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """Delegation records (as in ``load_delegation_with_messages``, without messages), newest first."""
        ...

    def record_tool_call(self, record: ToolCallRecord) -> None:
        """Add ``record`` (``record.to_dict()``) to the audit trail; called for every call, so it must
        be cheap. Anything but a ``ToolCallRecord`` → StorageError."""
        ...

    def stats(self) -> dict[str, int]:
        """Counts: conversations, messages, snapshots, delegations (running/completed/failed), tool_calls."""
        ...

    def close(self) -> None:
        """Flush and release; idempotent."""
        ...


@runtime_checkable
class StateStore(Protocol):
    """Small JSON documents kept under ``(namespace, key)``: per-conversation state of a plugin
    (``entropic.todo``'s list), shared by every worker on the store and kept across restarts.

    Optional beside ``StorageBackend`` (both first-party backends have it; a plugin finding a
    store without it keeps its state in memory). Namespaces are the plugin's (``"entropic.todo"``);
    keys are the plugin's too — usually a conversation key, which need not name a stored
    conversation. Changes are optimistic: every document carries a version; ``save_state`` states
    the version it started from and fails with ``StateConflict`` when another save came first.
    """

    def load_state(self, namespace: str, key: str) -> tuple[Any, int]:
        """``(value, version)`` stored under ``(namespace, key)`` (a copy); ``(None, 0)`` when none is."""
        ...

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        """Store the JSON ``value`` if the stored version is still ``version`` (0: nothing stored
        yet), durably (a namespace of ``HEURISTIC_NAMESPACES`` may skip the wait for the disk);
        returns the new version. ``value`` None deletes the document (returns 0;
        deleting what is not stored does nothing and returns 0).
        Another version stored → ``StateConflict``, nothing changed. Bad namespace, key, value
        (not JSON, over ``MAX_STATE_BYTES`` as JSON) or version → ``StorageError``."""
        ...

    def prune_states(self, namespace: str, older_than: float) -> int:
        """Delete the namespace's documents not saved for ``older_than`` seconds (>= 0); returns
        how many. For state whose conversations never say they ended (a client's own keys)."""
        ...


#: The largest state document, as compact JSON: state is a plugin's working memory, not a file store.
MAX_STATE_BYTES = 1 << 20

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


def validate_messages(messages: Any, what: str) -> list[Any]:
    """The rule every backend applies to ``save_messages``/``save_snapshot``: a list of objects,
    each with a non-empty ``role`` string, storable as JSON. Returns a JSON-clean copy; anything
    else is a StorageError naming ``what`` and the message at fault. For backend authors."""
    from ._state import _messages

    return _messages(messages, what)


def validate_state(namespace: Any, key: Any, value: Any = None, version: Any = 0) -> str | None:
    """The rule every backend applies to ``load_state``/``save_state``: namespace and key non-empty
    strings (at most 1,024 characters, no NUL), ``version`` an integer >= 0, ``value`` JSON that
    comes back unchanged (no NaN, no non-string keys, no tuples or sets) and at most
    ``MAX_STATE_BYTES`` as compact JSON. Returns that JSON text (None for a None value: a delete);
    anything else is a StorageError saying what to change. For backend authors."""
    import orjson

    for what, name in (("namespace", namespace), ("key", key)):
        if not isinstance(name, str) or not name.strip():
            raise StorageError(f"state {what} must be a non-empty string, got {name!r}")
        if len(name) > 1024 or "\x00" in name:
            raise StorageError(f"state {what} must be at most 1,024 characters without NUL, got {name[:40]!r}…")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise StorageError(
            f"state version must be an integer >= 0 (the version load_state returned; 0 for none), got {version!r}"
        )
    if value is None:
        return None
    try:
        data = orjson.dumps(value)
    except TypeError as exc:
        raise StorageError(
            f"state {namespace}/{key}: the value is not JSON ({exc}); use dicts with string keys, lists, strings "
            "and numbers"
        ) from None
    if orjson.loads(data) != value:
        raise StorageError(
            f"state {namespace}/{key}: the value would not come back unchanged from JSON (NaN or infinity, "
            "tuples); use lists and finite numbers"
        )
    text = data.decode()
    if len(data) > MAX_STATE_BYTES:
        raise StorageError(
            f"state {namespace}/{key}: {len(data):,} bytes of JSON, over the {MAX_STATE_BYTES:,}-byte limit "
            "for a state document; keep working state small"
        )
    return text


def validate_prune(namespace: Any, older_than: Any) -> float:
    """The rule every backend applies to ``prune_states``: the namespace as for ``validate_state``,
    ``older_than`` a finite number of seconds >= 0. Returns it as a float. For backend authors."""
    import math

    validate_state(namespace, "prune")
    if (
        isinstance(older_than, bool)
        or not isinstance(older_than, (int, float))
        or not math.isfinite(older_than)
        or older_than < 0
    ):
        raise StorageError(f"prune_states: older_than must be a number of seconds >= 0, got {older_than!r}")
    return float(older_than)


def open_storage(config: Config, plugins: Plugins) -> StorageBackend | None:
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
