"""Argument reading (entropic_mcp.toolkit under this plugin's wording): one number rule, choices, text.

``3.0`` is the integer 3 for every integer argument; ``3.5``, booleans, strings, NaN and
infinities are refused with ``invalid_args`` naming the argument and the tool to call again —
through the pipeline (schema check first) and by the tool itself (its reader alone).
"""

from __future__ import annotations

import math

import orjson
import pytest
from entropic_mcp import CallContext, ToolError
from entropic_mcp.directives import Delegate, PruneMessages
from entropic_mcp_entropic import EntropicServer
from entropic_support import TIERS, call

#: (tool, arguments without the integer, integer argument, a valid value)
INTEGERS = [
    ("prune_context", {}, "keep_recent", 3),
    ("diagnose", {}, "history_limit", 1),
    ("context_inspect", {}, "max_messages", 1),
    ("followup", {"query": "widget"}, "max_results", 1),
    ("delegate", {"target": "researcher", "task": "look"}, "max_turns", 5),
    ("resume_delegation", {"target": "researcher", "task": "again"}, "max_turns", 5),
    ("todo", {"action": "remove"}, "index", 0),
]
IDS = [f"{tool}.{name}" for tool, _, name, _ in INTEGERS]
NOT_INTEGERS = [2.5, 1.0000001, True, False, "2", [2], {"n": 2}, math.nan, math.inf, -math.inf]


def error_of(outcome) -> dict:
    assert outcome.response.is_error, outcome.response.result
    assert outcome.response.directives == ()
    return orjson.loads(outcome.response.result)


def server() -> EntropicServer:
    configured = EntropicServer()
    configured.configure(TIERS)
    return configured


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("prune_context", {"keep_recent": 3.0}, (PruneMessages(keep_recent=3),)),
        ("prune_context", {"keep_recent": 0.0}, (PruneMessages(keep_recent=0),)),
    ],
)
def test_a_whole_float_is_the_integer_in_a_directive(make, tool, args, expected):
    outcome = call(make(), f"entropic.{tool}", args)
    assert outcome.response.directives == expected
    assert type(outcome.response.directives[0].keep_recent) is int


def test_max_turns_as_a_whole_float(make):
    outcome = call(
        make(), "entropic.delegate", {"target": "researcher", "task": "look", "max_turns": 5.0}, identity="lead"
    )
    delegate = outcome.response.directives[0]
    assert delegate == Delegate(target="researcher", task="look", max_turns=5) and type(delegate.max_turns) is int


def test_history_limit_and_todo_index_as_whole_floats(make):
    manager = make()
    for content in ("a", "b", "c"):
        call(manager, "entropic.todo", {"action": "add", "content": content})
    outcome = call(manager, "entropic.todo", {"action": "update", "index": 1.0, "status": "completed"})
    assert outcome.response.result == "Todo (1/3 completed):\n[0] [ ] a\n[1] [x] b\n[2] [ ] c"
    report = orjson.loads(call(manager, "entropic.diagnose", {"history_limit": 2.0}).response.result)
    assert [h["tool"] for h in report["history"]] == ["entropic.todo", "entropic.todo"]


def test_max_messages_as_a_whole_float(make):
    manager = make(storage=True)
    conversation = manager.storage.create_conversation("t")
    manager.storage.save_messages(
        conversation, [{"role": "user", "content": "first"}, {"role": "assistant", "content": "second"}]
    )
    outcome = call(manager, "entropic.context_inspect", {"max_messages": 1.0}, conversation=conversation)
    assert [m["preview"] for m in orjson.loads(outcome.response.result)["messages"]] == ["second"]


