"""delegate, pipeline, resume_delegation: validation first, then exactly the directives of the spec."""

from __future__ import annotations

import anyio
import orjson
import pytest
from entropic_mcp import CallContext
from entropic_mcp.directives import Delegate, Pipeline, StopProcessing
from entropic_mcp_entropic import EntropicServer
from entropic_support import TIERS, call, directive_types


def error_of(outcome) -> dict:
    assert outcome.response.is_error, outcome.response.result
    assert outcome.response.directives == ()
    return orjson.loads(outcome.response.result)


def direct(server: EntropicServer, tool: str, args: object, identity: str | None = None):
    return anyio.run(server.execute, tool, args, CallContext(conversation_id="c1", identity=identity))


@pytest.fixture
def server() -> EntropicServer:
    server = EntropicServer()
    server.configure(TIERS)
    return server


# -- delegate ----------------------------------------------------------------------------------


def test_delegate_returns_delegate_then_stop_processing(make):
    outcome = call(
        make(),
        "entropic.delegate",
        {"target": "researcher", "task": "find the retry config", "max_turns": 5},
        identity="lead",
    )
    assert outcome.kind == "ok"
    assert directive_types(outcome) == ["delegate", "stop_processing"]
    delegate = outcome.response.directives[0]
    assert delegate == Delegate(target="researcher", task="find the retry config", max_turns=5)
    assert isinstance(outcome.response.directives[1], StopProcessing)


def test_delegate_max_turns_defaults_to_host_decides(server):
    response = direct(server, "delegate", {"target": "researcher", "task": "t"})
    assert response.directives[0].max_turns == -1


def test_delegate_context_entries_carry_path_lines_note(server):
    response = direct(
        server,
        "delegate",
        {
            "target": "coder",
            "task": "fix it",
            "context": [{"path": "src/a.py", "lines": "10-20"}, {"path": "b.py", "note": "why"}],
        },
    )
    assert not response.is_error
    assert response.directives[0].context == (
        {"path": "src/a.py", "lines": "10-20", "note": ""},
        {"path": "b.py", "lines": "", "note": "why"},
    )


def test_requires_context_tier_refuses_a_contextless_delegation_with_no_directives(make):
    outcome = call(make(), "entropic.delegate", {"target": "coder", "task": "fix the bug"}, identity="lead")
    error = error_of(outcome)
    assert error["error"] == "context_required"
    assert "coder" in error["message"] and "context" in error["message"]


def test_requires_context_tier_refuses_an_empty_context_list(server):
    response = direct(server, "delegate", {"target": "coder", "task": "fix", "context": []})
    assert response.is_error and orjson.loads(response.result)["error"] == "context_required"


def test_a_tier_cannot_delegate_to_itself(make):
    error = error_of(call(make(), "entropic.delegate", {"target": "lead", "task": "t"}, identity="lead"))
    assert error["error"] == "self_delegation"
    assert "researcher" in error["message"]


def test_unknown_target_through_the_pipeline_lists_the_tiers(make):
    error = error_of(call(make(), "entropic.delegate", {"target": "wizard", "task": "t"}))
    assert error["error"] == "invalid_args"
    assert "researcher" in error["message"] and "coder" in error["message"]


def test_unknown_target_executed_directly_lists_the_tiers(server):
    # Called bare, the server checks the tiers' enum in the schema, as the pipeline would.
    response = direct(server, "delegate", {"target": "wizard", "task": "t"})
    error = orjson.loads(response.result)
    assert error["error"] == "invalid_args" and '["lead","researcher","coder"]' in error["message"]


@pytest.mark.parametrize(
    "args",
    [
        "junk",
        "42",
        [],
        {"target": "researcher"},
        {"task": "t"},
        {"target": "researcher", "task": "   "},
        {"target": "researcher", "task": "t", "max_turns": 0},
        {"target": "researcher", "task": "t", "max_turns": 31},
        {"target": "researcher", "task": "t", "max_turns": True},
        {"target": "researcher", "task": "t", "context": [{"lines": "1"}]},
        {"target": "researcher", "task": "t", "context": "a.py"},
    ],
)
def test_delegate_bad_arguments_are_invalid_args_when_executed_directly(server, args):
    response = direct(server, "delegate", args)
    assert response.is_error and response.directives == ()
    assert orjson.loads(response.result)["error"] == "invalid_args"


