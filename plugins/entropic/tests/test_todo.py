"""todo: one list per conversation; the rendering, the anchor and the presenter notice."""

from __future__ import annotations

import orjson
import pytest
from entropic_mcp import ContextAnchor, NotifyPresenter
from entropic_support import call, directive_types


def test_add_renders_and_emits_anchor_and_presenter(make):
    outcome = call(make(), "entropic.todo", {"action": "add", "content": "read the spec"})
    assert directive_types(outcome) == ["context_anchor", "notify_presenter"]
    anchor, notice = outcome.response.directives
    assert anchor == ContextAnchor(key="todo_state", content=outcome.response.result)
    assert notice == NotifyPresenter(key="todo", data=[{"content": "read the spec", "status": "pending"}])
    assert outcome.response.result == "Todo (0/1 completed):\n[0] [ ] read the spec"


def test_update_status_and_content_then_remove(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    call(manager, "entropic.todo", {"action": "add", "content": "b", "status": "in_progress"})
    outcome = call(manager, "entropic.todo", {"action": "update", "index": 0, "status": "completed"})
    assert outcome.response.result == "Todo (1/2 completed):\n[0] [x] a\n[1] [>] b"
    outcome = call(manager, "entropic.todo", {"action": "update", "index": 1, "content": "b2"})
    assert outcome.response.directives[1].data[1] == {"content": "b2", "status": "in_progress"}
    outcome = call(manager, "entropic.todo", {"action": "remove", "index": 0})
    assert outcome.response.result == "Todo (0/1 completed):\n[0] [>] b2"


def test_clear_empties_the_list_and_removes_the_anchor(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    outcome = call(manager, "entropic.todo", {"action": "clear"})
    assert outcome.response.result == "The todo list is empty."
    assert outcome.response.directives == (
        ContextAnchor(key="todo_state", content=""),
        NotifyPresenter(key="todo", data=[]),
    )


@pytest.mark.parametrize("action", ["update", "remove"])
def test_out_of_range_index_is_an_error_without_directives(make, action):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "only"})
    outcome = call(manager, "entropic.todo", {"action": action, "index": 1, "status": "completed"})
    assert outcome.response.is_error and outcome.response.directives == ()
    error = orjson.loads(outcome.response.result)
    assert error["error"] == "index_out_of_range" and "0..0" in error["message"]


def test_lists_are_per_conversation_and_released_at_the_end(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "mine"}, conversation="a")
    other = call(manager, "entropic.todo", {"action": "add", "content": "theirs"}, conversation="b")
    assert other.response.result == "Todo (0/1 completed):\n[0] [ ] theirs"
    manager.end_conversation("a")
    again = call(manager, "entropic.todo", {"action": "add", "content": "fresh"}, conversation="a")
    assert again.response.result == "Todo (0/1 completed):\n[0] [ ] fresh"


def test_the_same_add_twice_is_not_refused_as_a_duplicate(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "x"})
    outcome = call(manager, "entropic.todo", {"action": "add", "content": "x"})
    assert outcome.kind == "ok" and outcome.response.result.endswith("[1] [ ] x")


@pytest.mark.parametrize(
    "args",
    [
        {"action": "add"},
        {"action": "update", "index": 0},
        {"action": "remove"},
        {"action": "explode"},
        {"action": "update", "status": "completed"},
    ],
)
def test_missing_pieces_are_invalid_args(make, args):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    outcome = call(manager, "entropic.todo", args)
    assert outcome.response.is_error and orjson.loads(outcome.response.result)["error"] == "invalid_args"


def test_the_list_has_a_limit(make):
    from entropic_mcp_entropic._todo import MAX_ITEMS

    manager = make()
    server = manager.servers["entropic"]
    server.todo_lists.change(
        "c1", lambda items: items.extend({"content": "x", "status": "pending"} for _ in range(MAX_ITEMS))
    )
    outcome = call(manager, "entropic.todo", {"action": "add", "content": "one more"})
    assert orjson.loads(outcome.response.result)["error"] == "todo_full"
