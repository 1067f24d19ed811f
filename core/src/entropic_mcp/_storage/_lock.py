"""The cross-process lock of a store: ``flock`` on a descriptor kept open.

``filelock.FileLock`` opens, checks and closes its file on every acquire (≈ 150–200 µs here),
more than the fsync every durable operation pays, so on POSIX the lock is taken with ``fcntl.flock``
on a descriptor opened once (≈ 3 µs). It is the same kind of lock ``filelock`` takes on POSIX, on
the same file. Elsewhere ``filelock`` is used as it is.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .._errors import StorageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class StoreLock:
    """An exclusive, non-reentrant lock on ``path`` shared by every process that opens it."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._pid = os.getpid()
        self._fallback = None
        if fcntl is None:  # pragma: no cover - Windows
            from filelock import FileLock

            self._fallback = FileLock(str(path), timeout=timeout)

    def _descriptor(self) -> int:
        # A forked child shares the parent's open file description, and with it the lock; give
        # it its own so the two exclude each other.
        if self._fd is None or self._pid != os.getpid():
            self._pid = os.getpid()
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise StorageError(f"{self.path}: cannot open the store lock ({exc.strerror})") from None
        return self._fd

    def acquire(self) -> None:
        if self._fallback is not None:  # pragma: no cover - Windows
            from filelock import Timeout

            try:
                self._fallback.acquire(poll_interval=0.001)
            except Timeout:
                raise StorageError(f"{self.path}: still locked by another process after {self.timeout} s") from None
            return
        fd = self._descriptor()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot lock the store ({exc.strerror})") from None
        deadline = time.monotonic() + self.timeout
        pause = 0.0002
        while True:
            # Polling (not a blocking flock) so a stuck holder turns into a timeout, not a hang.
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StorageError(f"{self.path}: still locked by another process after {self.timeout} s") from None

    def release(self) -> None:
        if self._fallback is not None:  # pragma: no cover - Windows
            self._fallback.release()
            return
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
