"""Answers to questions asked later in a call, handed to the worker that asked (2026-07-28).

A call that asks after it started running (a path outside the root, a delegation's sampling
turn, the approval of a child's tool call) is not run again from its start when the answer comes:
what ran before the question (the parent's ``delegate``, the child's tool calls) would run twice.
The call stays suspended on the worker that asked (the owner), as on one worker; on a store
several workers share the question is also kept there (namespace ``serve.relay``, one document
per request state), so the worker the client's retry reaches (the relay) hands the answer over:

1. the relay checks the request state's signature, writes the answer into the document
   (version-guarded: a state is used once) and waits;
2. the owner, which looks at its questions' documents every ``POLL`` seconds, marks the answer
   taken, resumes the call with it, and writes what the call did next into the document: its
   result, or its next question under a new request state;
3. the relay deletes the document and answers the retry with that.

A retry that reaches the owner itself deletes the document (version-guarded) and resumes the
call at once. An owner that does not take the answer within ``PICKUP`` seconds (stopped, killed,
cut off) is gone: the relay deletes the document and refuses the state, and the client calls the
tool again. Progress the resumed call reports stays on the owner (it has no request to send it on).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("entropic_mcp.serve")

NAMESPACE = "serve.relay"
#: Seconds between an owner's looks for answers, and a relay's looks for the owner's outcome.
POLL = 0.1
#: Seconds a relay waits for the owner to take the answer before it counts the owner gone.
PICKUP = 15.0


def wire_responses(responses: Mapping[str, Any] | None) -> dict[str, Any]:
    """A retry's ``inputResponses`` as JSON values (what the store keeps)."""
    out: dict[str, Any] = {}
    for key, value in (responses or {}).items():
        if hasattr(value, "model_dump"):
            value = value.model_dump(by_alias=True, mode="json", exclude_none=True)
        out[str(key)] = value
    return out