@pytest.mark.parametrize("bad", NOT_INTEGERS, ids=repr)
@pytest.mark.parametrize(("tool", "base", "name", "value"), INTEGERS, ids=IDS)
def test_not_an_integer_is_refused_through_the_pipeline(make, tool, base, name, value, bad):
    error = error_of(call(make(storage=True), f"entropic.{tool}", {**base, name: bad}, identity="lead"))
    assert error["error"] == "invalid_args" and name in error["message"]
    if isinstance(bad, float) and not math.isfinite(bad):
        # refused by the pipeline before any tool sees it: JSON cannot carry NaN or Infinity
        assert "which JSON cannot carry. Send a finite number" in error["message"]
    else:
        assert error["message"].endswith(f"Fix the arguments of 'entropic.{tool}' and call it again.")


@pytest.mark.parametrize("bad", NOT_INTEGERS, ids=repr)
@pytest.mark.parametrize(("tool", "base", "name", "value"), INTEGERS, ids=IDS)
def test_not_an_integer_is_refused_by_the_tool_itself(tool, base, name, value, bad):
    with pytest.raises(ToolError) as caught:
        server().tools[tool].execute({**base, name: bad}, CallContext(conversation_id="c1", identity="lead"))
    message = caught.value.message
    assert caught.value.code == "invalid_args" and f"'{name}' must be an integer" in message
    # The plugin's wording, once: the toolkit's own hint is not repeated.
    assert message.endswith(f". Fix the arguments of 'entropic.{tool}' and call it again.")
    assert "fix the argument and call again" not in message


@pytest.mark.parametrize(
    ("tool", "args", "name"),
    [
        ("prune_context", {"keep_recent": 1001.0}, "keep_recent"),
        ("prune_context", {"keep_recent": -1.0}, "keep_recent"),
        ("followup", {"query": "q", "max_results": 11.0}, "max_results"),
        ("followup", {"query": "q", "max_results": 0.0}, "max_results"),
        ("diagnose", {"history_limit": 501.0}, "history_limit"),
        ("delegate", {"target": "researcher", "task": "t", "max_turns": 31.0}, "max_turns"),
        ("todo", {"action": "remove", "index": -1.0}, "index"),
    ],
)
def test_a_whole_float_out_of_bounds_is_refused_like_the_integer(tool, args, name):
    with pytest.raises(ToolError) as caught:
        server().tools[tool].execute(args, CallContext(conversation_id="c1", identity="lead"))
    assert caught.value.code == "invalid_args" and f"'{name}' must be" in caught.value.message


# -- choices, flags and text -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "name"),
    [
        ("todo", {}, "action"),
        ("todo", {"action": "rename"}, "action"),
        ("todo", {"action": 1}, "action"),
        ("todo", {"action": "add", "content": "x", "status": "done"}, "status"),
        ("todo", {"action": "add", "content": "x", "status": ["pending"]}, "status"),
        ("inspect", {}, "target"),
        ("inspect", {"target": "soul"}, "target"),
        ("diagnose", {"include_docs": "yes"}, "include_docs"),
        ("diagnose", {"include_docs": 1}, "include_docs"),
        ("complete", {"summary": "s", "coverage_gap": 0}, "coverage_gap"),
        ("delegate", {"target": "researcher", "task": "a\x00b"}, "task"),
        ("delegate", {"target": "researcher", "task": "\ud800"}, "task"),
        ("phase_change", {"phase": 3}, "phase"),
        ("phase_change", {"phase": "   "}, "phase"),
    ],
)
def test_a_bad_choice_flag_or_text_names_the_argument_in_the_plugins_wording(tool, args, name):
    with pytest.raises(ToolError) as caught:
        server().tools[tool].execute(args, CallContext(conversation_id="c1", identity="lead"))
    message = caught.value.message
    assert caught.value.code == "invalid_args" and f"'{name}'" in message
    assert message.endswith(f"Fix the arguments of 'entropic.{tool}' and call it again.")


def test_optional_text_that_is_blank_counts_as_absent(make):
    outcome = call(make(), "entropic.complete", {"summary": " done ", "gap_description": "   "})
    assert outcome.response.directives[0].summary == "done"
    assert outcome.response.directives[0].gap_description == ""
