"""The audit trail: one JSON line per tool call, appended in batches without fsync.

``record_tool_call`` runs for every call the pipeline makes, so it only buffers; the buffer is
written when it holds ``batch`` records, ``seconds`` after the first buffered record, when the
store performs any other write, and on close or interpreter exit. A crash can therefore lose the
last moments of the audit trail — unlike messages and delegations, which are durable when their
method returns.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import orjson

from .._errors import StorageError
from ._files import write_all
from ._lock import StoreLock

log = logging.getLogger("entropic_mcp.storage")

#: Records kept in memory while the file cannot be written; older ones are dropped beyond this.
MAX_BUFFERED = 100_000


class AuditLog:
    def __init__(self, path: Path, *, batch: int, seconds: float, lock_timeout: float) -> None:
        self.path = path
        self._lock = StoreLock(path.with_name(".audit.lock"), lock_timeout)
        self._lock_mutex = threading.Lock()  # the flock descriptor is shared by this process's threads
        self._batch = batch
        self._seconds = seconds
        self._buffer: list[bytes] = []
        self._mutex = threading.Lock()
        self._timer: threading.Timer | None = None
        self._counted_to = 0
        self._lines = 0
        self._closed = False

    def record(self, record: dict[str, Any]) -> None:
        line = orjson.dumps(record, default=repr, option=orjson.OPT_NON_STR_KEYS) + b"\n"
        with self._mutex:
            if self._closed:
                raise StorageError(f"{self.path}: the store is closed")
            self._buffer.append(line)
            if len(self._buffer) > MAX_BUFFERED:
                del self._buffer[: len(self._buffer) - MAX_BUFFERED]
            full = len(self._buffer) >= self._batch
            if not full and self._timer is None and self._seconds > 0:
                self._timer = threading.Timer(self._seconds, self._flush_quietly)
                self._timer.daemon = True
                self._timer.start()
        if full:
            self.flush()

    def _flush_quietly(self) -> None:
        try:
            self.flush()
        except StorageError as exc:
            log.warning("audit trail not written yet: %s", exc)

    def flush(self) -> None:
        """Append the buffered records (under the audit lock, so batches never interleave)."""
        with self._mutex:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._buffer:
                return
        with self._lock_mutex, self._lock:
            with self._mutex:
                pending, self._buffer = self._buffer, []
            if pending:
                self._append(pending)

    def _append(self, pending: list[bytes]) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            self._requeue(pending)
            raise StorageError(f"{self.path}: cannot open the audit trail ({exc.strerror})") from None
        try:
            size = os.fstat(fd).st_size
            # A writer killed mid-batch leaves a partial last line; start on a fresh line so only
            # that one record is unreadable.
            prefix = b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""
            write_all(fd, prefix + b"".join(pending))
        except OSError as exc:
            self._requeue(pending)
            raise StorageError(f"{self.path}: could not append to the audit trail ({exc.strerror})") from None
        finally:
            os.close(fd)

    def _requeue(self, pending: list[bytes]) -> None:
        with self._mutex:
            self._buffer[:0] = pending
            if len(self._buffer) > MAX_BUFFERED:
                del self._buffer[: len(self._buffer) - MAX_BUFFERED]

    def count(self) -> int:
        """Records in the file (every process's) plus this process's buffered ones."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._counted_to)
                while chunk := fh.read(1 << 20):
                    self._lines += chunk.count(b"\n")
                    self._counted_to += len(chunk)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot read the audit trail ({exc.strerror})") from None
        with self._mutex:
            return self._lines + len(self._buffer)

    def close(self) -> None:
        try:
            self.flush()
        finally:
            with self._mutex:
                self._closed = True
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
            with self._lock_mutex:
                self._lock.close()
