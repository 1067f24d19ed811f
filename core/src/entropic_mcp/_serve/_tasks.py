"""MCP Tasks (the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28) for ``tools/call``.

The extension lets the server answer a ``tools/call`` with a task handle (``resultType:
"task"``) instead of the result; the client polls ``tasks/get`` (the result comes inline once
``completed``), may ``tasks/cancel``, and answers ``input_required`` tasks with ``tasks/update``.
The server decides per request: only for a client that declares the extension on that request,
and here only for a call still running ``[serve] task_after_seconds`` after it started — a quick
call answers as usual, a long one becomes a task and goes on running in this worker.

The revision has no ``tasks/result`` (the final result rides on ``tasks/get``) and no
``tasks/list`` (SEP-2663: a list cannot be scoped safely): both answer -32601, Method not found,
as the extension requires of the first — no handler is registered for them.

The task's record lives in the store (namespace ``serve.tasks``, one document per task), so any
worker of a deployment answers ``tasks/get``; the worker running the call writes the outcome
there. A ``tasks/cancel`` received by another worker marks the record, and the owning worker,
which looks at its running tasks' records every ``CANCEL_POLL`` seconds, cancels the call. Every
record belongs to the conversation that created it (the conversation key, which under ``[auth]``
lies inside the caller's own scope): a task of another conversation is "not found", exactly as
an unknown id. Task ids are 128 random bits.

A call that asks the client something (an approval, a sampled delegation turn) after it became a
task moves the task to ``input_required`` with the question in ``inputRequests`` (its request
state stays in the record, server-side); the first ``tasks/update`` carrying ``inputResponses``,
on any worker, marks it ``working`` again and resumes the call there with the answers, as a
``tools/call`` retry with that request state would be (resumed where it waits when that worker
holds it; how other workers reach a call paused elsewhere is ``_approval.py``'s). A question
asked in the first ``task_after_seconds`` is asked as usual, before any task exists (the
extension's advice: resolve such rounds before creating the task).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, INTERNAL_ERROR, INVALID_PARAMS, RequestParams

log = logging.getLogger("entropic_mcp.serve")

EXTENSION = "io.modelcontextprotocol/tasks"
NAMESPACE = "serve.tasks"
#: Seconds a call runs before it becomes a task (a quicker one answers as a plain result): the
#: default of ``[serve] task_after_seconds``.
TASK_AFTER = 1.0
#: Seconds between the owning worker's looks for cancellations another worker received.
CANCEL_POLL = 0.5
POLL_INTERVAL_MS = 500
#: How long a task's record is kept after its last change (then pruned: "not found").
TTL_MS = 3_600_000
#: Seconds between prunes of the records past their TTL, by each worker that creates tasks.
PRUNE_EVERY = 600.0
MISSING_CAPABILITY = -32021
TERMINAL = ("completed", "failed", "cancelled")
#: Record fields that are the wire ``Task``; the rest (owner, cancel request) stay server-side.
_WIRE = (
    "taskId",
    "status",
    "statusMessage",
    "createdAt",
    "lastUpdatedAt",
    "ttlMs",
    "pollIntervalMs",
    "inputRequests",
    "result",
    "error",
)
#: A resumption: ``(what to call again, its request state, the client's responses)`` → the
#: next piece of the call's work (its result, or another ``input_required`` round).
Resume = Callable[[dict[str, Any], str, Any], Awaitable[dict[str, Any]]]


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel``."""

    task_id: str


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] | None = None


