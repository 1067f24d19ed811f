"""followup: the seed's contract — {"results": [...]}, invalid_args, storage_unavailable, READ, no directives."""

from __future__ import annotations

import anyio
import orjson
import pytest
from entropic_mcp import AccessLevel, CallContext, ServerManager, config_from_dict
from entropic_mcp_entropic import EntropicServer
from entropic_support import call

FIELDS = {"delegation_id", "target_tier", "task", "summary", "completed_at"}


def record(manager, task: str, summary: str, target: str = "researcher", status: str = "completed") -> str:
    storage = manager.storage
    root = storage.create_conversation("root")
    delegation_id, _ = storage.create_delegation(root, "lead", target, task, -1, [])
    storage.complete_delegation(delegation_id, status, summary)
    return delegation_id


def results(outcome) -> list[dict]:
    assert not outcome.response.is_error, outcome.response.result
    assert outcome.response.directives == ()
    return orjson.loads(outcome.response.result)["results"]


def test_followup_is_read_only():
    assert EntropicServer().tools["followup"].required_access_level == AccessLevel.READ


def test_finds_a_completed_delegation_by_words_in_any_order_and_case(make):
    manager = make(storage=True)
    delegation_id = record(manager, "find the retry settings", "Exponential backoff is configured in retry.toml")
    found = results(call(manager, "entropic.followup", {"query": "RETRY.TOML exponential"}))
    assert [r["delegation_id"] for r in found] == [delegation_id]
    assert set(found[0]) == FIELDS
    assert found[0]["target_tier"] == "researcher" and found[0]["task"] == "find the retry settings"
    assert found[0]["completed_at"]


def test_failed_and_running_delegations_are_not_found(make):
    manager = make(storage=True)
    record(manager, "task", "backoff found", status="failed")
    storage = manager.storage
    storage.create_delegation(storage.create_conversation("r"), "lead", "researcher", "backoff running", -1, [])
    assert results(call(manager, "entropic.followup", {"query": "backoff"})) == []


def test_max_results_respected_and_defaults_to_three(make):
    manager = make(storage=True)
    for index in range(6):
        record(manager, f"task {index}", f"widget finding {index}")
    assert len(results(call(manager, "entropic.followup", {"query": "widget"}))) == 3
    assert len(results(call(manager, "entropic.followup", {"query": "widget", "max_results": 1}))) == 1
    assert len(results(call(manager, "entropic.followup", {"query": "widget", "max_results": 10}))) == 6


@pytest.mark.parametrize("needle", ["%", "_", ".*"])
def test_like_and_regex_characters_match_literally(make, needle):
    manager = make(storage=True)
    record(manager, "plain task", "nothing special here")
    literal = record(manager, "odd task", f"the marker {needle} appears here")
    found = results(call(manager, "entropic.followup", {"query": needle}))
    assert [r["delegation_id"] for r in found] == [literal]


@pytest.mark.parametrize("args", ["42", [], "junk", {"query": ""}, None, {"query": "   "}, {"query": ["a"]}])
def test_invalid_queries_are_invalid_args_through_the_pipeline(make, args):
    outcome = call(make(storage=True), "entropic.followup", args)
    assert outcome.response.is_error and outcome.response.directives == ()
    assert orjson.loads(outcome.response.result)["error"] == "invalid_args"


@pytest.mark.parametrize(
    "args",
    [
        "42",
        [],
        "junk",
        {"query": ""},
        None,
        {"query": "  "},
        {"query": ["a"]},
        {"query": "x", "max_results": 0},
        {"query": "x", "max_results": 11},
        {"query": "x", "max_results": "3"},
    ],
)
def test_invalid_queries_are_invalid_args_when_executed_directly(args):
    response = anyio.run(EntropicServer().execute, "followup", args, CallContext())
    assert response.is_error and response.directives == ()
    error = orjson.loads(response.result)
    assert error["error"] == "invalid_args" and error["message"]


def test_tool_validates_even_a_non_object_handed_to_it():
    from entropic_mcp import ToolError

    with pytest.raises(ToolError) as info:
        EntropicServer().tools["followup"].execute("junk", CallContext())  # type: ignore[arg-type]
    assert info.value.code == "invalid_args"


def test_no_backend_configured_is_storage_unavailable(make):
    outcome = call(make(storage=False), "entropic.followup", {"query": "anything"})
    error = orjson.loads(outcome.response.result)
    assert outcome.response.is_error and outcome.response.directives == ()
    assert error["error"] == "storage_unavailable" and "[storage]" in error["message"]


def test_no_manager_is_storage_unavailable():
    response = anyio.run(EntropicServer().execute, "followup", {"query": "x"}, CallContext())
    assert orjson.loads(response.result)["error"] == "storage_unavailable"


def test_a_backend_that_cannot_open_is_storage_unavailable(tmp_path):
    config = config_from_dict(
        {"storage": {"backend": "no-such-backend"}, "permissions": {"default": "allow"}}, root=tmp_path
    )
    manager = ServerManager(config, servers=[EntropicServer()])
    response = anyio.run(manager.execute, "entropic.followup", {"query": "x"}, CallContext())
    error = orjson.loads(response.result)
    assert error["error"] == "storage_unavailable" and "no-such-backend" in error["message"]


def test_an_integral_float_counts_as_an_integer(make):
    manager = make(storage=True)
    for index in range(3):
        record(manager, f"task {index}", f"gadget {index}")
    assert len(results(call(manager, "entropic.followup", {"query": "gadget", "max_results": 2.0}))) == 2


def test_followup_sees_only_the_callers_scope(make):
    """A conversation of one tenant never finds another tenant's delegations; a caller outside any
    stored conversation (an MCP client's conversation key) sees the default scope only."""
    manager = make(storage=True)
    storage = manager.storage
    found_ids = {}
    for scope in ("tenant-a", "tenant-b", "default"):
        root = storage.create_conversation(scope, None, scope)
        delegation_id, child = storage.create_delegation(root, "lead", "researcher", "secret plan", -1, [])
        storage.complete_delegation(delegation_id, "completed", f"secret of {scope}")
        found_ids[scope] = (root, child, delegation_id)
    for scope, (root, child, delegation_id) in found_ids.items():
        for conversation in (root, child):
            found = results(call(manager, "entropic.followup", {"query": "secret"}, conversation=conversation))
            assert [r["delegation_id"] for r in found] == [delegation_id], (scope, conversation)
    outsider = results(call(manager, "entropic.followup", {"query": "secret"}, conversation="http-session-x"))
    assert [r["delegation_id"] for r in outsider] == [found_ids["default"][2]]
