"""Message segments: large message batches live in append-only files, not in memory.

``save_messages`` and ``save_snapshot`` batches bigger than ``inline_bytes`` are appended (one
JSON array per line, fsync'd) to ``messages-<n>.jsonl`` and the journal records only where they
are: ``[file name, offset, length]``. Conversations are read back with ``pread`` when loaded, so
the process holds indexes and small batches only, and compaction never rewrites message bodies.
Bytes left by a crash between the segment append and the journal append belong to no operation
and are never read.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

import orjson

from .._errors import StorageError
from ._files import fsync_dir, write_all

_SEGMENT = re.compile(r"messages-(\d{8})\.jsonl")


def _name(number: int) -> str:
    return f"messages-{number:08d}.jsonl"


class Segments:
    """Append (under the store lock) and read message batches."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._readers: dict[str, int] = {}

    def _current(self) -> tuple[str, bool]:
        numbers = [int(m.group(1)) for name in os.listdir(self.directory) if (m := _SEGMENT.fullmatch(name))]
        if not numbers:
            return _name(1), True
        last = max(numbers)
        try:
            size = os.path.getsize(self.directory / _name(last))
        except OSError:
            size = 0
        if size >= self.max_bytes:
            return _name(last + 1), True
        return _name(last), False

    def append(self, data: bytes) -> list[Any]:
        """Write ``data`` durably; returns its reference. The caller holds the store lock."""
        name, new = self._current()
        path = self.directory / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise StorageError(f"{path}: cannot open for writing ({exc.strerror}); nothing was changed") from None
        try:
            offset = os.fstat(fd).st_size
            try:
                write_all(fd, data + b"\n")
                os.fsync(fd)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, offset)
                raise StorageError(f"{path}: write failed ({exc.strerror or exc}); nothing was changed") from None
        finally:
            os.close(fd)
        if new:
            fsync_dir(self.directory)
        return [name, offset, len(data)]

    def read(self, ref: Any) -> list[Any]:
        """The batch ``ref`` points at; StorageError naming the file when it cannot be read."""
        if not (isinstance(ref, list) and len(ref) == 3 and isinstance(ref[0], str) and _SEGMENT.fullmatch(ref[0])):
            raise StorageError(f"{self.directory}: a message reference {ref!r} is malformed")
        name, offset, length = ref
        path = self.directory / name
        fd = self._readers.get(name)
        if fd is None:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError as exc:
                raise StorageError(
                    f"{path}: cannot read stored messages ({exc.strerror}); restore it from a backup"
                ) from None
            self._readers[name] = fd
        data = os.pread(fd, length, offset)
        try:
            if len(data) != length:
                raise ValueError(f"{length} bytes expected at byte {offset}, found {len(data)}")
            messages = orjson.loads(data)
            if not isinstance(messages, list):
                raise ValueError("not a list of messages")
        except (orjson.JSONDecodeError, ValueError) as exc:
            raise StorageError(
                f"{path}: stored messages at byte {offset} are unreadable ({exc}); the file was left as it is"
            ) from None
        return messages

    def close(self) -> None:
        for fd in self._readers.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._readers.clear()
