"""todo: one list per conversation, rendered, anchored in context and sent to the presenter."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolBase, ToolError, ToolResult, load_tool_definition
from entropic_mcp.directives import ContextAnchor, NotifyPresenter
from entropic_mcp.storage import StateConflict, StateStore, StorageError, update_document

from ._args import choice, integer, invalid, require_object, text

log = logging.getLogger("entropic_mcp.entropic")

STATUSES = ("pending", "in_progress", "completed")
MARKS = {"pending": " ", "in_progress": ">", "completed": "x"}
MAX_ITEMS = 100
#: Conversations whose lists are kept in memory; the least recently used is dropped beyond this.
MAX_CONVERSATIONS = 4096
#: The store's namespace for the lists; the key is the conversation key.
NAMESPACE = "entropic.todo"
#: Load-apply-save rounds a change tries before telling the model the list is busy.
MAX_SAVE_ATTEMPTS = 10

Items = list[dict[str, str]]


class TodoLists:
    """The todo lists of every conversation (a host calls ``end_conversation`` to release one).

    A list lives in the store when the store keeps plugin state (``StateStore``): every worker on
    the store sees the one list and a restart keeps it. Without storage, or with a backend lacking
    ``StateStore``, lists live in this process's memory.
    """

    def __init__(self) -> None:
        self._lists: OrderedDict[str, Items] = OrderedDict()
        self._lock = threading.Lock()

    def store_of(self, ctx: CallContext) -> StateStore | None:
        """The store this call's lists live in; None when they live in memory.

        Raises:
            ToolError: a store is configured but cannot be opened (nothing was read or changed).
        """
        return ctx.services.state_store(
            "the todo list", then="Nothing was read or changed; fix [storage] in entropic-mcp.toml, then try again."
        )

    def items(self, conversation_id: str, store: StateStore | None = None) -> Items:
        """A copy of the list, from ``store`` (see ``store_of``) or from memory when it is None."""
        if store is None:
            with self._lock:
                return [dict(item) for item in self._lists.get(conversation_id, [])]
        try:
            return _stored_items(store.load_state(NAMESPACE, conversation_id)[0])
        except StorageError as exc:
            raise _store_failed(exc, "could not be read") from None

    def change(self, conversation_id: str, apply: Callable[[Items], None], store: StateStore | None = None) -> Items:
        """Apply ``apply`` to the list and keep the result; a ToolError from ``apply`` keeps nothing."""
        if store is None:
            with self._lock:
                items = self._lists.setdefault(conversation_id, [])
                self._lists.move_to_end(conversation_id)
                apply(items)
                while len(self._lists) > MAX_CONVERSATIONS:
                    self._lists.popitem(last=False)
                return [dict(item) for item in items]
        try:
            return _change_stored(store, conversation_id, apply)
        except StateConflict:
            raise ToolError(
                "todo_busy",
                f"the todo list is being changed concurrently by other calls of this conversation "
                f"({MAX_SAVE_ATTEMPTS} attempts each found it changed meanwhile); nothing was changed. "
                "Try again.",
            ) from None
        except StorageError as exc:
            raise _store_failed(exc, "could not be changed") from None

    def release(self, conversation_id: str, store: StateStore | None = None) -> None:
        """Forget the conversation's list; in ``store`` too, delete it (a failure is logged, not raised)."""
        with self._lock:
            self._lists.pop(conversation_id, None)
        if store is None:
            return
        try:
            _change_stored(store, conversation_id, list.clear)
        except StorageError:
            log.warning("could not delete the todo list of conversation %r", conversation_id, exc_info=True)

    def __len__(self) -> int:
        return len(self._lists)


def _change_stored(store: StateStore, key: str, apply: Callable[[Items], None]) -> Items:
    """Load, apply, save (``update_document``: again from what is stored now on a conflict). An
    empty list is deleted. Raises StateConflict after ``MAX_SAVE_ATTEMPTS`` lost races, StorageError."""

    def change(value: Any) -> Any:
        # Clearing needs nothing of what is stored, so it also removes a document it cannot read.
        items = [] if apply is list.clear else _stored_items(value)
        apply(items)
        return {"items": items} if items else None

    value, _ = update_document(store, NAMESPACE, key, change, attempts=MAX_SAVE_ATTEMPTS)
    return value["items"] if value else []


def _stored_items(value: Any) -> Items:
    if value is None:
        return []
    items = value.get("items") if isinstance(value, dict) else None
    if not isinstance(items, list) or not all(
        isinstance(item, dict)
        and isinstance(item.get("content"), str)
        and item.get("status") in STATUSES
        and len(item) == 2
        for item in items
    ):
        raise StorageError(
            f"the stored document {NAMESPACE} is not a todo list "
            '({"items": [{"content", "status"}, ...]}); clear the list to start a new one'
        )
    return items


def _store_failed(exc: StorageError, what: str) -> ToolError:
    return ToolError(
        "storage_unavailable",
        f"the todo list {what}: the store failed ({exc}). Nothing was changed; try again, or go on "
        "without the list if the store stays unavailable.",
    )


def render(items: Items) -> str:
    """The list as the model and the anchor see it; ``""`` for an empty list (removes the anchor)."""
    if not items:
        return ""
    done = sum(1 for item in items if item["status"] == "completed")
    lines = [f"Todo ({done}/{len(items)} completed):"]
    lines += [f"[{i}] [{MARKS[item['status']]}] {item['content']}" for i, item in enumerate(items)]
    return "\n".join(lines)


class TodoTool(ToolBase):
    """``entropic.todo``: add / update / remove / clear."""

    definition = load_tool_definition(__package__, "todo")
    required_access_level = AccessLevel.WRITE
    capabilities = frozenset({"todo"})
    destructive = False
    idempotent = False

    def __init__(self, lists: TodoLists) -> None:
        super().__init__()
        self.lists = lists

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "todo"))
        action = choice(args, "action", "todo", ("add", "update", "remove", "clear"), required=True)
        content = text(args, "content", "todo", required=action == "add")
        status = choice(args, "status", "todo", STATUSES)
        index = integer(args, "index", "todo", default=-1, minimum=0) if "index" in args else None
        if action in ("update", "remove") and index is None:
            raise invalid("todo", f"'{action}' needs 'index': the item number shown in the list")
        if action == "update" and content is None and status is None:
            raise invalid("todo", "'update' needs 'content' and/or 'status' to change")

        def edit(items: Items) -> None:
            if action == "add":
                if len(items) >= MAX_ITEMS:
                    raise ToolError(
                        "todo_full",
                        f"the todo list already has {MAX_ITEMS} items; remove completed "
                        "ones (action 'remove') or clear it before adding more.",
                    )
                items.append({"content": content or "", "status": status or "pending"})
            else:
                assert index is not None
                if index >= len(items):
                    shown = f"0..{len(items) - 1}" if items else "none: the list is empty"
                    raise ToolError(
                        "index_out_of_range",
                        f"there is no item {index} (items: {shown}). Use an index shown in the list.",
                        index=index,
                        size=len(items),
                    )
                if action == "remove":
                    del items[index]
                else:
                    if content is not None:
                        items[index]["content"] = content
                    if status is not None:
                        items[index]["status"] = status

        apply = list.clear if action == "clear" else edit
        items = self.lists.change(ctx.conversation_id, apply, self.lists.store_of(ctx))
        rendering = render(items)
        return ToolResult(
            text=rendering or "The todo list is empty.",
            directives=[ContextAnchor(key="todo_state", content=rendering), NotifyPresenter(key="todo", data=items)],
        )
