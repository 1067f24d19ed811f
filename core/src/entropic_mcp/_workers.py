"""Worker threads for synchronous tools: a bounded pool per server, of daemon threads.

One shared pool let one plugin's stuck tools starve every other plugin's (40 calls that never
return filled it). Each server now has its own pool, bounded (``[servers.<name>] max_threads``,
default 8), and its threads are daemon threads, so a tool that never returns is abandoned at
exit instead of holding the process open (Python joins ``ThreadPoolExecutor`` threads at exit).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

DEFAULT_MAX_THREADS = 8
_IDLE_SECONDS = 30.0


class WorkerPool(Executor):
    """A bounded pool of daemon threads; idle threads exit after a while."""

    def __init__(self, max_workers: int = DEFAULT_MAX_THREADS, name: str = "entropic-mcp-tool") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self.name = name
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._shutdown = False

    @property
    def busy(self) -> int:
        """Threads running a call now."""
        with self._lock:
            return self._threads - self._idle

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if kwargs:
            raise TypeError("WorkerPool.submit takes positional arguments only")
        future: Future[Any] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._work.put((future, fn, args))
            if self._idle == 0 and self._threads < self.max_workers:
                self._threads += 1
                threading.Thread(target=self._run, name=f"{self.name}-{self._threads}", daemon=True).start()
        return future

    def _run(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            try:
                item = self._work.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                item = None
            with self._lock:
                self._idle -= 1
                if item is None:
                    self._threads -= 1
                    return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        # Never waits for running calls: a stuck tool is abandoned, not joined.
        with self._lock:
            self._shutdown = True
            threads = self._threads
        for _ in range(threads):
            self._work.put(None)
