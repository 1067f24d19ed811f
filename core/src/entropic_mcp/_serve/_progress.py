"""Progress from a running call (``ctx.report_progress``) to MCP ``notifications/progress``.

Tools report from the event loop or from a worker thread; notifications are sent in order by
one pump task per call. A slow client makes the pump skip ahead: progress is informational, and
keeping only the newest ``MAX_QUEUED`` reports bounds memory for a command that prints
millions of lines.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from typing import Any

log = logging.getLogger("entropic_mcp.serve")

MAX_QUEUED = 64
#: Seconds the call's answer waits for queued progress to go out first.
FLUSH_SECONDS = 1.0


class ProgressRelay:
    """A ``CallContext.progress`` callable that forwards to the current request's session.

    ``target`` is the ``ServerSession`` of the request now waiting for the call (a call that
    asked for approval on 2026-07-28 continues under the client's retried request).
    """

    def __init__(self, target: Any) -> None:
        self.target = target
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._queue: deque[tuple[float, float | None, str | None]] = deque(maxlen=MAX_QUEUED)
        self._wake = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._closed = False

    def __call__(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if threading.get_ident() == self._thread:
            self._put(progress, total, message)
        else:
            try:
                self._loop.call_soon_threadsafe(self._put, progress, total, message)
            except RuntimeError:  # the loop is gone: the call outlived serve
                pass

    def _put(self, progress: float, total: float | None, message: str | None) -> None:
        if self._closed:
            return
        self._queue.append((float(progress), None if total is None else float(total), message))
        self._wake.set()
        if self._pump is None:
            self._pump = self._loop.create_task(self._run())

    async def _run(self) -> None:
        while True:
            while self._queue:
                progress, total, message = self._queue.popleft()
                try:
                    await self.target.report_progress(progress, total, message)
                except Exception:
                    log.debug("a progress notification could not be sent", exc_info=True)
            if self._closed:
                return
            self._wake.clear()
            await self._wake.wait()

    async def close(self) -> None:
        """Send what is queued (for at most FLUSH_SECONDS), then stop."""
        self._closed = True
        self._wake.set()
        pump = self._pump
        if pump is not None and not pump.done():
            done, _ = await asyncio.wait({pump}, timeout=FLUSH_SECONDS)
            if not done:
                pump.cancel()

    def abort(self) -> None:
        """Stop at once (the call was cancelled; its progress no longer matters)."""
        self._closed = True
        if self._pump is not None:
            self._pump.cancel()


def progress_token(params: Any) -> object | None:
    """The request's ``_meta.progressToken`` (None when the client asked for no progress)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return None if isinstance(token, bool) or not isinstance(token, (str, int)) else token