def test_delegate_is_never_refused_as_a_duplicate(make):
    manager = make()
    args = {"target": "researcher", "task": "same task"}
    for _ in range(3):
        outcome = call(manager, "entropic.delegate", args, identity="lead")
        assert outcome.kind == "ok"


# -- pipeline ------------------------------------------------------------------------------------


def test_pipeline_returns_pipeline_then_stop_processing(make):
    outcome = call(
        make(),
        "entropic.pipeline",
        {"stages": ["researcher", "coder"], "task": "t", "context": [{"path": "a.py"}]},
        identity="lead",
    )
    assert directive_types(outcome) == ["pipeline", "stop_processing"]
    assert outcome.response.directives[0] == Pipeline(
        stages=["researcher", "coder"], task="t", context=[{"path": "a.py", "lines": "", "note": ""}]
    )


def test_pipeline_too_few_stages_wins_over_an_unknown_stage(server):
    error = orjson.loads(direct(server, "pipeline", {"stages": ["wizard"], "task": "t"}).result)
    assert error["error"] == "invalid_args" and "less than 2 items" in error["message"]


def test_pipeline_unknown_stage_wins_over_context_and_lists_valid_tiers(server):
    response = direct(server, "pipeline", {"stages": ["coder", "wizard"], "task": "t"})
    error = orjson.loads(response.result)
    assert error["error"] == "invalid_args" and '"wizard"' in error["message"]
    assert '["lead","researcher","coder"]' in error["message"]


def test_pipeline_stage_needing_context_is_refused(server):
    response = direct(server, "pipeline", {"stages": ["researcher", "coder"], "task": "t"})
    assert response.is_error and response.directives == ()
    assert orjson.loads(response.result)["error"] == "context_required"


def test_pipeline_validation_through_the_manager_has_no_directives(make):
    manager = make()
    for args in (
        {"stages": ["researcher"], "task": "t"},
        {"stages": ["researcher", "wizard"], "task": "t"},
        {"stages": ["researcher", "coder"], "task": "t"},
    ):
        outcome = call(manager, "entropic.pipeline", args)
        assert outcome.response.is_error and outcome.response.directives == ()
    unknown = error_of(call(manager, "entropic.pipeline", {"stages": ["researcher", "wizard"], "task": "t2"}))
    assert "researcher" in unknown["message"] and "coder" in unknown["message"]


def test_pipeline_including_the_caller_is_self_delegation(server):
    response = direct(server, "pipeline", {"stages": ["lead", "researcher"], "task": "t"}, identity="lead")
    assert orjson.loads(response.result)["error"] == "self_delegation"


# -- resume_delegation ------------------------------------------------------------------------------


def _completed_delegation(manager, target="researcher", summary="found the cache") -> str:
    storage = manager.storage
    root = storage.create_conversation("root")
    delegation_id, child = storage.create_delegation(root, "lead", target, "look at the cache", -1, [])
    storage.save_messages(
        child, [{"role": "user", "content": "look at the cache"}, {"role": "assistant", "content": "it is in cache.py"}]
    )
    storage.complete_delegation(delegation_id, "completed", summary)
    return delegation_id


def test_resume_by_target_picks_the_latest_completed_delegation(make):
    manager = make(storage=True)
    _completed_delegation(manager)
    latest = _completed_delegation(manager, summary="second")
    outcome = call(manager, "entropic.resume_delegation", {"target": "researcher", "task": "go on"}, identity="lead")
    assert directive_types(outcome) == ["delegate"]
    directive = outcome.response.directives[0]
    assert directive == Delegate(target="researcher", task="go on", resume_from=latest)
    assert orjson.loads(outcome.response.result)["prior_messages"] == 2


