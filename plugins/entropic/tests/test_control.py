"""complete, phase_change, prune_context."""

from __future__ import annotations

import orjson
from entropic_mcp.directives import Complete, PhaseChange, PruneMessages
from entropic_support import call, directive_types


def test_complete_returns_complete_then_stop_processing(make):
    outcome = call(make(), "entropic.complete", {"summary": "done", "suggested_files": ["a.py"]})
    assert directive_types(outcome) == ["complete", "stop_processing"]
    assert outcome.response.directives[0] == Complete(summary="done", suggested_files=["a.py"])


def test_complete_with_coverage_gap_carries_the_description(make):
    outcome = call(make(), "entropic.complete", {"summary": "s", "coverage_gap": True, "gap_description": "no tests"})
    assert outcome.response.directives[0] == Complete(summary="s", coverage_gap=True, gap_description="no tests")


def test_coverage_gap_without_description_is_missing_gap_description(make):
    manager = make()
    for args in (
        {"summary": "s", "coverage_gap": True},
        {"summary": "s", "coverage_gap": True, "gap_description": " "},
    ):
        outcome = call(manager, "entropic.complete", args)
        assert outcome.response.is_error and outcome.response.directives == ()
        assert orjson.loads(outcome.response.result)["error"] == "missing_gap_description"


def test_complete_needs_a_summary(make):
    outcome = call(make(), "entropic.complete", {"summary": ""})
    assert orjson.loads(outcome.response.result)["error"] == "invalid_args"


def test_phase_change(make):
    outcome = call(make(), "entropic.phase_change", {"phase": "execute"})
    assert outcome.response.directives == (PhaseChange(phase="execute"),)


def test_phase_can_switch_back_and_forth(make):
    manager = make()
    for phase in ("plan", "execute", "plan"):
        assert call(manager, "entropic.phase_change", {"phase": phase}).kind == "ok"


def test_prune_context_defaults_to_keep_two(make):
    manager = make()
    assert call(manager, "entropic.prune_context", {}).response.directives == (PruneMessages(keep_recent=2),)
    assert call(manager, "entropic.prune_context", {"keep_recent": 5}).response.directives == (
        PruneMessages(keep_recent=5),
    )
    bad = call(manager, "entropic.prune_context", {"keep_recent": -1})
    assert bad.response.is_error and bad.response.directives == ()