def declares_tasks(ctx: Any) -> bool:
    """Did the client declare the extension on this very request (per-request capabilities)?"""
    params = ctx.params
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, Mapping) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Tasks:
    """Task records in the store, and the calls of this worker that run as tasks."""

    def __init__(self, store: Callable[[], Any], *, after: float = TASK_AFTER) -> None:
        self._store_of = store
        self._store: Any = None
        self.after = after
        self.running: dict[str, asyncio.Task[Any]] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._writes: set[asyncio.Task[None]] = set()
        #: Tasks whose cancellation a client asked for (a call cancelled otherwise: serve stopping).
        self._cancel_asked: set[str] = set()
        #: Tasks of this worker whose call can be resumed after an input_required round.
        self._resumable: set[str] = set()
        self._pruned = 0.0

    def store(self) -> Any:
        if self._store is None:
            from .._storage import StateStore
            from .._storage._memory import MemoryStates

            try:
                candidate = self._store_of()
            except Exception as exc:  # no store to open: this process's memory holds the tasks
                log.warning("tasks kept in this process's memory: the store could not be opened: %s", exc)
                candidate = None
            self._store = candidate if isinstance(candidate, StateStore) else MemoryStates()
        return self._store

    # -- records (store I/O: called in a worker thread) -------------------------------------------

    def load(self, task_id: str, owner: str | None = None) -> tuple[dict[str, Any] | None, int]:
        value, version = self.store().load_state(NAMESPACE, task_id)
        if not isinstance(value, dict) or (owner is not None and value.get("owner") != owner):
            return None, version
        return value, version

    def create(self, owner: str, resume: dict[str, Any] | None = None) -> dict[str, Any]:
        now = _now()
        record = {
            "taskId": secrets.token_urlsafe(16),
            "owner": owner,
            "status": "working",
            "createdAt": now,
            "lastUpdatedAt": now,
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
            "cancel": False,
        }
        if resume is not None:  # what a tasks/update on any worker calls again with the answers
            record["resume"] = resume
        store = self.store()
        now_s = time.monotonic()
        if now_s - self._pruned >= PRUNE_EVERY and hasattr(store, "prune_states"):
            self._pruned = now_s
            try:
                store.prune_states(NAMESPACE, TTL_MS / 1000)
            except Exception as exc:  # pruning is housekeeping: the task is stored all the same
                log.warning("tasks: records past their TTL could not be pruned: %s", exc)
        store.save_state(NAMESPACE, record["taskId"], record, 0)
        return record

    def change(self, task_id: str, apply: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """Apply ``apply`` to the stored record (again on a conflict); None when there is none."""
        from .._errors import StateConflict
        from .._storage._update import UNCHANGED, update_document

        def update(record: Any) -> Any:
            if not isinstance(record, dict) or not apply(record):
                return UNCHANGED
            record["lastUpdatedAt"] = _now()
            return record

        try:
            record, _ = update_document(self.store(), NAMESPACE, task_id, update, attempts=20)
        except StateConflict:
            raise RuntimeError(f"task {task_id} kept changing under this worker") from None
        return record if isinstance(record, dict) else None

    def settle(self, task_id: str, fields: dict[str, Any]) -> None:
        def apply(record: dict[str, Any]) -> bool:
            if record["status"] in TERMINAL:
                return False
            if fields.get("status") != "input_required":  # the question, if any, was answered
                record.pop("inputRequests", None)
                record.pop("requestState", None)
            record.update(fields)
            return True

        self.change(task_id, apply)

    def cancels_requested(self, task_ids: list[str]) -> list[str]:
        found = []
        for task_id in task_ids:
            record, _ = self.load(task_id)
            if record is not None and record.get("cancel"):
                found.append(task_id)
        return found

    # -- tools/call as a task -------------------------------------------------------------------

    async def run(
        self, call: Callable[[], Awaitable[dict[str, Any]]], owner: str, resume: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The call's own result when it ends within ``after`` seconds, else a task handle.

        With ``resume`` (what to call again), a task whose call asks the client something moves
        to ``input_required``; ``update`` carries the answers back."""
        work = asyncio.ensure_future(call())
        try:
            done, _ = await asyncio.wait({work}, timeout=self.after)
        except BaseException:
            work.cancel()
            raise
        if done:
            return work.result()
        try:
            record = await _off_loop(self.create, owner, resume)
        except BaseException:
            work.cancel()
            raise
        task_id = record["taskId"]
        if resume is not None:
            self._resumable.add(task_id)
        self._track(task_id, work)
        return {"resultType": "task", **_wire(record)}

    def _track(self, task_id: str, work: asyncio.Task[Any]) -> None:
        self.running[task_id] = work
        work.add_done_callback(lambda finished: self._finished(task_id, finished))
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_cancels())

    def _finished(self, task_id: str, work: asyncio.Task[Any]) -> None:
        self.running.pop(task_id, None)
        if work.cancelled():
            asked = task_id in self._cancel_asked
            self._cancel_asked.discard(task_id)
            message = (
                "cancelled by tasks/cancel"
                if asked
                else "the worker running this call stopped (serve shut down) before it ended; call the tool again"
            )
            fields: dict[str, Any] = {"status": "cancelled", "statusMessage": message}
        elif isinstance(work.exception(), MCPError):
            error = work.exception().error  # type: ignore[union-attr]
            fields = {"status": "failed", "statusMessage": error.message, "error": error.model_dump(exclude_none=True)}
        elif work.exception() is not None:
            log.error("task %s failed", task_id, exc_info=work.exception())
            fields = {
                "status": "failed",
                "statusMessage": "the call failed inside the server",
                "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
            }
        elif work.result().get("resultType") == "input_required" and task_id in self._resumable:
            result = work.result()
            # Kept server-side: the request state is what the resumption presents, never shown.
            fields = {
                "status": "input_required",
                "inputRequests": result.get("inputRequests", {}),
                "requestState": result.get("requestState"),
            }
        else:
            self._resumable.discard(task_id)
            fields = {"status": "completed", "result": _completed(work.result())}
        write = asyncio.get_running_loop().create_task(self._write(task_id, fields))
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    async def _write(self, task_id: str, fields: dict[str, Any]) -> None:
        for attempt in range(5):
            try:
                await _off_loop(self.settle, task_id, fields)
                return
            except Exception as exc:  # the store failing: the outcome is all a poller will ever get
                log.warning("task %s: its outcome could not be stored (attempt %d): %s", task_id, attempt + 1, exc)
                await asyncio.sleep(1 + attempt)

    async def _watch_cancels(self) -> None:
        while self.running:
            await asyncio.sleep(CANCEL_POLL)
            try:
                wanted = await _off_loop(self.cancels_requested, list(self.running))
            except Exception as exc:
                log.warning("tasks: cancellations could not be read from the store: %s", exc)
                continue
            for task_id in wanted:
                work = self.running.get(task_id)
                if work is not None:
                    self._cancel_asked.add(task_id)
                    work.cancel()

    # -- the extension's methods ----------------------------------------------------------------

    async def get(self, task_id: str, owner: str) -> dict[str, Any]:
        record, _ = await _off_loop(self.load, task_id, owner)
        if record is None:
            raise _not_found()
        return _wire(record)

    async def cancel(self, task_id: str, owner: str) -> dict[str, Any]:
        def apply(record: dict[str, Any]) -> bool:
            if record.get("owner") != owner or record["status"] in TERMINAL or record.get("cancel"):
                return False
            if record["status"] == "input_required":  # nothing runs while it waits: cancelled now
                record.pop("inputRequests", None)
                record.pop("requestState", None)
                record.update(status="cancelled", statusMessage="cancelled by tasks/cancel")
            record["cancel"] = True
            return True

        record = await _off_loop(self.change, task_id, apply)
        if record is None or record.get("owner") != owner:
            raise _not_found()
        work = self.running.get(task_id)
        if work is not None:  # running here: no need to wait for the poll
            self._cancel_asked.add(task_id)
            work.cancel()
        return {}

    async def update(
        self, task_id: str, owner: str, responses: Any = None, resume: Resume | None = None
    ) -> dict[str, Any]:
        """Answer an ``input_required`` task: the first update with responses resumes its call in
        this worker (the record says how); others, and updates of a task not waiting, are
        acknowledged and ignored, as the extension says of responses that are not outstanding."""
        taken: dict[str, Any] = {}

        def apply(record: dict[str, Any]) -> bool:
            taken.clear()
            if (
                record.get("owner") != owner
                or record["status"] != "input_required"
                or not responses
                or "resume" not in record
                or resume is None
            ):
                return False
            taken["state"] = record.pop("requestState", None)
            record.pop("inputRequests", None)
            record["status"] = "working"
            return True

        record = await _off_loop(self.change, task_id, apply)
        if record is None or record.get("owner") != owner:
            raise _not_found()
        state = taken.get("state")
        if isinstance(state, str) and resume is not None:
            self._resumable.add(task_id)
            self._track(task_id, asyncio.ensure_future(resume(record["resume"], state, responses)))
        return {}

    async def close(self) -> None:
        """Cancel the calls still running as tasks (serve is stopping) and store that."""
        running = list(self.running.values())
        for work in running:
            work.cancel()
        if running:  # a cancelled call cleans up (kills its processes) before its outcome is stored
            await asyncio.wait(running, timeout=5)
        await asyncio.sleep(0)
        if self._writes:
            await asyncio.wait(list(self._writes), timeout=5)


def missing_capability() -> MCPError:
    return MCPError(
        code=MISSING_CAPABILITY,
        message="Missing required client capability",
        data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def _not_found() -> MCPError:
    return MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")


def _wire(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record[key] for key in _WIRE if key in record}


def _completed(result: dict[str, Any]) -> dict[str, Any]:
    """The CallToolResult a task carries; a call that wanted to ask the client becomes a tool error."""
    if result.get("resultType") == "input_required":
        message = (
            "this call needed an answer from the client (an approval or a sampled turn) after it became a "
            "task, and tasks cannot ask yet; call the tool again without the tasks extension to be asked"
        )
        return {"content": [{"type": "text", "text": message}], "isError": True}
    return {key: value for key, value in result.items() if key != "resultType"}


async def _off_loop(function: Any, *args: Any) -> Any:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(function, *args)
