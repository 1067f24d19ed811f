"""diagnose, inspect, context_inspect: the core's facts always; the host's through the state hook."""

from __future__ import annotations

import anyio
import orjson
import pytest
from entropic_mcp import CallContext, hookimpl
from entropic_mcp_entropic import EngineState, EntropicServer
from entropic_support import call


def data(outcome) -> dict:
    assert not outcome.response.is_error, outcome.response.result
    assert outcome.response.directives == ()
    return orjson.loads(outcome.response.result)


class Provider:
    def __init__(self, state: EngineState | None = None, fail: bool = False) -> None:
        self.state = state
        self.fail = fail
        self.calls: list[tuple[str, str | None]] = []

    @hookimpl
    def entropic_mcp_engine_state(self, conversation_id, identity):
        self.calls.append((conversation_id, identity))
        if self.fail:
            raise RuntimeError("engine is gone")
        return self.state


# -- diagnose ---------------------------------------------------------------------------------------


def test_diagnose_reports_servers_tools_history_and_metrics_without_a_provider(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "x"})
    call(manager, "entropic.todo", {"action": "remove", "index": 9})
    report = data(call(manager, "entropic.diagnose", {}))
    assert report["servers"][0]["name"] == "entropic"
    assert {"name": "entropic.followup", "access": "READ"} in report["tools"]
    assert [h["tool"] for h in report["history"]] == ["entropic.todo", "entropic.todo"]
    assert report["metrics"]["entropic.todo"] == {"ok": 1, "error": 1}
    assert report["state_provider"] is False and report["engine_state"] is None
    assert report["config"]["servers"]["entropic"]["tiers"] == ["lead", "researcher", "coder"]
    assert report["identities"]["coder"]["requires_context"] is True
    assert report["storage"] == {"backend": "none", "available": False}


def test_diagnose_history_limit_and_docs(make):
    manager = make()
    for phase in ("a", "b", "c"):
        call(manager, "entropic.phase_change", {"phase": phase})
    report = data(call(manager, "entropic.diagnose", {"history_limit": 2, "include_docs": True}))
    assert len(report["history"]) == 2
    assert all(t["description"] for t in report["tools"])
    assert data(call(manager, "entropic.diagnose", {"history_limit": 0}))["history"] == []


def test_diagnose_history_never_carries_argument_values(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "secret-value"})
    assert "secret-value" not in call(manager, "entropic.diagnose", {}).response.result


def test_diagnose_includes_the_providers_state(make):
    provider = Provider(
        EngineState(
            state={"phase": "plan", "turn": 3}, identities={"lead": {"model": "big"}}, config={"temperature": 0.2}
        )
    )
    manager = make(plugins=(provider,))
    report = data(call(manager, "entropic.diagnose", {}, identity="lead"))
    assert report["state_provider"] is True
    assert report["engine_state"] == {"phase": "plan", "turn": 3}
    assert report["host_config"] == {"temperature": 0.2}
    assert report["identities"]["lead"]["host"] == {"model": "big"}
    assert provider.calls == [("c1", "lead")]


def test_a_failing_provider_is_reported_not_raised(make):
    manager = make(plugins=(Provider(fail=True),))
    report = data(call(manager, "entropic.diagnose", {}))
    assert report["state_provider"] is False
    assert "engine is gone" in report["state_provider_error"]


def test_diagnose_reports_storage_stats(make):
    manager = make(storage=True)
    manager.storage.create_conversation("x")
    report = data(call(manager, "entropic.diagnose", {}))
    assert report["storage"]["available"] is True and report["storage"]["stats"]["conversations"] == 1


def test_diagnose_without_a_manager_still_reports_the_server():
    server = EntropicServer()
    response = anyio.run(server.execute, "diagnose", {}, CallContext())
    report = orjson.loads(response.result)
    assert report["servers"][0]["unavailable_tools"]["delegate"].startswith("no tiers configured")
    assert report["history"] == [] and report["metrics"] == {}


def test_diagnose_lists_unavailable_tools_with_their_reason(make):
    report = data(call(make(entropic={}), "entropic.diagnose", {}))
    assert set(report["servers"][0]["unavailable_tools"]) == {"delegate", "pipeline", "resume_delegation"}


# -- inspect -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["config", "identity", "tool", "state", "metrics", "history"])
def test_inspect_every_target_without_a_key(make, target):
    report = data(call(make(), "entropic.inspect", {"target": target}))
    assert report["target"] == target and target in report


