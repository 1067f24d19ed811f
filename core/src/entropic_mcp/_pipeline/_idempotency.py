"""Idempotency keys: a call retried with the key of an earlier one is answered once.

A client (or a host) names a call with a key of its own (over MCP, ``_meta["entropic-mcp/
idempotency-key"]``; in-process, ``CallContext.idempotency_key``). The first call with the key
claims a record in the store (namespace ``pipeline.idempotency``: one document per conversation
and key) before the pipeline runs it and stores the outcome there when it ends; a call with the
same key and the same tool and arguments, on any worker sharing the store, gets that outcome
without the tool running again. While the first is still running a retry waits for it (at most
``idempotency_wait_seconds``) and then says it is still running; the same key with another tool
or other arguments is refused. Only an outcome the tool produced is kept: a refusal before the
tool ran, a cancelled call and a call that raised leave nothing, so the retry runs. Records are
kept ``idempotency_seconds`` after the call started (then pruned: the key may be used again).

The 2026-07-28 protocol has no idempotency key of its own (only the ``idempotentHint`` tool
annotation): the key is an entropic-mcp ``_meta`` field, as the conversation key is.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from .._envelope import ServerResponse, directive_from_dict
from .._kinds import ResultKind
from ._outcome import CallOutcome

if TYPE_CHECKING:
    import asyncio

    from .._context import CallContext

log = logging.getLogger("entropic_mcp")

NAMESPACE = "pipeline.idempotency"
#: The ``_meta`` field of a ``tools/call`` that carries the key.
META_KEY = "entropic-mcp/idempotency-key"
MAX_KEY_CHARS = 256
#: Seconds between a waiting retry's looks at the first call's record.
POLL_SECONDS = 0.1
#: Seconds between prunes of the records past their time, by each process that claims keys.
PRUNE_EVERY = 300.0
#: Outcomes the tool did not produce: kept by no record (the retry runs the call).
_NOT_KEPT = frozenset(
    {
        ResultKind.CANCELLED,
        ResultKind.REJECTED_HOOK,
        ResultKind.REJECTED_LOOP,
        ResultKind.REJECTED_SCHEMA,
        ResultKind.REJECTED_ACCESS,
        ResultKind.REJECTED_DUPLICATE,
        ResultKind.REJECTED_PERMISSION,
    }
)

Run = Callable[[str, object, "CallContext"], Awaitable[CallOutcome]]


def key_in_meta(params: object) -> Any:
    """The key a request's ``_meta`` carries (None when it carries none; ``run`` checks the rest)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return meta.get(META_KEY) if isinstance(meta, Mapping) else None


def key_error(key: object) -> str | None:
    """What is wrong with a key a client sent (None: nothing)."""
    if not isinstance(key, str) or not key.strip():
        return f"the idempotency key must be a non-empty string, got {key!r:.60}"
    if len(key) > MAX_KEY_CHARS:
        return f"the idempotency key must be at most {MAX_KEY_CHARS} characters, got {len(key)}"
    return None


