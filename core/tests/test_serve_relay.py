"""The relay of questions asked mid-call (``_serve/_relay.py``): two workers' ``Relay`` on one
in-memory store, the owner's heartbeat, and a relay's withdrawal."""

from __future__ import annotations

import asyncio
import time

import pytest
from entropic_mcp._serve import _relay
from entropic_mcp._serve._relay import NAMESPACE, WORKERS, OwnerGone, Relay
from entropic_mcp._storage._memory import MemoryStates

pytestmark = pytest.mark.anyio

QUESTION = ("nonce1", "probe.slow_ask", {"path": "/x"}, "conv")
ANSWER = {"entropic-mcp/approval": {"action": "accept"}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def pair(monkeypatch: pytest.MonkeyPatch) -> tuple[MemoryStates, Relay, Relay]:
    monkeypatch.setattr(_relay, "POLL", 0.01)
    monkeypatch.setattr(_relay, "HEARTBEAT", 0.02)
    monkeypatch.setattr(_relay, "STALE", 0.3)
    store = MemoryStates()
    return store, Relay(lambda: store, 600), Relay(lambda: store, 600)


async def test_an_answer_handed_over_comes_back_with_the_owners_next_round(
    pair: tuple[MemoryStates, Relay, Relay],
) -> None:
    store, owner, relay = pair
    assert owner.open(*QUESTION)
    assert relay.hand_over(*QUESTION, ANSWER)
    assert not relay.hand_over(*QUESTION, ANSWER)  # a state is used once
    waiting = asyncio.ensure_future(relay.wait("nonce1"))
    assert await owner.answer("nonce1", lambda: True) == ANSWER
    # The owner runs the call longer than the staleness bound, beating: the relay keeps waiting.
    beating = asyncio.ensure_future(owner.keep_alive(lambda: not waiting.done()))
    await asyncio.sleep(3 * _relay.STALE)
    assert not waiting.done()
    owner.publish("nonce1", {"resultType": "complete"})
    assert await waiting == {"resultType": "complete"}
    await beating
    assert store.load_state(NAMESPACE, "nonce1") == (None, 0)


async def test_a_stopped_owners_question_is_refused_at_once_and_removed(
    pair: tuple[MemoryStates, Relay, Relay],
) -> None:
    store, owner, relay = pair
    assert owner.open(*QUESTION)
    owner.retire()
    with pytest.raises(OwnerGone, match=r"is gone \(it stopped\).*nothing was run with this answer"):
        relay.hand_over(*QUESTION, ANSWER)
    assert store.load_state(NAMESPACE, "nonce1") == (None, 0)
    assert not relay.hand_over(*QUESTION, ANSWER)


async def test_a_killed_owners_question_is_refused_once_its_heartbeat_is_stale(
    pair: tuple[MemoryStates, Relay, Relay],
) -> None:
    store, owner, relay = pair
    assert owner.open(*QUESTION)
    assert relay.gone(store.load_state(NAMESPACE, "nonce1")[0], took=False) is None  # fresh
    beat, version = store.load_state(WORKERS, owner.worker)
    store.save_state(WORKERS, owner.worker, {**beat, "at": time.time() - 5}, version)
    with pytest.raises(OwnerGone, match=r"no heartbeat for 5 s"):
        relay.hand_over(*QUESTION, ANSWER)


async def test_an_owner_that_dies_after_taking_the_answer_is_noticed_within_the_bound(
    pair: tuple[MemoryStates, Relay, Relay],
) -> None:
    store, owner, relay = pair
    assert owner.open(*QUESTION)
    assert relay.hand_over(*QUESTION, ANSWER)
    assert await owner.answer("nonce1", lambda: True) == ANSWER
    started = time.monotonic()
    with pytest.raises(OwnerGone, match=r"running this call with your answer .* Check what it changed"):
        await relay.wait("nonce1")  # nothing beats: the owner is dead
    assert time.monotonic() - started < _relay.STALE + 1
    assert store.load_state(NAMESPACE, "nonce1") == (None, 0)


async def test_a_cancelled_relay_withdraws_the_answer(pair: tuple[MemoryStates, Relay, Relay]) -> None:
    _, owner, relay = pair
    assert owner.open(*QUESTION)
    assert relay.hand_over(*QUESTION, ANSWER)
    assert await owner.answer("nonce1", lambda: True) == ANSWER
    assert not owner.withdrawn("nonce1")
    waiting = asyncio.ensure_future(relay.wait("nonce1"))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert owner.withdrawn("nonce1")
