"""Answers to questions asked later in a call, handed to the worker that asked (2026-07-28).

A call that asks after it started running (a path outside the root, a delegation's sampling
turn, the approval of a child's tool call) is not run again from its start when the answer comes:
what ran before the question (the parent's ``delegate``, the child's tool calls) would run twice.
The call stays suspended on the worker that asked (the owner), as on one worker; on a store
several workers share the question is also kept there (namespace ``serve.relay``, one document
per request state), so the worker the client's retry reaches (the relay) hands the answer over:

1. the relay checks the request state's signature and that the owner is alive (below), writes
   the answer into the document (version-guarded: a state is used once) and waits;
2. the owner, which looks at its questions' documents every ``POLL`` seconds, marks the answer
   taken, resumes the call with it, and writes what the call did next into the document: its
   result, or its next question under a new request state;
3. the relay deletes the document and answers the retry with that.

A retry that reaches the owner itself deletes the document (version-guarded) and resumes the
call at once. A ``tasks/update`` is such a retry (``_tasks.py`` resumes a task's call with the
request state its record keeps), so a task's question is answered the same way on any worker.

Liveness: while it has questions or resumed calls in the store, the owner writes a heartbeat
(namespace ``serve.workers``, one document per worker process: the wall-clock time) every
``HEARTBEAT`` seconds, and deletes it when serve stops. A relay refuses a question whose owner
has no heartbeat, or one older than ``STALE`` seconds, with ``OwnerGone`` (a clear error: the
worker and its call are gone, call the tool again), at once; while it waits, it looks again every
``HEARTBEAT`` seconds, so an owner killed after it took the answer is noticed within ``STALE``
seconds too. An owner that does not take the answer within ``PICKUP`` seconds counts as gone as
well. A relay whose wait is cancelled (the client cancelled the request, ``tasks/cancel``)
withdraws the answer: the owner, which looks every ``CANCEL_POLL`` seconds while it runs the
resumed call, cancels it. Progress the resumed call reports stays on the owner (it has no request
to send it on).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("entropic_mcp.serve")

NAMESPACE = "serve.relay"
#: The owners' heartbeats: one document per serve process, ``{"at": <wall-clock time>}``.
WORKERS = "serve.workers"
#: Seconds between an owner's looks for answers, and a relay's looks for the owner's outcome.
POLL = 0.1
#: Seconds a relay waits for the owner to take the answer before it counts the owner gone.
PICKUP = 15.0
#: Seconds between an owner's heartbeats, and between a waiting relay's looks at it.
HEARTBEAT = 1.0
#: Seconds without a heartbeat after which a relay counts the owner gone (workers' clocks must
#: agree to well within this).
STALE = 10.0
#: Seconds between an owner's looks for a withdrawn answer while it runs the resumed call.
CANCEL_POLL = 0.5
#: Seconds a dead worker's heartbeat document is kept before a live worker prunes it.
FORGET_WORKERS = 3600.0


class OwnerGone(Exception):
    """The worker that asked (or runs the resumed call) stopped: the relay's answer to the retry."""

    def __init__(self, message: str, owner: str) -> None:
        super().__init__(message)
        self.owner = owner


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
        #: This process among the deployment's workers (what its questions name as their owner).
        self.worker = f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(3)}"
        self._beaten = False

    def _state_store(self) -> Any:
        from .._storage import StateStore

        store = self._store()
        return store if isinstance(store, StateStore) else None

    # -- the owner ---------------------------------------------------------------------------------

    def beat(self) -> None:
        """Write this worker's heartbeat (the wall-clock time relays compare with their own)."""
        from .._storage._update import update_document

        store = self._state_store()
        if store is not None:
            update_document(store, WORKERS, self.worker, lambda _: {"at": time.time(), "pid": os.getpid()})
            self._beaten = True

    def retire(self) -> None:
        """Delete this worker's heartbeat (serve is stopping): relays refuse its questions at once."""
        from .._storage._update import update_document

        store = self._state_store()
        if store is not None and self._beaten:
            update_document(store, WORKERS, self.worker, lambda _: None)
            self._beaten = False

    def open(self, nonce: str, name: str, arguments: Any, conversation: str) -> bool:
        """Keep a question in the store; False when there is no shared store or it failed."""
        store = self._state_store()
        if store is None:
            return False
        record = {
            "name": name,
            "arguments": arguments,
            "conversation": conversation,
            "owner": self.worker,
            "expires": time.time() + self.timeout,
            "answer": None,
            "taken": False,
            "result": None,
            "withdrawn": False,
        }
        try:
            self.beat()  # fresh before the client can send the answer anywhere
            store.save_state(NAMESPACE, nonce, record, 0)
        except Exception as exc:
            log.warning(
                "a question asked mid-call was not kept in the store (only this worker takes its answer): %s", exc
            )
            return False
        try:
            store.prune_states(NAMESPACE, self.timeout * 2)
            store.prune_states(WORKERS, FORGET_WORKERS)
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
        if record.get("taken") or record.get("withdrawn"):
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

    def withdrawn(self, nonce: str) -> bool:
        """While the owner runs the resumed call: did the relay withdraw the answer (or give up)?"""
        store = self._state_store()
        if store is None:
            return False
        record, version = store.load_state(NAMESPACE, nonce)
        return not isinstance(record, Mapping) or not version or bool(record.get("withdrawn"))

    def drop(self, nonce: str) -> None:
        """Delete the document: nobody waits for what the call does next."""
        from .._storage._update import update_document

        store = self._state_store()
        if store is not None:
            update_document(store, NAMESPACE, nonce, lambda _: None)

    def publish(self, nonce: str, result: Mapping[str, Any]) -> None:
        """What the resumed call did next, for the relay to answer with."""
        from .._storage._update import UNCHANGED, update_document

        def put(record: Any) -> Any:
            return {**record, "result": dict(result)} if isinstance(record, Mapping) else UNCHANGED

        store = self._state_store()
        if store is not None:
            update_document(store, NAMESPACE, nonce, put)

    # -- the relay ---------------------------------------------------------------------------------

    def gone(self, record: Mapping[str, Any], *, took: bool) -> OwnerGone | None:
        """``OwnerGone`` when the question's owner has no fresh heartbeat, else None."""
        owner = record.get("owner")
        if not isinstance(owner, str):
            return None  # kept by a worker that writes no heartbeat: the pickup timeout decides
        beat, _ = self._state_store().load_state(WORKERS, owner)
        at = beat.get("at") if isinstance(beat, Mapping) else None
        if not isinstance(at, (int, float)):
            return owner_gone(owner, "it stopped", took=took)
        silent = time.time() - at
        if silent > STALE:
            return owner_gone(owner, f"no heartbeat for {silent:.0f} s", took=took)
        return None

    def hand_over(self, nonce: str, name: str, arguments: Any, conversation: str, answer: Mapping[str, Any]) -> bool:
        """Write the answer for the owner; False when there is no such question (or it was answered).

        Raises ``OwnerGone`` (and deletes the question) when its owner is gone."""
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
        gone = self.gone(record, took=False)
        if gone is not None:
            try:
                store.save_state(NAMESPACE, nonce, None, version)
            except StateConflict:
                return False  # another retry got there first
            raise gone
        try:
            store.save_state(NAMESPACE, nonce, {**record, "answer": dict(answer)}, version)
        except StateConflict:
            return False  # another retry answered it, or the owner took the retry itself
        return True

    def outcome(self, nonce: str, picked_by: float, check: bool) -> dict[str, Any] | None:
        """One look: the owner's outcome (None: not yet); the document is deleted once read or given up.

        ``check``: look at the owner's heartbeat too. Raises ``OwnerGone`` once the relay gives up."""
        from .._errors import StateConflict

        store = self._state_store()
        record, version = store.load_state(NAMESPACE, nonce)
        if not isinstance(record, Mapping) or not version:
            raise owner_gone("?", "its question was removed from the store", took=True)
        result = record.get("result")
        took = bool(record.get("taken"))
        gone = None
        if not isinstance(result, Mapping):
            if not took and time.monotonic() > picked_by:
                gone = owner_gone(
                    str(record.get("owner", "?")), f"it did not take the answer in {PICKUP:g} s", took=False
                )
            elif check:
                gone = self.gone(record, took=took)
            if gone is None:
                return None
        try:
            store.save_state(NAMESPACE, nonce, None, version)
        except StateConflict:
            return None  # the owner took it or wrote meanwhile: look again
        if gone is not None:
            raise gone
        return dict(result)  # type: ignore[arg-type]

    def withdraw(self, nonce: str) -> None:
        """The relay stopped waiting (its request was cancelled): the owner is to stop the call."""
        from .._storage._update import UNCHANGED, update_document

        def change(record: Any) -> Any:
            if not isinstance(record, Mapping):
                return UNCHANGED
            if record.get("result") is not None:
                return None  # the call already answered: nobody reads it
            return {**record, "withdrawn": True}

        store = self._state_store()
        if store is not None:
            update_document(store, NAMESPACE, nonce, change)

    async def wait(self, nonce: str) -> dict[str, Any]:
        """The owner's outcome for an answer handed over; ``OwnerGone`` once the owner is gone.

        As long as the owner's heartbeat is fresh there is no deadline: a resumed round may run
        as long as the call would on one worker."""
        picked_by = time.monotonic() + PICKUP
        check_at = time.monotonic() + HEARTBEAT
        try:
            while True:
                check = time.monotonic() >= check_at
                if check:
                    check_at = time.monotonic() + HEARTBEAT
                try:
                    result = await _off_loop(self.outcome, nonce, picked_by, check)
                except OwnerGone:
                    raise
                except Exception as exc:
                    log.debug("relayed answer %s: the store did not answer: %s", nonce[:8], exc)
                    result = None
                if result is not None:
                    return result
                await asyncio.sleep(POLL)
        except asyncio.CancelledError:
            import anyio

            with anyio.CancelScope(shield=True):  # an anyio-cancelled request awaits nothing unshielded
                try:
                    await _off_loop(self.withdraw, nonce)
                except Exception as exc:
                    log.warning("relayed answer %s: its withdrawal was not stored: %s", nonce[:8], exc)
            raise

    async def keep_alive(self, busy: Callable[[], bool]) -> None:
        """Write the heartbeat every ``HEARTBEAT`` seconds while ``busy()`` (questions or resumed calls)."""
        import anyio.to_thread

        # Its own limiter: a beat never queues behind the store calls of the worker's busy tools.
        limiter = anyio.CapacityLimiter(1)
        while busy():
            await asyncio.sleep(HEARTBEAT)
            if not busy():
                return
            try:
                await anyio.to_thread.run_sync(self.beat, limiter=limiter)
            except Exception as exc:
                log.warning("the relay heartbeat was not stored (relays may count this worker gone): %s", exc)


def owner_gone(owner: str, why: str, *, took: bool) -> OwnerGone:
    """What the retry is told when the worker holding its call is gone."""
    if took:
        message = (
            f"The worker running this call with your answer ({owner}) is gone ({why}) before it reported what "
            "the call did; the call was lost there, finished or not. Check what it changed, then call the tool "
            "again if it is still needed."
        )
    else:
        message = (
            f"The worker that asked this question ({owner}) is gone ({why}), and the call waiting there for "
            "the answer went with it; nothing was run with this answer. Call the tool again (what the call did "
            "before it asked, such as a delegation's earlier tool calls, is not undone)."
        )
    return OwnerGone(message, owner)


async def _off_loop(function: Any, *args: Any) -> Any:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(function, *args)