class Idempotency:
    """The records of idempotency keys, and calls run once per key.

    Args:
        store: the ``StateStore`` every worker shares (None: this process's memory).
        keep_seconds: how long a key's record is kept after its call started.
        wait_seconds: how long a retry waits for the first call with its key to end.
    """

    def __init__(self, store: Callable[[], Any] | None, *, keep_seconds: float, wait_seconds: float) -> None:
        self._store_of = store
        self._store: Any = None
        self.keep_seconds = keep_seconds
        self.wait_seconds = wait_seconds
        self._pruned = 0.0

    def store(self) -> Any:
        if self._store is None:
            from .._storage._memory import MemoryStates

            self._store = self._store_of() if self._store_of is not None else MemoryStates()
        return self._store

    async def run(self, run: Run, name: str, args: object, ctx: CallContext) -> CallOutcome:
        """``run(name, args, ctx)`` once for ``ctx.idempotency_key``; a retry gets the first outcome."""
        import asyncio  # not at import: a listing that never calls must not load it

        started = time.perf_counter()
        key = ctx.idempotency_key
        problem = key_error(key)
        if problem is not None:
            return _refusal(name, args, ctx, started, "invalid_idempotency_key", f"{problem}; send another key.")
        document = _document(ctx, str(key))
        fingerprint = _fingerprint(name, args)
        end = time.monotonic() + self.wait_seconds
        while True:
            claiming = asyncio.ensure_future(_off_loop(self._claim, document, fingerprint))
            try:
                verdict, record = await asyncio.shield(claiming)
            except asyncio.CancelledError:
                # Cancelled while the claim was being made: a claim made all the same is dropped.
                claiming.add_done_callback(self._drop_if_claimed(document))
                raise
            except Exception as exc:
                log.warning("idempotency key %r could not be checked: %s", key, exc)
                message = (
                    f"the store that keeps idempotency keys could not be reached ({exc}), so '{ctx.display(name)}' "
                    "was not run; call it again with the same key."
                )
                return _refusal(name, args, ctx, started, "storage_unavailable", message)
            if verdict == "claimed":
                return await self._first(run, name, args, ctx, document, record)
            if verdict == "mismatch":
                message = (
                    f"the idempotency key {key!r} was given to an earlier call of '{ctx.display(record['tool'])}' "
                    "with other arguments; a retry must repeat the call exactly. Use a new key for a new call."
                )
                return _refusal(name, args, ctx, started, "idempotency_key_reused", message)
            if verdict == "done":
                return _replayed(record, name, args, ctx, started)
            if time.monotonic() >= end:
                running = time.time() - float(record.get("started", time.time()))
                message = (
                    f"the call with the idempotency key {key!r} started {running:.0f} s ago is still running; it has "
                    "not been run again. Call again with the same key later to get its outcome (a new key would "
                    "run it a second time)."
                )
                return _refusal(name, args, ctx, started, "idempotency_key_in_flight", message)
            await asyncio.sleep(POLL_SECONDS)

    async def _first(
        self, run: Run, name: str, args: object, ctx: CallContext, document: str, claim: dict[str, Any]
    ) -> CallOutcome:
        import asyncio

        try:
            outcome = await run(name, args, ctx)
        except BaseException:
            await asyncio.shield(self._settle(document, claim, None))
            raise
        kept = None if outcome.kind in _NOT_KEPT else _kept(outcome)
        await asyncio.shield(self._settle(document, claim, kept))
        return outcome

    async def _settle(self, document: str, claim: dict[str, Any], kept: dict[str, Any] | None) -> None:
        """Store the outcome under the claim (``kept`` None: drop the claim, so a retry runs)."""
        import asyncio

        for attempt in range(5):
            try:
                await _off_loop(self._store_outcome, document, claim, kept)
                return
            except Exception as exc:  # the store failing: a retry then waits and reports the call running
                log.warning("idempotency record %s could not be settled (attempt %d): %s", document, attempt + 1, exc)
                await asyncio.sleep(0.5 * (attempt + 1))

    def _drop_if_claimed(self, document: str) -> Callable[[asyncio.Future[Any]], None]:
        def drop(claiming: asyncio.Future[Any]) -> None:
            import asyncio

            if not claiming.cancelled() and claiming.exception() is None and claiming.result()[0] == "claimed":
                claim = claiming.result()[1]
                asyncio.get_running_loop().create_task(self._settle(document, claim, None))

        return drop

    # -- records (store I/O: called in a worker thread) -------------------------------------------

    def _claim(self, document: str, fingerprint: str) -> tuple[str, dict[str, Any]]:
        """``("claimed" | "done" | "running" | "mismatch", record)`` for this call."""
        from .._errors import StateConflict

        store = self.store()
        self._prune(store)
        # A key is usually new: the first round saves as if nothing were stored (one round trip;
        # a conflict says something is, and the next rounds load it).
        record, version = None, 0
        first = True
        while True:
            if not first:
                record, version = store.load_state(NAMESPACE, document)
            first = False
            now = time.time()
            if isinstance(record, dict) and now - float(record.get("started", 0)) < self.keep_seconds:
                if record.get("fingerprint") != fingerprint:
                    return "mismatch", record
                return ("done" if record.get("state") == "done" else "running"), record
            claim = {
                "state": "running",
                "claim": secrets.token_hex(8),
                "fingerprint": fingerprint,
                "tool": fingerprint.partition("\x00")[0],
                "started": now,
            }
            try:
                saved = store.save_state(NAMESPACE, document, claim, version)
            except StateConflict:
                continue  # another call claimed (or settled) it first: look again
            return "claimed", {**claim, "version": saved}

    def _store_outcome(self, document: str, claim: dict[str, Any], kept: dict[str, Any] | None) -> None:
        from .._errors import StateConflict, StorageError

        store = self.store()
        # First from the version the claim saved (one round trip); after a conflict, as stored.
        record, version = {key: value for key, value in claim.items() if key != "version"}, claim["version"]
        for _ in range(20):
            if not isinstance(record, dict) or record.get("claim") != claim["claim"]:
                return  # pruned and claimed again meanwhile: that call's record is not ours
            value = None if kept is None else {**record, "state": "done", "outcome": kept}
            try:
                store.save_state(NAMESPACE, document, value, version)
            except StateConflict:
                record, version = store.load_state(NAMESPACE, document)
                continue
            except StorageError as exc:  # over the size a document may have: keep that it ran
                log.warning("idempotency record %s: the outcome is not kept whole: %s", document, exc)
                value = {**record, "state": "done", "outcome": _too_large(kept or {})}
                store.save_state(NAMESPACE, document, value, version)
            return

    def _prune(self, store: Any) -> None:
        now = time.monotonic()
        if now - self._pruned < PRUNE_EVERY or not hasattr(store, "prune_states"):
            return
        self._pruned = now
        try:
            store.prune_states(NAMESPACE, self.keep_seconds)
        except Exception as exc:  # housekeeping: a record past its time is ignored all the same
            log.warning("idempotency records past their time could not be pruned: %s", exc)


