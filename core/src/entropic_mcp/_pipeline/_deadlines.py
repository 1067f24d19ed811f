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
        self.calls: dict[Any, list[Any]] = {}
        self.armed = False

    def add(self, task: Any, seconds: float) -> list[Any]:
        entry = [self.loop.time() + seconds, False]
        self.calls[task] = entry
        if not self.armed:
            self.armed = True
            self.loop.call_later(self.RESOLUTION, self.tick)
        return entry

    def tick(self) -> None:
        now = self.loop.time()
        for task, entry in list(self.calls.items()):
            if entry[0] <= now and not entry[1]:
                entry[1] = True
                task.cancel()
        if self.calls:
            self.loop.call_later(self.RESOLUTION, self.tick)
        else:
            self.armed = False


async def with_timeout(awaitable: Any, seconds: float) -> Any:
    """Await with a deadline; our cancellation becomes TimeoutError, anyone else's passes through."""
    import asyncio  # here, not at module level: listing tools must not pay for asyncio

    loop = asyncio.get_running_loop()
    deadlines = getattr(loop, "_entropic_mcp_deadlines", None)
    if deadlines is None:
        deadlines = _Deadlines(loop)
        loop._entropic_mcp_deadlines = deadlines  # type: ignore[attr-defined]
    task = asyncio.current_task()
    outer = deadlines.calls.get(task)  # a tool that calls the pipeline again, in the same task
    entry = deadlines.add(task, seconds)
    try:
        return await awaitable
    except asyncio.CancelledError:
        if entry[1] and task is not None and task.uncancel() == 0:
            raise TimeoutError from None
        raise
    finally:
        if outer is None:
            deadlines.calls.pop(task, None)
        else:
            deadlines.calls[task] = outer


#: An async tool holding the event loop this long in one step (without awaiting) is reported:
#: ``time.sleep`` or blocking I/O in an ``async def`` freezes every other call, and no timeout
#: can fire while it holds the loop.
LOOP_BLOCK_SECONDS = 1.0


class StepTimer:
    """Awaits a coroutine, timing each of its steps (the stretches it runs without yielding).

    ``longest`` is the longest step in seconds: how long the tool held the event loop at once.
    """

    __slots__ = ("coro", "longest")

    def __init__(self, coro: Any) -> None:
        self.coro = coro
        self.longest = 0.0

    def __await__(self) -> Any:
        from time import perf_counter

        coro = self.coro
        value: Any = None
        error: BaseException | None = None
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
