"""todo: one list per conversation, rendered, anchored in context and sent to the presenter."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from entropic_mcp import (
    AccessLevel,
    CallContext,
    ContextAnchor,
    NotifyPresenter,
    ToolBase,
    ToolError,
    ToolResult,
    load_tool_definition,
)

from ._args import choice, integer, invalid, require_object, text

STATUSES = ("pending", "in_progress", "completed")
MARKS = {"pending": " ", "in_progress": ">", "completed": "x"}
MAX_ITEMS = 100
#: Conversations whose lists are kept; the least recently used is dropped beyond this.
MAX_CONVERSATIONS = 4096


class TodoLists:
    """The todo lists of every conversation (a host calls ``end_conversation`` to release one)."""

    def __init__(self) -> None:
        self._lists: OrderedDict[str, list[dict[str, str]]] = OrderedDict()
        self._lock = threading.Lock()

    def items(self, conversation_id: str) -> list[dict[str, str]]:
        with self._lock:
            return [dict(item) for item in self._lists.get(conversation_id, [])]

    def change(self, conversation_id: str, apply: Any) -> list[dict[str, str]]:
        with self._lock:
            items = self._lists.setdefault(conversation_id, [])
            self._lists.move_to_end(conversation_id)
            apply(items)
            while len(self._lists) > MAX_CONVERSATIONS:
                self._lists.popitem(last=False)
            return [dict(item) for item in items]

    def release(self, conversation_id: str) -> None:
        with self._lock:
            self._lists.pop(conversation_id, None)

    def __len__(self) -> int:
        return len(self._lists)


def render(items: list[dict[str, str]]) -> str:
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

        def apply(items: list[dict[str, str]]) -> None:
            if action == "add":
                if len(items) >= MAX_ITEMS:
                    raise ToolError(
                        "todo_full",
                        f"the todo list already has {MAX_ITEMS} items; remove completed "
                        "ones (action 'remove') or clear it before adding more.",
                    )
                items.append({"content": content or "", "status": status or "pending"})
            elif action == "clear":
                items.clear()
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

        items = self.lists.change(ctx.conversation_id, apply)
        rendering = render(items)
        return ToolResult(
            text=rendering or "The todo list is empty.",
            directives=[ContextAnchor(key="todo_state", content=rendering), NotifyPresenter(key="todo", data=items)],
        )