def test_resume_by_id(make):
    manager = make(storage=True)
    first = _completed_delegation(manager)
    _completed_delegation(manager)
    outcome = call(manager, "entropic.resume_delegation", {"delegation_id": first, "task": "again", "max_turns": 4})
    assert outcome.response.directives[0].resume_from == first
    assert outcome.response.directives[0].max_turns == 4


def test_resume_needs_an_id_or_a_target(make):
    error = error_of(call(make(storage=True), "entropic.resume_delegation", {"task": "t"}))
    assert error["error"] == "invalid_args" and "delegation_id" in error["message"] and "target" in error["message"]


def test_resume_unknown_id_names_it(make):
    error = error_of(call(make(storage=True), "entropic.resume_delegation", {"delegation_id": "nope", "task": "t"}))
    assert error["error"] == "unknown_delegation" and error["delegation_id"] == "nope"


def test_resume_target_without_completed_delegation(make):
    manager = make(storage=True)
    storage = manager.storage
    root = storage.create_conversation("root")
    storage.create_delegation(root, "lead", "researcher", "still going", -1, [])
    error = error_of(call(manager, "entropic.resume_delegation", {"target": "researcher", "task": "t"}))
    assert error["error"] == "no_completed_delegation" and "researcher" in error["message"]


def test_resume_of_a_running_delegation_is_refused(make):
    manager = make(storage=True)
    storage = manager.storage
    root = storage.create_conversation("root")
    running, _ = storage.create_delegation(root, "lead", "researcher", "still going", -1, [])
    error = error_of(call(manager, "entropic.resume_delegation", {"delegation_id": running, "task": "t"}))
    assert error["error"] == "delegation_running"


def test_resume_id_and_target_must_agree(make):
    manager = make(storage=True)
    delegation_id = _completed_delegation(manager, target="coder")
    error = error_of(
        call(
            manager, "entropic.resume_delegation", {"delegation_id": delegation_id, "target": "researcher", "task": "t"}
        )
    )
    assert error["error"] == "invalid_args" and "coder" in error["message"]


def test_resume_cannot_resume_into_oneself(make):
    manager = make(storage=True)
    delegation_id = _completed_delegation(manager)
    error = error_of(
        call(
            manager, "entropic.resume_delegation", {"delegation_id": delegation_id, "task": "t"}, identity="researcher"
        )
    )
    assert error["error"] == "self_delegation"


def test_resume_without_storage_is_storage_unavailable(make):
    error = error_of(call(make(), "entropic.resume_delegation", {"target": "researcher", "task": "t"}))
    assert error["error"] == "storage_unavailable"


def test_pipeline_too_few_stages_wins_through_the_manager_too(make):
    error = error_of(call(make(), "entropic.pipeline", {"stages": ["wizard"], "task": "t"}))
    assert error["error"] == "invalid_args" and "less than 2 items" in error["message"]


def test_resume_never_reaches_another_scopes_delegation(make):
    manager = make(storage=True)
    storage = manager.storage
    a = storage.create_conversation("a", None, "tenant-a")
    b = storage.create_conversation("b", None, "tenant-b")
    theirs, _ = storage.create_delegation(b, "lead", "researcher", "their task", -1, [])
    storage.complete_delegation(theirs, "completed", "their result")
    # by target: tenant a has no completed delegation of its own
    error = error_of(call(manager, "entropic.resume_delegation", {"target": "researcher", "task": "t"}, conversation=a))
    assert error["error"] == "no_completed_delegation"
    # by id: answered like an unknown id, so the other tenant's id is not even confirmed
    by_id = error_of(
        call(manager, "entropic.resume_delegation", {"delegation_id": theirs, "task": "t"}, conversation=a)
    )
    unknown = error_of(
        call(manager, "entropic.resume_delegation", {"delegation_id": "nope", "task": "t"}, conversation=a)
    )
    assert by_id["error"] == unknown["error"] == "unknown_delegation"
    assert "their" not in by_id["message"]
    ours = call(manager, "entropic.resume_delegation", {"delegation_id": theirs, "task": "t"}, conversation=b)
    assert ours.response.directives[0].resume_from == theirs