def test_inspect_tool_by_name(make):
    value = data(call(make(), "entropic.inspect", {"target": "tool", "key": "entropic.delegate"}))["value"]
    assert value["access"] == "WRITE" and value["skip_duplicate_check"] is True
    assert value["inputSchema"]["properties"]["target"]["enum"] == ["lead", "researcher", "coder"]


def test_inspect_unknown_key_lists_the_available_ones(make):
    outcome = call(make(), "entropic.inspect", {"target": "identity", "key": "wizard"})
    error = orjson.loads(outcome.response.result)
    assert outcome.response.is_error and error["error"] == "unknown_key"
    assert error["available"] == ["coder", "lead", "researcher"]
    assert "coder, lead, researcher" in error["message"]


def test_inspect_metrics_and_history_by_tool(make):
    manager = make()
    call(manager, "entropic.phase_change", {"phase": "x"})
    assert data(call(manager, "entropic.inspect", {"target": "metrics", "key": "entropic.phase_change"}))["value"] == {
        "ok": 1
    }
    history = data(call(manager, "entropic.inspect", {"target": "history", "key": "entropic.phase_change"}))["value"]
    assert [h["tool"] for h in history] == ["entropic.phase_change"]
    missing = call(manager, "entropic.inspect", {"target": "history", "key": "entropic.nope"})
    assert orjson.loads(missing.response.result)["available"] == ["entropic.inspect", "entropic.phase_change"]


def test_inspect_state_without_a_provider_shows_the_todo_list(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "x"})
    state = data(call(manager, "entropic.inspect", {"target": "state"}))["state"]
    assert state["todo"] == [{"content": "x", "status": "pending"}] and state["state_provider"] is False


def test_inspect_state_key_from_the_provider(make):
    manager = make(plugins=(Provider(EngineState(state={"phase": "plan"})),))
    assert data(call(manager, "entropic.inspect", {"target": "state", "key": "phase"}))["value"] == "plan"


def test_inspect_config_section(make):
    value = data(call(make(), "entropic.inspect", {"target": "config", "key": "pipeline"}))["value"]
    assert value["max_tool_calls_per_turn"] == 10


def test_inspect_unknown_target_is_invalid_args():
    response = anyio.run(EntropicServer().execute, "inspect", {"target": "soul"}, CallContext())
    assert orjson.loads(response.result)["error"] == "invalid_args"


# -- context_inspect ---------------------------------------------------------------------------------------


def test_context_inspect_from_storage(make):
    manager = make(storage=True)
    storage = manager.storage
    conversation = storage.create_conversation("t")
    storage.save_messages(
        conversation, [{"role": "user", "content": "x" * 400}, {"role": "assistant", "content": "short answer"}]
    )
    report = data(call(manager, "entropic.context_inspect", {}, conversation=conversation))
    assert report["source"] == "storage" and report["total_messages"] == 2
    first = report["messages"][0]
    assert first["role"] == "user" and first["tokens"] == 100 and first["preview"].endswith("…")
    assert len(first["preview"]) == 121
    last = data(call(manager, "entropic.context_inspect", {"max_messages": 1}, conversation=conversation))
    assert [m["preview"] for m in last["messages"]] == ["short answer"]


def test_context_inspect_prefers_the_provider(make):
    provider = Provider(EngineState(messages=[{"role": "system", "content": "be brief", "tokens": 9}]))
    report = data(call(make(plugins=(provider,)), "entropic.context_inspect", {}))
    assert report["source"] == "state_provider"
    assert report["messages"] == [{"index": 0, "role": "system", "preview": "be brief", "tokens": 9}]


def test_context_inspect_with_no_source_says_so(make):
    outcome = call(make(), "entropic.context_inspect", {})
    error = orjson.loads(outcome.response.result)
    assert error["error"] == "context_unavailable" and "[storage]" in error["message"]


def test_context_inspect_unknown_conversation(make):
    outcome = call(make(storage=True), "entropic.context_inspect", {}, conversation="not-stored")
    assert orjson.loads(outcome.response.result)["error"] == "context_unavailable"


def test_diagnose_beside_other_calls_in_one_batch(make):
    manager = make(storage=True)
    calls = [
        ("entropic.diagnose", {}),
        ("entropic.followup", {"query": "a"}),
        ("entropic.inspect", {"target": "history"}),
        ("entropic.followup", {"query": "b"}),
        ("entropic.context_inspect", {}),
    ]
    batch = anyio.run(manager.execute_batch, calls, CallContext(conversation_id="c1"))
    assert [o.name for o in batch.outcomes] == [name for name, _ in calls]
    assert all(not o.response.is_error for o in batch.outcomes[:4])
