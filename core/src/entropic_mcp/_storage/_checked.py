"""CheckedStorage: the protocol's argument rules, applied once in front of every backend.

The manager opens each backend through ``open_storage``, which wraps it: a backend's methods
then receive arguments of the shapes the protocol states (ids and names strings, counts
integers in range, messages a list of objects with a role, state as JSON), so no backend
re-implements those checks; what depends on the stored data (an unknown id, a second
completion, a version conflict) stays the backend's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import StorageError
from ._protocols import AsyncStateStore, StateStore
from ._records import DEFAULT_SCOPE, ToolCallRecord, check_scope
from ._rules import validate_messages, validate_prune, validate_state

STATUSES = ("completed", "failed")


def _text(value: Any, what: str, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise StorageError(f"{what} must be a string, got {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise StorageError(f"{what} is empty")
    return value


def _count(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise StorageError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def _context(value: Any) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise StorageError(f"context must be a list of objects or None, got {type(value).__name__}")
    if not all(isinstance(item, Mapping) for item in value):
        raise StorageError("context must be a list of objects ({path, lines?, note?})")
    return list(value)


class CheckedStorage:
    """A ``StorageBackend`` whose arguments are checked before the backend sees them.

    Anything else the backend has (``flush``, ``path``, a ``StateStore``'s methods through
    ``CheckedStateStorage``) is reached as on the backend itself.
    """

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def __repr__(self) -> str:
        return f"CheckedStorage({self.backend!r})"

    def create_conversation(
        self, title: str, metadata: Mapping[str, Any] | None = None, scope: str = DEFAULT_SCOPE
    ) -> str:
        _text(title, "title", empty_ok=True)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise StorageError(f"metadata must be an object or None, got {type(metadata).__name__}")
        check_scope(scope, "create_conversation", none_ok=False)
        return self.backend.create_conversation(title, metadata, scope)  # type: ignore[no-any-return]

    def scope_of(self, conversation_id: str) -> str | None:
        return self.backend.scope_of(_text(conversation_id, "conversation_id"))  # type: ignore[no-any-return]

    def save_messages(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        _text(conversation_id, "save_messages: conversation_id")
        self.backend.save_messages(conversation_id, validate_messages(messages, "save_messages"))

    def load_conversation(self, conversation_id: str) -> dict[str, Any]:
        return self.backend.load_conversation(_text(conversation_id, "conversation_id"))  # type: ignore[no-any-return]

    def list_conversations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        return self.backend.list_conversations(_count(limit, "limit", 1), _count(offset, "offset", 0))  # type: ignore[no-any-return]

    def delete_conversation(self, conversation_id: str) -> None:
        self.backend.delete_conversation(_text(conversation_id, "conversation_id"))

    def save_snapshot(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> str:
        _text(conversation_id, "save_snapshot: conversation_id")
        return self.backend.save_snapshot(conversation_id, validate_messages(messages, "save_snapshot"))  # type: ignore[no-any-return]

    def create_delegation(
        self,
        parent_id: str,
        delegating_tier: str,
        target_tier: str,
        task: str,
        max_turns: int = -1,
        context: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[str, str]:
        if isinstance(parent_id, str) and not parent_id.strip():
            raise StorageError(
                "create_delegation: parent_id is empty; create the root conversation first "
                "(create_conversation) and pass its id"
            )
        _text(parent_id, "create_delegation parent_id")
        _text(delegating_tier, "delegating_tier")
        _text(target_tier, "target_tier")
        _text(task, "task")
        _count(max_turns, "max_turns", -1)
        return self.backend.create_delegation(  # type: ignore[no-any-return]
            parent_id, delegating_tier, target_tier, task, max_turns, _context(context)
        )

    def complete_delegation(self, delegation_id: str, status: str, summary: str) -> None:
        _text(delegation_id, "delegation_id")
        if status not in STATUSES:
            raise StorageError(f"status must be 'completed' or 'failed', got {status!r}")
        self.backend.complete_delegation(
            delegation_id, status, _text("" if summary is None else summary, "summary", empty_ok=True)
        )

    def load_delegation_with_messages(self, delegation_id: str) -> dict[str, Any]:
        return self.backend.load_delegation_with_messages(_text(delegation_id, "delegation_id"))  # type: ignore[no-any-return]

    def latest_delegation_for_target(self, target_tier: str, scope: str | None = None) -> str | None:
        _text(target_tier, "target_tier")
        check_scope(scope, "latest_delegation_for_target", none_ok=True)
        return self.backend.latest_delegation_for_target(target_tier, scope)  # type: ignore[no-any-return]

    def search_delegations(self, query: str, max_results: int = 3, scope: str | None = None) -> list[dict[str, Any]]:
        _text(query, "query")
        _count(max_results, "max_results", 1)
        check_scope(scope, "search_delegations", none_ok=True)
        return self.backend.search_delegations(query, max_results, scope)  # type: ignore[no-any-return]

    def list_delegations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        return self.backend.list_delegations(_count(limit, "limit", 1), _count(offset, "offset", 0))  # type: ignore[no-any-return]

    def record_tool_call(self, record: ToolCallRecord) -> None:
        if not isinstance(record, ToolCallRecord):
            hint = " (build one with ToolCallRecord.from_outcome(outcome))" if hasattr(record, "to_record") else ""
            raise StorageError(f"record_tool_call expects a ToolCallRecord, got {type(record).__name__}{hint}")
        self.backend.record_tool_call(record)

    def stats(self) -> dict[str, int]:
        return self.backend.stats()  # type: ignore[no-any-return]

    def close(self) -> None:
        self.backend.close()


class CheckedStateStorage(CheckedStorage):
    """``CheckedStorage`` of a backend that is also a ``StateStore``."""

    def load_state(self, namespace: str, key: str) -> tuple[Any, int]:
        validate_state(namespace, key)
        return self.backend.load_state(namespace, key)  # type: ignore[no-any-return]

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        validate_state(namespace, key, value, version)
        return self.backend.save_state(namespace, key, value, version)  # type: ignore[no-any-return]

    def prune_states(self, namespace: str, older_than: float) -> int:
        return self.backend.prune_states(namespace, validate_prune(namespace, older_than))  # type: ignore[no-any-return]


class CheckedAsyncStateStorage(CheckedStateStorage):
    """``CheckedStateStorage`` of a backend that is also an ``AsyncStateStore``."""

    async def load_state_async(self, namespace: str, key: str) -> tuple[Any, int]:
        validate_state(namespace, key)
        return await self.backend.load_state_async(namespace, key)  # type: ignore[no-any-return]

    async def save_state_async(self, namespace: str, key: str, value: Any, version: int) -> int:
        validate_state(namespace, key, value, version)
        return await self.backend.save_state_async(namespace, key, value, version)  # type: ignore[no-any-return]


def checked(backend: Any) -> CheckedStorage:
    """``backend`` behind the argument rules (as it is, when it already is)."""
    if isinstance(backend, CheckedStorage):
        return backend
    if isinstance(backend, AsyncStateStore):
        return CheckedAsyncStateStorage(backend)
    return CheckedStateStorage(backend) if isinstance(backend, StateStore) else CheckedStorage(backend)
