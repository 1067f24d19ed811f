"""The protocols a backend implements (``StorageBackend``, optionally ``StateStore``), in a leaf
under the package: the checked wrapper and the backends name them without importing the package
that imports them. Re-exported by ``entropic_mcp._storage`` and ``entropic_mcp.storage``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ._records import DEFAULT_SCOPE, ToolCallRecord


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


@runtime_checkable
class AsyncStateStore(StateStore, Protocol):
    """A ``StateStore`` whose load and save can also be awaited on the caller's event loop.

    Optional beside ``StateStore``: for state read and written on every tool call (the pipeline's
    guard state), where a worker thread per statement costs more than the statement does. Same
    rules, answers and errors as ``load_state``/``save_state``; a store without it is used through
    worker threads.
    """

    async def load_state_async(self, namespace: str, key: str) -> tuple[Any, int]:
        """``load_state``, awaited."""
        ...

    async def save_state_async(self, namespace: str, key: str, value: Any, version: int) -> int:
        """``save_state``, awaited."""
        ...
