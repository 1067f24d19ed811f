"""The audit trail in PostgreSQL: buffered in memory, written with one ``COPY`` per batch.

``record_tool_call`` runs for every call, so it only buffers (a few microseconds). The buffer is
written when it holds ``batch`` records, ``seconds`` after the first buffered record, before
``stats()`` counts, and on close — never inside another operation's transaction, so a delegation's
commit does not wait for the audit. A crash can lose the last moments of the audit trail;
messages and delegations are durable when their method returns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import orjson

log = logging.getLogger("entropic_mcp.storage.postgres")

#: Records kept while the server cannot be written to; the oldest are dropped beyond this.
MAX_BUFFERED = 100_000


class AuditBuffer:
    """Tool-call records waiting to be copied into ``tool_calls``."""

    def __init__(self, connection: Callable[[], AbstractContextManager[Any]], *, batch: int, seconds: float) -> None:
        self._connection = connection
        self._batch = batch
        self._seconds = seconds
        self._buffer: list[str] = []
        self._mutex = threading.Lock()
        self._writing = threading.Lock()  # one COPY at a time keeps the records in order
        self._timer: threading.Timer | None = None
        self._copying = False
        self._failed = False

    def __len__(self) -> int:
        return len(self._buffer)

    def add(self, record: dict[str, Any]) -> None:
        line = orjson.dumps(record, default=repr, option=orjson.OPT_NON_STR_KEYS).decode()
        with self._mutex:
            self._buffer.append(line)
            if len(self._buffer) > MAX_BUFFERED:
                del self._buffer[: len(self._buffer) - MAX_BUFFERED]
            full = len(self._buffer) >= self._batch and not self._copying
            if full:
                # Written by a thread of its own: the call being recorded never waits for a COPY.
                self._copying = True
                threading.Thread(target=self._flush_in_background, daemon=True).start()
            elif self._timer is None and self._seconds > 0:
                self._timer = threading.Timer(self._seconds, self.flush_quietly)
                self._timer.daemon = True
                self._timer.start()

    def _flush_in_background(self) -> None:
        try:
            while True:
                self.flush_quietly()
                with self._mutex:
                    # Records that filled another batch during the COPY go next; a failed COPY
                    # leaves them to the timer, the next batch or the close.
                    if len(self._buffer) < self._batch or self._failed:
                        return
        finally:
            with self._mutex:
                self._copying = False

    def flush(self) -> None:
        """Write what is buffered; on failure the records stay buffered and the error propagates."""
        with self._writing:
            with self._mutex:
                rows, self._buffer = self._buffer, []
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
            if not rows:
                return
            try:
                with (
                    self._connection() as conn,
                    conn.cursor() as cur,
                    cur.copy("COPY tool_calls (record) FROM STDIN") as copy,
                ):
                    for row in rows:
                        copy.write_row((row,))
            except BaseException:
                with self._mutex:
                    self._buffer[:0] = rows
                    if len(self._buffer) > MAX_BUFFERED:
                        del self._buffer[: len(self._buffer) - MAX_BUFFERED]
                raise

    def flush_quietly(self) -> None:
        try:
            self.flush()
            self._failed = False
        except Exception as exc:  # the next batch or flush retries; the audit never fails a call
            self._failed = True
            log.warning("audit trail not written yet (%d records kept): %s", len(self._buffer), exc)

    def cancel(self) -> None:
        with self._mutex:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
