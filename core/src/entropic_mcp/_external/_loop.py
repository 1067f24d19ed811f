"""The pool's own event loop, in one background thread.

The SDK's client connections are bound to the event loop they were opened on, while a host may
call from any loop (``serve``'s, a fresh ``anyio.run`` per ``call_sync``) or from no loop at all
(``entropic-mcp tools`` listing synchronously). Every pool operation therefore runs on one
long-lived loop; callers hand work over and wait for it, and a caller's cancellation cancels the
work on the pool's side.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_LOCK = threading.Lock()
_SHARED: PoolLoop | None = None


class _Handoff:
    """Hands coroutines to ``loop`` from other threads; ``thread`` is the one that may not wait."""

    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    #: Named in the error when ``run_sync`` is called on ``thread`` (it would deadlock).
    _thread_role = "the pool's own thread"

    def here(self) -> bool:
        """Whether the caller runs on ``loop`` (then a coroutine is awaited in place)."""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop from any thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the pool loop from any event loop; cancelling the caller cancels it."""
        if self.here():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Block the calling thread (never ``thread``) until ``coro`` finishes."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError(f"run_sync called on {self._thread_role}")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None


class PoolLoop(_Handoff):
    """An asyncio loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._run, name="entropic-mcp-external", daemon=True)
        self.thread.start()
        self._started.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()

    @property
    def alive(self) -> bool:
        return self.thread.is_alive() and not self.loop.is_closed()


def shared_loop() -> PoolLoop:
    """The process's one pool loop, started on first use."""
    global _SHARED
    if _SHARED is None:
        with _LOCK:
            if _SHARED is None:
                _SHARED = PoolLoop()
    return _SHARED


class LocalLoop(_Handoff):
    """A host's own long-lived event loop (``serve``'s), adopted so calls need no thread hop.

    Operations from that loop await directly; from anywhere else they are handed over as with
    ``PoolLoop``. Only a loop that outlives the pool may be adopted: when it stops, so does the pool.
    """

    _thread_role = "the adopted loop's own thread"

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.thread = threading.current_thread()

    @property
    def alive(self) -> bool:
        return self.loop.is_running() and not self.loop.is_closed()