class Relay:
    """The ``serve.relay`` documents of one worker (``store``: the shared ``StateStore``, or None)."""

    def __init__(self, store: Callable[[], Any], timeout: float) -> None:
        self._store = store
        self.timeout = timeout

    def _state_store(self) -> Any:
        from .._storage import StateStore

        store = self._store()
        return store if isinstance(store, StateStore) else None

    # -- the owner ---------------------------------------------------------------------------------

    def open(self, nonce: str, name: str, arguments: Any, conversation: str) -> bool:
        """Keep a question in the store; False when there is no shared store or it failed."""
        store = self._state_store()
        if store is None:
            return False
        record = {
            "name": name,
            "arguments": arguments,
            "conversation": conversation,
            "expires": time.time() + self.timeout,
            "answer": None,
            "taken": False,
            "result": None,
        }
        try:
            store.save_state(NAMESPACE, nonce, record, 0)
        except Exception as exc:
            log.warning(
                "a question asked mid-call was not kept in the store (only this worker takes its answer): %s", exc
            )
            return False
        try:
            store.prune_states(NAMESPACE, self.timeout * 2)
        except Exception as exc:
            log.debug("expired relayed questions not pruned: %s", exc)
        return True

    def claim(self, nonce: str) -> bool:
        """The retry reached the owner: delete the document unless another worker's retry answered first."""
        from .._errors import StateConflict

        store = self._state_store()
        if store is None:
            return True
        try:
            record, version = store.load_state(NAMESPACE, nonce)
            if not isinstance(record, Mapping) or not version:
                return True  # never kept (the store failed at the question): this worker alone has it
            if record.get("answer") is not None:
                return False
            store.save_state(NAMESPACE, nonce, None, version)
        except StateConflict:
            return False
        return True

    def take(self, nonce: str) -> tuple[bool, dict[str, Any] | None]:
        """One look: (still waiting, the answer a relay wrote, now marked taken)."""
        from .._errors import StateConflict

        store = self._state_store()
        if store is None:
            return False, None
        record, version = store.load_state(NAMESPACE, nonce)
        if not isinstance(record, Mapping) or not version:
            return False, None  # answered here, given up by a relay, or pruned
        answer = record.get("answer")
        if answer is None:
            return record.get("expires", 0) >= time.time(), None
        if record.get("taken"):
            return False, None
        try:
            store.save_state(NAMESPACE, nonce, {**record, "taken": True}, version)
        except StateConflict:
            return True, None  # the relay gave up meanwhile (the next look sees it gone)
        return False, dict(answer)

    async def answer(self, nonce: str, still: Callable[[], bool]) -> dict[str, Any] | None:
        """The answer another worker hands over, once it comes (None: none will come).

        ``still`` says whether the call still waits for it here; once it does not (answered
        here, ended), the document is deleted so no relay waits for an owner that will not come.
        """
        while True:
            if not still():
                try:
                    await _off_loop(self.claim, nonce)
                except Exception as exc:
                    log.debug("relayed question %s not deleted: %s", nonce[:8], exc)
                return None
            try:
                waiting, answer = await _off_loop(self.take, nonce)
            except Exception as exc:
                log.debug("relayed question %s: the store did not answer: %s", nonce[:8], exc)
                waiting, answer = True, None
            if answer is not None or not waiting:
                return answer
            await asyncio.sleep(POLL)

    def publish(self, nonce: str, result: Mapping[str, Any]) -> None:
        """What the resumed call did next, for the relay to answer with."""
        from .._storage._update import UNCHANGED, update_document

        def put(record: Any) -> Any:
            return {**record, "result": dict(result)} if isinstance(record, Mapping) else UNCHANGED

        store = self._state_store()
        if store is not None:
            update_document(store, NAMESPACE, nonce, put)

    # -- the relay ---------------------------------------------------------------------------------

    def hand_over(self, nonce: str, name: str, arguments: Any, conversation: str, answer: Mapping[str, Any]) -> bool:
        """Write the answer for the owner; False when there is no such question (or it was answered)."""
        from .._errors import StateConflict

        store = self._state_store()
        if store is None:
            return False
        record, version = store.load_state(NAMESPACE, nonce)
        if (
            not isinstance(record, Mapping)
            or not version
            or record.get("answer") is not None
            or record.get("name") != name
            or record.get("arguments") != arguments
            or record.get("conversation") != conversation
            or not isinstance(record.get("expires"), (int, float))
            or record["expires"] < time.time()
        ):
            return False
        try:
            store.save_state(NAMESPACE, nonce, {**record, "answer": dict(answer)}, version)
        except StateConflict:
            return False  # another retry answered it, or the owner took the retry itself
        return True

    def outcome(self, nonce: str, picked_by: float) -> tuple[bool, dict[str, Any] | None]:
        """One look: (keep waiting, the owner's outcome); the document is deleted once read or given up."""
        from .._errors import StateConflict

        store = self._state_store()
        record, version = store.load_state(NAMESPACE, nonce)
        if not isinstance(record, Mapping) or not version:
            return False, None
        result = record.get("result")
        given_up = not record.get("taken") and time.monotonic() > picked_by
        if result is None and not given_up:
            return True, None
        try:
            store.save_state(NAMESPACE, nonce, None, version)
        except StateConflict:
            return True, None  # the owner took it or wrote meanwhile: look again
        return False, dict(result) if isinstance(result, Mapping) else None

    async def wait(self, nonce: str) -> dict[str, Any] | None:
        """The owner's outcome for an answer handed over (None: the owner is gone)."""
        picked_by = time.monotonic() + PICKUP
        deadline = time.monotonic() + self.timeout + PICKUP
        while time.monotonic() < deadline:
            try:
                waiting, result = await _off_loop(self.outcome, nonce, picked_by)
            except Exception as exc:
                log.debug("relayed answer %s: the store did not answer: %s", nonce[:8], exc)
                waiting, result = True, None
            if not waiting:
                return result
            await asyncio.sleep(POLL)
        return None


async def _off_loop(function: Any, *args: Any) -> Any:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(function, *args)
