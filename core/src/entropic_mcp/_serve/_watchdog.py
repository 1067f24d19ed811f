"""The loop-lag watchdog: a thread that notices when serve's event loop stops turning.

An ``async def`` tool that calls ``time.sleep`` or does blocking I/O holds the loop: every other
call waits and no timeout can fire. ``MCPServerBase`` logs such a tool once the step ends; this
watchdog says so while it still holds the loop (a tool that never yields would otherwise never be
named), from a thread that looks at the loop thread's stack.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from typing import Any

from .._pipeline._deadlines import LOOP_BLOCK_SECONDS
from .._server import MCPServerBase

log = logging.getLogger("entropic_mcp")

_RUN_CODE = MCPServerBase.execute.__code__


def holder(thread_id: int) -> str:
    """What the loop thread is running: the async tool (``server.tool``) or the innermost code."""
    frame = sys._current_frames().get(thread_id)
    innermost = frame
    while frame is not None:
        if frame.f_code is _RUN_CODE:
            server, tool = frame.f_locals.get("self"), frame.f_locals.get("tool")
            if server is not None and tool is not None:
                return f"async tool {server.name}.{tool.name}"
        frame = frame.f_back
    if innermost is None:
        return "unknown code"
    return f"code at {innermost.f_code.co_filename}:{innermost.f_lineno}"


class LoopWatchdog:
    """Beats on the running loop every ``interval`` s; a thread warns once per stall past ``threshold``."""

    def __init__(self, *, threshold: float = LOOP_BLOCK_SECONDS, interval: float = 0.25) -> None:
        self.threshold = threshold
        self.interval = interval
        self.stalls = 0
        self._beat = time.monotonic()
        self._stop = threading.Event()
        self._handle: Any = None
        self._loop_thread = 0

    def start(self) -> None:
        """Start on the running loop (call from a coroutine)."""
        loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

        def beat() -> None:
            self._beat = time.monotonic()
            self._handle = loop.call_later(self.interval, beat)

        beat()
        threading.Thread(target=self._watch, name="entropic-mcp-loop-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()

    def _watch(self) -> None:
        reported = False
        while not self._stop.wait(self.interval):
            lag = time.monotonic() - self._beat
            if lag < self.threshold:
                reported = False
                continue
            if reported:
                continue
            reported = True
            self.stalls += 1
            log.warning(
                "%s is holding the event loop (%.1f s so far): every other call waits and no timeout can fire "
                "(time.sleep or blocking I/O in an async def)",
                holder(self._loop_thread),
                lag,
            )
