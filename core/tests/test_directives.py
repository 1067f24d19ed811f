import pytest
from entropic_mcp import ServerResponse, ToolResult
from entropic_mcp._directives import DIRECTIVE_TYPES
from entropic_mcp.directives import (
    Complete,
    Delegate,
    DirectiveProcessor,
    NotifyPresenter,
    StopProcessing,
    UnknownDirective,
    directive_from_dict,
)

WIRE = {
    "stop_processing": {},
    "tier_change": {"tier": "coder", "reason": "needs edits"},
    "delegate": {
        "target": "researcher",
        "task": "find",
        "max_turns": -1,
        "context": [{"path": "a.py", "lines": "1-5", "note": "here"}],
        "resume_from": "",
    },
    "pipeline": {"stages": ["researcher", "coder"], "task": "t", "context": []},
    "complete": {"summary": "done", "coverage_gap": False, "gap_description": "", "suggested_files": ["a"]},
    "clear_self_todos": {},
    "inject_context": {"content": "c", "role": "user"},
    "prune_messages": {"keep_recent": 2},
    "context_anchor": {"key": "k", "content": "v"},
    "phase_change": {"phase": "plan"},
    "notify_presenter": {"key": "todo", "data": [{"content": "x"}]},
}


def test_every_directive_type_is_covered():
    assert set(WIRE) == set(DIRECTIVE_TYPES)


@pytest.mark.parametrize(("name", "fields"), list(WIRE.items()))
def test_every_directive_carries_its_payload_on_the_wire(name, fields):
    directive = directive_from_dict({"type": name, **fields})
    assert type(directive) is DIRECTIVE_TYPES[name]
    assert directive.to_dict() == {"type": name, **fields}


def test_unknown_directives_are_passed_through_not_dropped():
    directive = directive_from_dict({"type": "future_thing", "level": 3})
    assert isinstance(directive, UnknownDirective)
    assert directive.to_dict() == {"type": "future_thing", "level": 3}
    envelope = ServerResponse.from_dict({"result": "r", "directives": [{"type": "future_thing", "level": 3}]})
    assert envelope.to_dict()["directives"] == [{"type": "future_thing", "level": 3}]


def test_known_directive_with_wrong_fields_is_kept_as_unknown():
    directive = directive_from_dict({"type": "delegate", "who": "x"})
    assert isinstance(directive, UnknownDirective) and directive.to_dict() == {"type": "delegate", "who": "x"}


def test_failures_carry_no_directives():
    response = ServerResponse(result="bad", directives=[StopProcessing()], is_error=True)
    assert response.directives == ()
    assert ToolResult.error("x", "y").directives == ()


def test_processor_dispatches_by_type_stops_and_reports_unhandled():
    seen = []
    processor = DirectiveProcessor()
    processor.register("delegate", lambda d, ctx: seen.append(d.target) or "child-1")
    result = processor.process(
        [
            Delegate(target="researcher", task="t"),
            NotifyPresenter(key="todo"),
            StopProcessing(),
            Complete(summary="never reached"),
        ]
    )
    assert seen == ["researcher"]
    assert result.handled == (("delegate", "child-1"),)
    assert result.unhandled == (NotifyPresenter(key="todo"),)
    assert result.stopped is True
