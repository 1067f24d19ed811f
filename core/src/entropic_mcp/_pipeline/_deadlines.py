"""Per-call deadlines: one watchdog per event loop instead of a timer per call."""

from __future__ import annotations

from typing import Any


class _Deadlines:
    """One watchdog per event loop that cancels calls past their deadline.

    A timer per call (what ``asyncio.timeout`` arms) costs more than the rest of the pipeline's
    bookkeeping; here a call only enters and leaves a dict, and one tick every
    ``RESOLUTION`` seconds — armed only while calls are in flight — cancels the late ones.
    """

    RESOLUTION = 0.02

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        #: task -> the deadline in effect for it (its innermost call's; the outer ones chained behind)
        self.calls: dict[Any, Deadline] = {}
        self.armed = False

    def tick(self) -> None:
        now = self.loop.time()
        for task, deadline in list(self.calls.items()):
            if deadline.end <= now and not deadline.fired:
                deadline.fired = True
                task.cancel()
        if self.calls:
            self.loop.call_later(self.RESOLUTION, self.tick)
        else:
            self.armed = False


#: asyncio, imported on the first deadline and kept: an import statement run on every call cost
#: more than the watchdog's own bookkeeping (listing tools must not pay for asyncio at all).
_asyncio: Any = None


def _deadlines() -> tuple[Any, _Deadlines]:
    """asyncio, and the running loop's watchdog (made on its first deadline)."""
    global _asyncio
    if _asyncio is None:
        import asyncio

        _asyncio = asyncio
    loop = _asyncio.get_running_loop()
    deadlines = getattr(loop, "_entropic_mcp_deadlines", None)
    if deadlines is None:
        deadlines = _Deadlines(loop)
        loop._entropic_mcp_deadlines = deadlines  # type: ignore[attr-defined]
    return _asyncio, deadlines


class Deadline:
    """The deadline of one call in the current task, from ``Deadline(...)`` until ``leave``.

    A tool may call the pipeline again in the same task: the innermost call's deadline is the one
    in effect, the outer one's again once it ends. The pipeline arms a deadline only when its
    call first waits, so an inner call may arm before the outer one: calls are ordered by when
    they started (``started``), not by when they armed.

    Args:
        started: when the call started (``time.monotonic()``).
        seconds: the time it has left.
    """

    __slots__ = ("deadlines", "end", "fired", "outer", "started", "task")

    def __init__(self, started: float, seconds: float) -> None:
        asyncio, deadlines = _deadlines()
        self.deadlines = deadlines
        self.task = task = asyncio.current_task(deadlines.loop)
        self.started = started
        self.end = deadlines.loop.time() + seconds
        self.fired = False
        inner = deadlines.calls.get(task)
        if inner is None or inner.started <= started:
            self.outer = inner
            deadlines.calls[task] = self
        else:  # a call made from inside this one armed first: it stays in effect until it ends
            while inner.outer is not None and inner.outer.started > started:
                inner = inner.outer
            self.outer, inner.outer = inner.outer, self
        if not deadlines.armed:
            deadlines.armed = True
            deadlines.loop.call_later(deadlines.RESOLUTION, deadlines.tick)

    def expired(self) -> bool:
        """Whether a cancellation that arrived is this deadline's (then it is taken back)."""
        return self.fired and self.task is not None and self.task.uncancel() == 0

    def leave(self) -> None:
        calls, task = self.deadlines.calls, self.task
        head = calls.get(task)
        if head is self:
            if self.outer is None:
                del calls[task]
            else:
                calls[task] = self.outer
            return
        while head is not None and head.outer is not self:
            head = head.outer
        if head is not None:
            head.outer = self.outer


#: An async tool holding the event loop this long in one step (without awaiting) is reported:
#: ``time.sleep`` or blocking I/O in an ``async def`` freezes every other call, and no timeout
#: can fire while it holds the loop.
LOOP_BLOCK_SECONDS = 1.0


#: ``StepTimer``'s ``yielded`` when the coroutine has not been started.
_UNSTARTED: Any = object()


class StepTimer:
    """Awaits a coroutine, timing each of its steps (the stretches it runs without yielding).

    ``longest`` is the longest step in seconds: how long the tool held the event loop at once.
    A caller that ran the first step itself (most tools finish in it, with no timer at all)
    passes what it yielded and how long it took.
    """

    __slots__ = ("coro", "longest", "yielded")

    def __init__(self, coro: Any, yielded: Any = _UNSTARTED, longest: float = 0.0) -> None:
        self.coro = coro
        self.longest = longest
        self.yielded = yielded

    def __await__(self) -> Any:
        from time import perf_counter

        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        if self.yielded is not _UNSTARTED:
            try:
                value = yield self.yielded
            except BaseException as exc:  # a cancellation thrown into the task: hand it to the tool
                error = exc
        while True:
            start = perf_counter()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self.longest = max(self.longest, perf_counter() - start)
                return stop.value
            except BaseException:
                self.longest = max(self.longest, perf_counter() - start)
                raise
            self.longest = max(self.longest, perf_counter() - start)
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # a cancellation thrown into the task: hand it to the tool
                value, error = None, exc