def _document(ctx: CallContext, key: str) -> str:
    """One key per caller: the same key in two conversations (or scopes) names two calls."""
    owner = orjson.dumps([ctx.scope, ctx.conversation_id, ctx.identity, key])
    return hashlib.sha256(owner).hexdigest()


def _fingerprint(name: str, args: object) -> str:
    try:
        text = orjson.dumps(args if args is not None else {}, option=orjson.OPT_SORT_KEYS, default=str)
    except TypeError:  # not JSON (the pipeline refuses it): its repr stands for it
        text = repr(args).encode("utf-8", "surrogatepass")
    return name + "\x00" + hashlib.sha256(text).hexdigest()


def _kept(outcome: CallOutcome) -> dict[str, Any]:
    response = outcome.response
    return {
        "kind": str(outcome.kind),
        "response": response.to_dict(),
        "structured": dict(response.structured) if response.structured is not None else None,
        "content": [dict(block) for block in response.content],
        "code": response.code,
        "permission": outcome.permission,
        "pattern": outcome.pattern,
    }


def _too_large(kept: dict[str, Any]) -> dict[str, Any]:
    text = (
        "The call ran (its idempotency key is recorded), but its outcome was too large to keep for a retry; "
        "look at the state it changed instead of running it again."
    )
    return {
        **kept,
        "response": {"result": text, "directives": [], "is_error": False},
        "structured": None,
        "content": [],
    }


def _replayed(record: dict[str, Any], name: str, args: object, ctx: CallContext, started: float) -> CallOutcome:
    kept = record["outcome"]
    envelope = kept["response"]
    response = ServerResponse(
        result=envelope["result"],
        directives=[directive_from_dict(d) for d in envelope.get("directives") or []],
        is_error=bool(envelope.get("is_error")),
        structured=kept.get("structured"),
        content=tuple(kept.get("content") or ()),
        code=kept.get("code"),
    )
    return _outcome(name, args, ctx, started, response, kept["kind"], kept.get("permission"), kept.get("pattern"))


def _refusal(name: str, args: object, ctx: CallContext, started: float, code: str, message: str) -> CallOutcome:
    response = ServerResponse.refusal(code, f"Error: {message}")
    return _outcome(name, args, ctx, started, response, ResultKind.ERROR, None, None)


def _outcome(
    name: str,
    args: object,
    ctx: CallContext,
    started: float,
    response: ServerResponse,
    kind: str,
    permission: str | None,
    pattern: str | None,
) -> CallOutcome:
    return CallOutcome(
        name=name,
        response=response,
        kind=kind,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        conversation_id=ctx.conversation_id,
        identity=ctx.identity,
        subject=ctx.subject,
        args=args if isinstance(args, dict) else {},
        permission=permission,
        pattern=pattern,
    )


async def _off_loop(function: Any, *args: Any) -> Any:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(function, *args)
