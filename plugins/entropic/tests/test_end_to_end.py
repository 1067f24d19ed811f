"""Delegation, follow-up and resume end to end: scripted models through the reference host,
a real ServerManager with the real entropic server, and the tinydb backend in tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from entropic_mcp.host import Host
from entropic_support import call

Turn = dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]]


class Script:
    """A model that plays its turns in order and remembers what it was shown."""

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.seen: list[list[dict[str, Any]]] = []
        self.tools: list[list[str]] = []

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        self.seen.append(messages)
        self.tools.append([t["name"] for t in tools])
        if not self.turns:
            raise AssertionError("the script ran out of turns")
        turn = self.turns.pop(0)
        return turn(messages) if callable(turn) else turn


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


SUMMARY = "Exponential backoff for retries is configured in config/retry.toml under [http]"


def test_lead_delegates_researcher_completes_record_completed_and_followup_finds_it(make):
    manager = make(storage=True)
    researcher = Script(tool("entropic.complete", summary=SUMMARY))
    lead = Script(
        tool("entropic.delegate", target="researcher", task="find where retries are configured"),
        lambda messages: tool("entropic.complete", summary="lead saw: " + messages[-1]["content"]),
    )
    result = Host(manager, {"lead": lead, "researcher": researcher}).run_sync("sort out retries")

    assert result.status == "completed" and SUMMARY in result.summary
    [delegation] = result.delegations
    assert delegation.status == "completed" and delegation.summary == SUMMARY and delegation.persisted
    record = manager.storage.load_delegation_with_messages(delegation.delegation_id)
    assert record["status"] == "completed" and record["summary"] == SUMMARY
    assert record["target_tier"] == "researcher"
    assert [m["role"] for m in record["messages"]][:2] == ["system", "user"]
    assert researcher.seen[0][1]["content"] == "find where retries are configured"
    assert "'researcher' tier" in researcher.seen[0][0]["content"]
    # the lead's conversation is stored too, with the delegation result in it
    stored = manager.storage.load_conversation(result.conversation_id)["messages"]
    assert any(SUMMARY in (m.get("content") or "") for m in stored)

    found = orjson.loads(call(manager, "entropic.followup", {"query": "TOML Retry exponential"}).response.result)
    assert [r["delegation_id"] for r in found["results"]] == [delegation.delegation_id]
    assert found["results"][0]["summary"] == SUMMARY


def test_resume_delegation_by_target_seeds_a_new_child_with_the_earlier_messages(make):
    manager = make(storage=True)
    first_child = Script(
        {
            "content": "looking",
            "tool_calls": [{"name": "entropic.todo", "arguments": {"action": "add", "content": "check retry.toml"}}],
        },
        tool("entropic.complete", summary=SUMMARY),
    )
    Host(
        manager,
        {
            "lead": Script(
                tool("entropic.delegate", target="researcher", task="find retries"),
                tool("entropic.complete", summary="ok"),
            ),
            "researcher": first_child,
        },
    ).run_sync("first")
    earlier = [m["content"] for m in first_child.seen[-1] if m["role"] != "system"]

    second_child = Script(tool("entropic.complete", summary="the jitter is 10%"))
    lead = Script(
        tool("entropic.resume_delegation", target="researcher", task="now find the jitter"),
        tool("entropic.complete", summary="done"),
    )
    result = Host(manager, {"lead": lead, "researcher": second_child}).run_sync("second")

    [resumed] = result.delegations
    assert resumed.resume_from and resumed.status == "completed"
    shown = second_child.seen[0]
    shown_contents = [m["content"] for m in shown]
    for content in earlier:  # everything the first child had, then the new task
        assert content in shown_contents
    assert shown_contents.index("now find the jitter") > shown_contents.index("find retries")
    assert sum(1 for m in shown if m["role"] == "system" and "tier" in m["content"]) == 1
    stored = manager.storage.load_delegation_with_messages(resumed.delegation_id)
    assert stored["messages"][: len(earlier) + 1][1]["content"] == "find retries"
    assert stored["summary"] == "the jitter is 10%"


def test_a_requires_context_tier_refuses_a_contextless_delegation_with_no_directives(make):
    manager = make(storage=True)
    lead = Script(
        tool("entropic.delegate", target="coder", task="fix the retry bug"),
        lambda messages: tool("entropic.complete", summary="refused: " + messages[-1]["content"]),
    )
    result = Host(manager, {"lead": lead}).run_sync("fix it")
    assert result.delegations == ()
    refusal = next(m for m in result.messages if m["role"] == "tool")
    assert refusal["is_error"] is True
    assert orjson.loads(refusal["content"])["error"] == "context_required"
    assert manager.storage.stats()["delegations"] == 0


def test_pipeline_runs_each_stage_with_the_previous_output(make):
    manager = make(storage=True)
    researcher = Script(tool("entropic.complete", summary="the bug is in retry.py line 40"))
    coder = Script(lambda messages: tool("entropic.complete", summary="fixed after reading: " + messages[1]["content"]))
    lead = Script(
        tool(
            "entropic.pipeline",
            stages=["researcher", "coder"],
            task="fix retries",
            context=[{"path": "retry.py", "lines": "30-50"}],
        ),
        lambda messages: tool("entropic.complete", summary=messages[-1]["content"]),
    )
    result = Host(manager, {"lead": lead, "researcher": researcher, "coder": coder}).run_sync("go")
    assert [d.target for d in result.delegations] == ["researcher", "coder"]
    assert all(d.status == "completed" for d in result.delegations)
    coder_task = coder.seen[0][1]["content"]
    assert "the bug is in retry.py line 40" in coder_task and "retry.py (lines 30-50)" in coder_task
    assert "pipeline researcher -> coder completed" in result.summary
    assert manager.storage.stats()["completed_delegations"] == 2


def test_a_child_that_runs_out_of_turns_is_recorded_failed(make):
    manager = make(storage=True)
    looping = Script(*[tool("entropic.todo", action="add", content=f"step {i}") for i in range(2)])
    lead = Script(
        tool("entropic.delegate", target="researcher", task="loop", max_turns=2),
        tool("entropic.complete", summary="gave up"),
    )
    result = Host(manager, {"lead": lead, "researcher": looping}).run_sync("x")
    [delegation] = result.delegations
    assert delegation.status == "failed"
    assert manager.storage.load_delegation_with_messages(delegation.delegation_id)["status"] == "failed"
    assert "2 turns" in delegation.summary


def test_the_child_runs_under_the_target_identity(make):
    manager = make(storage=True)
    child = Script(
        tool("entropic.delegate", target="researcher", task="myself"),
        tool("entropic.complete", summary="could not delegate to myself"),
    )
    lead = Script(tool("entropic.delegate", target="researcher", task="t"), tool("entropic.complete", summary="ok"))
    result = Host(manager, {"lead": lead, "researcher": child}).run_sync("x")
    child_run = result.delegations[0].result
    assert child_run is not None and child_run.identity == "researcher"
    refusal = next(m for m in child_run.messages if m["role"] == "tool")
    assert orjson.loads(refusal["content"])["error"] == "self_delegation"


def test_context_inspect_sees_the_hosts_saved_messages(make):
    manager = make(storage=True)
    seen: dict[str, Any] = {}

    def lead(messages, tools):
        if "inspect" not in seen:
            seen["inspect"] = True
            return tool("entropic.context_inspect")
        return tool("entropic.complete", summary="done")

    result = Host(manager, lead).run_sync("look at yourself")
    report = orjson.loads(next(m for m in result.messages if m["role"] == "tool")["content"])
    assert report["source"] == "storage"
    assert [m["role"] for m in report["messages"]] == ["system", "user", "assistant"]


@pytest.mark.parametrize("storage", [False])
def test_without_storage_delegation_still_runs_in_memory(make, storage):
    manager = make(storage=storage)
    lead = Script(tool("entropic.delegate", target="researcher", task="t"), tool("entropic.complete", summary="ok"))
    researcher = Script(tool("entropic.complete", summary="found"))
    result = Host(manager, {"lead": lead, "researcher": researcher}).run_sync("x")
    assert result.status == "completed"
    assert result.delegations[0].persisted is False and result.delegations[0].summary == "found"


def test_tenants_of_one_host_never_see_each_others_delegations(make):
    """A host serving two teams on one store: each team's follow-up finds its own delegations only."""
    manager = make(storage=True)

    def followup_then_report(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return tool("entropic.complete", summary="followup said: " + messages[-1]["content"])

    researcher = Script(tool("entropic.complete", summary=SUMMARY))
    lead_a = Script(
        tool("entropic.delegate", target="researcher", task="find where retries are configured"),
        tool("entropic.followup", query="retries exponential"),
        followup_then_report,
    )
    host = Host(manager, {"lead": lead_a, "researcher": researcher}, scope="team-a")
    team_a = host.run_sync("sort out retries")
    [delegation] = team_a.delegations
    assert manager.storage.scope_of(team_a.conversation_id) == "team-a"
    record = manager.storage.load_delegation_with_messages(delegation.delegation_id)
    assert record["scope"] == "team-a"
    assert manager.storage.scope_of(record["child_conversation_id"]) == "team-a"
    assert delegation.delegation_id in team_a.summary

    host.model = {"lead": Script(tool("entropic.followup", query="retries exponential"), followup_then_report)}
    team_b = host.run_sync("what about retries?", scope="team-b")
    assert manager.storage.scope_of(team_b.conversation_id) == "team-b"
    assert delegation.delegation_id not in team_b.summary and SUMMARY not in team_b.summary
    # the same question in a third run of team A still finds it
    host.model = {"lead": Script(tool("entropic.followup", query="retries exponential"), followup_then_report)}
    assert delegation.delegation_id in host.run_sync("again").summary


def test_a_host_scope_must_be_a_non_empty_string(make):
    manager = make(storage=True)
    for bad in ("", "   ", None, 3):
        with pytest.raises(ValueError, match="scope must be a non-empty string"):
            Host(manager, Script(), scope=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scope must be a non-empty string"):
        Host(manager, Script()).run_sync("x", scope="")
