"""Approvals across workers (issue 27): signed request states, paused calls and "always" answers
in a store several workers share."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from entropic_mcp._calls import ApprovalRequest
from entropic_mcp._serve._approval import CURRENT, PAUSED_NAMESPACE, PausedCalls, ServeApprover
from test_guards_shared import DictStore

FORM = ("Allow the tool call probe.note (default ask)?", {"type": "object"})


def test_a_call_paused_on_one_worker_is_taken_once_by_another() -> None:
    store = DictStore()
    one, two = PausedCalls(lambda: store), PausedCalls(lambda: store)
    state, stored = one.pause("probe.note", {"text": "x"}, "conv", FORM)
    assert stored and len([k for k in store.docs if k[0] == PAUSED_NAMESPACE]) == 1
    assert two.key() == one.key()  # agreed through the store
    # Another call, another conversation or another tool cannot use it.
    assert two.take(state, "probe.note", {"text": "y"}, "conv") is None
    state, _ = one.pause("probe.note", {"text": "x"}, "conv", FORM)
    assert two.take(state, "probe.other", {"text": "x"}, "conv") is None
    state, _ = one.pause("probe.note", {"text": "x"}, "conv", FORM)
    assert two.take(state, "probe.note", {"text": "x"}, "other") is None
    state, _ = one.pause("probe.note", {"text": "x"}, "conv", FORM)
    assert two.take(state, "probe.note", {"text": "x"}, "conv") == FORM[0]
    assert one.take(state, "probe.note", {"text": "x"}, "conv") is None  # used once
    nonce = state.partition(".")[0]
    forged = f"{nonce}.{'0' * 32}"
    assert two.take(forged, "probe.note", {"text": "x"}, "conv") is None


def test_a_key_of_its_own_signs_states_other_workers_refuse() -> None:
    store = DictStore()
    one = PausedCalls(lambda: store, "key one")
    two = PausedCalls(lambda: store, "key two")
    state, _ = one.pause("probe.note", {}, "conv", FORM)
    assert two.take(state, "probe.note", {}, "conv") is None
    assert PausedCalls(lambda: store, "key one").take(state, "probe.note", {}, "conv") == FORM[0]


def test_the_key_comes_from_the_environment_before_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENTROPIC_MCP_STATE_KEY", "from env")
    store = DictStore()
    assert PausedCalls(lambda: store).key() == b"from env" and not store.docs


def test_without_a_shared_store_nothing_is_kept_and_only_this_process_knows_the_key() -> None:
    one, two = PausedCalls(lambda: None), PausedCalls(lambda: None)
    state, stored = one.pause("probe.note", {}, "conv", FORM)
    assert not stored and one.key() != two.key()
    assert one.take(state, "probe.note", {}, "conv") is None


class Asked:
    """A channel whose user gives ``decision`` and that counts the questions."""

    def __init__(self, decision: str = "always_allow") -> None:
        self.decision = decision
        self.questions = 0

    async def elicit(self, form: Any) -> Any:
        self.questions += 1
        return "accept", {"decision": self.decision}


def test_always_allow_answered_on_one_worker_holds_on_the_other() -> None:
    store = DictStore()
    first = ServeApprover(lambda: store, shared=True)
    second = ServeApprover(lambda: store, shared=True)
    request = ApprovalRequest(tool="probe.note", args={"text": "x"}, pattern="probe.note(x)")

    async def ask(approver: ServeApprover, channel: Asked) -> Any:
        token = CURRENT.set(channel)
        try:
            return await approver.entropic_mcp_approve_tool_call(request)
        finally:
            CURRENT.reset(token)

    # The second worker looked before the answer was given: it must look again, not trust its cache.
    once = Asked("allow_once")
    assert anyio.run(ask, second, once).answer == "allow_once" and once.questions == 1
    channel = Asked()
    assert anyio.run(ask, first, channel).answer == "allow_once" and channel.questions == 1  # never a local rule
    later = Asked()
    assert anyio.run(ask, second, later).answer == "allow_once" and later.questions == 0


def test_one_process_keeps_answers_without_a_subject_out_of_the_store() -> None:
    store = DictStore()
    approver = ServeApprover(lambda: store, shared=False)
    request = ApprovalRequest(tool="probe.note", args={}, pattern="probe.note")

    async def ask() -> Any:
        token = CURRENT.set(Asked())
        try:
            return await approver.entropic_mcp_approve_tool_call(request)
        finally:
            CURRENT.reset(token)

    assert anyio.run(ask).answer == "always_allow" and not store.docs  # the pipeline writes the local rule


def test_the_state_key_is_read_from_serve_and_never_shown(tmp_path: Any) -> None:
    from entropic_mcp import ConfigError, config_from_dict

    config = config_from_dict({"serve": {"state_key": "a deployment's key"}}, root=tmp_path)
    assert config.serve.state_key == "a deployment's key"
    assert "deployment's key" not in repr(config.serve)
    with pytest.raises(ConfigError, match="state_key"):
        config_from_dict({"serve": {"state_key": 42}}, root=tmp_path)


class RacedOnce(DictStore):
    """Another worker saves ``theirs`` under the same document just before this worker's first save."""

    def __init__(self, theirs: Any) -> None:
        super().__init__()
        self.theirs = theirs

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        if self.theirs is not None:
            theirs, self.theirs = self.theirs, None
            super().save_state(namespace, key, theirs, self.docs.get((namespace, key), (None, 0))[1])
        return super().save_state(namespace, key, value, version)


def test_a_worker_that_lost_the_race_for_the_key_uses_the_winners() -> None:
    store = RacedOnce("ab" * 32)
    assert PausedCalls(lambda: store).key() == ("ab" * 32).encode()
    assert store.saves == 1  # theirs; ours was refused and not tried again


def test_always_answers_two_workers_save_at_once_are_merged() -> None:
    from entropic_mcp._serve._approval import PERSONAL_NAMESPACE

    store = RacedOnce({"probe.other": "always_deny"})
    approver = ServeApprover(lambda: store, shared=True)
    approver.personal[("alice", "probe.note")] = "always_allow"
    approver._save("alice")
    assert store.docs[(PERSONAL_NAMESPACE, "alice")][0] == {
        "probe.other": "always_deny",
        "probe.note": "always_allow",
    }
