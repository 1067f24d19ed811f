"""Crash-safe file primitives: whole-file replacement and durable appends."""

from __future__ import annotations

import os
from pathlib import Path

from .._errors import StorageError


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` survive a crash (POSIX needs the directory synced)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory.

    A crash at any point leaves either the old file or the new one, never a mix.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise StorageError(f"{path}: could not write ({exc.strerror or exc}); the previous file is unchanged") from None
    fsync_dir(path.parent)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
