"""An in-memory storage backend for tests: the tinydb backend's semantics, no files."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import StorageError
from .._storage._records import DEFAULT_SCOPE, ToolCallRecord, check_record
from .._storage._state import StoreState


class MemoryStorage:
    """A ``StorageBackend`` held in memory; everything is gone when it is closed.

    It passes the same contract suite (``StorageContract``) as the tinydb backend, so a host's or
    plugin's tests can use it instead of files. ``tool_calls`` holds the audit records.
    """

    def __init__(self) -> None:
        self._state = StoreState()
        self._mutex = threading.RLock()
        self._closed = False
        self.tool_calls: list[dict[str, Any]] = []

    def _open(self) -> StoreState:
        if self._closed:
            raise StorageError("the memory store is closed")
        return self._state

    def _commit(self, op: dict[str, Any]) -> dict[str, Any]:
        self._state.apply(op)
        return op

    def create_conversation(
        self, title: str, metadata: Mapping[str, Any] | None = None, scope: str = DEFAULT_SCOPE
    ) -> str:
        with self._mutex:
            return self._commit(self._open().prepare_create_conversation(title, metadata, scope))["conversation_id"]

    def scope_of(self, conversation_id: str) -> str | None:
        with self._mutex:
            return self._open().scope_of(conversation_id)

    def save_messages(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        with self._mutex:
            self._commit(self._open().prepare_save_messages(conversation_id, messages))

    def load_conversation(self, conversation_id: str) -> dict[str, Any]:
        with self._mutex:
            return self._open().load_conversation(conversation_id)

    def list_conversations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        with self._mutex:
            return self._open().list_conversations(limit, offset)

    def delete_conversation(self, conversation_id: str) -> None:
        with self._mutex:
            self._commit(self._open().prepare_delete_conversation(conversation_id))

    def save_snapshot(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> str:
        with self._mutex:
            return self._commit(self._open().prepare_save_snapshot(conversation_id, messages))["snapshot_id"]

    def create_delegation(
        self,
        parent_id: str,
        delegating_tier: str,
        target_tier: str,
        task: str,
        max_turns: int = -1,
        context: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[str, str]:
        with self._mutex:
            op = self._commit(
                self._open().prepare_create_delegation(
                    parent_id, delegating_tier, target_tier, task, max_turns, context
                )
            )
            return op["delegation_id"], op["child_conversation_id"]

    def complete_delegation(self, delegation_id: str, status: str, summary: str) -> None:
        with self._mutex:
            self._commit(self._open().prepare_complete_delegation(delegation_id, status, summary))

    def load_delegation_with_messages(self, delegation_id: str) -> dict[str, Any]:
        with self._mutex:
            return self._open().load_delegation_with_messages(delegation_id)

    def latest_delegation_for_target(self, target_tier: str, scope: str | None = None) -> str | None:
        with self._mutex:
            return self._open().latest_delegation_for_target(target_tier, scope)

    def search_delegations(self, query: str, max_results: int = 3, scope: str | None = None) -> list[dict[str, Any]]:
        with self._mutex:
            return self._open().search_delegations(query, max_results, scope)

    def list_delegations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        with self._mutex:
            return self._open().list_delegations(limit, offset)

    def load_state(self, namespace: str, key: str) -> tuple[Any, int]:
        with self._mutex:
            return self._open().load_state(namespace, key)

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        with self._mutex:
            return int(self._commit(self._open().prepare_save_state(namespace, key, value, version))["version"])

    def prune_states(self, namespace: str, older_than: float) -> int:
        with self._mutex:
            return len(self._commit(self._open().prepare_prune_states(namespace, older_than))["keys"])

    def record_tool_call(self, record: ToolCallRecord) -> None:
        data = check_record(record).to_dict()
        with self._mutex:
            self._open()
            self.tool_calls.append(data)

    def stats(self) -> dict[str, int]:
        with self._mutex:
            counts = self._open().stats()
            counts["tool_calls"] = len(self.tool_calls)
            return counts

    def close(self) -> None:
        with self._mutex:
            self._closed = True
