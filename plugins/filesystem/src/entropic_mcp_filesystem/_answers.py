"""Whole glob answers remembered with what decided them, and re-validated before every use.

A glob's matches depend on nothing but the pattern, where the walk starts, the ignore rules that
apply there, and the listings and ignore files of the directories it visits. A walk that read
every one of those directories records them in visiting order (a "trace"): each directory's
(device, inode, mtime, ctime) and the stat key of its ``.gitignore``. Answering again from the
trace opens the same directories the same way a walk does (relative to the verified parent,
``O_NOFOLLOW``), takes one ``fstat`` each and one ``stat`` per ignore file, and uses the stored
answer only if every one of them is exactly as recorded; the first difference falls back to
the walk. Adding, removing or renaming an entry changes the directory's timestamps, an edit of
an ignore file changes its key, a mount changes the device, a ``chmod`` the ctime.

The rules that make a listing safe to keep (``_dircache``) hold for every directory of a trace:
recorded only when each directory's timestamps and each ignore file's were older than the walk
by ``RACY_MARGIN_NS`` and on a filesystem in ``TRUSTED_FS``; a walk that was cut short
(entry limit, depth, cancellation) or could not open a directory it listed records nothing.

Answers live with the listings in the server's ``IgnoreCache`` (a few, LRU, bounded by the
names they hold) and in the store on disk (``_dirstore``), so a new server's first glob of a
pattern an earlier server answered takes one ``fstat`` per directory instead of a walk.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ._fsio import DIR_FLAGS

#: (depth below the walk's top (0: the top), name, device, inode, mtime_ns, ctime_ns,
#: stat key of the directory's .gitignore or None when its listing holds none)
TraceRecord = tuple[int, str, int, int, int, int, "tuple[int, ...] | None"]
#: (the answer's key, its trace, the matches joined by NUL)
AnswerRecord = tuple[Any, list[TraceRecord], str]

MAX_ANSWERS = 8
#: Paths held over all remembered answers; a larger answer is not remembered.
MAX_ANSWER_NAMES = 400_000
GITIGNORE = ".gitignore"


class Trace:
    """What one walk visited, in order; ``ok`` turns False at the first thing that rules it out."""

    __slots__ = ("_device", "newest", "ok", "records", "trusted")

    def __init__(self, started: int, margin_ns: int, trusted: Callable[[int], bool]) -> None:
        self.records: list[TraceRecord] = []
        self.ok = True
        #: The newest timestamp a directory may carry: older than the walk by the racy margin.
        self.newest = started - margin_ns
        self.trusted = trusted
        self._device = -1  # the last device found trusted (a walk seldom leaves its filesystem)

    def directory(self, depth: int, name: str, st: os.stat_result, ignore: tuple[int, ...] | None) -> None:
        if not self.ok:
            return
        mtime, ctime, dev = st.st_mtime_ns, st.st_ctime_ns, st.st_dev
        if mtime > self.newest or ctime > self.newest:
            self.fail()
            return
        if dev != self._device:
            if not self.trusted(dev):
                self.fail()
                return
            self._device = dev
        self.records.append((depth, name, dev, st.st_ino, mtime, ctime, ignore))

    def fail(self) -> None:
        self.ok = False
        self.records = []


def still_valid(trace: list[TraceRecord], top_fd: int) -> bool:
    """Is every directory and ignore file of ``trace`` under ``top_fd`` exactly as it was recorded?"""
    if not trace or trace[0][0] != 0:
        return False
    open_fds: list[int] = [top_fd]  # open_fds[d]: the directory of depth d on the current branch
    first = True
    try:
        for depth, name, dev, ino, mtime, ctime, ignore in trace:
            if first:
                fd = top_fd
                first = False
            else:
                if depth < 1:
                    return False  # a malformed trace: the top twice
                while len(open_fds) > depth:
                    os.close(open_fds.pop())
                if len(open_fds) != depth:
                    return False  # a malformed trace: a depth skipped
                fd = os.open(name, DIR_FLAGS, dir_fd=open_fds[-1])
                open_fds.append(fd)
            st = os.fstat(fd)
            if st.st_mtime_ns != mtime or st.st_ctime_ns != ctime or st.st_ino != ino or st.st_dev != dev:
                return False
            if ignore is not None:
                ist = os.stat(GITIGNORE, dir_fd=fd, follow_symlinks=False)
                if (ist.st_dev, ist.st_ino, ist.st_size, ist.st_mtime_ns, ist.st_ctime_ns) != ignore:
                    return False
        return True
    except OSError:
        return False
    finally:
        for fd in open_fds[1:]:
            os.close(fd)


class Answers:
    """Remembered answers by key (LRU), each with its trace; ``dirty`` when one was added."""

    def __init__(self, max_answers: int = MAX_ANSWERS, max_names: int = MAX_ANSWER_NAMES) -> None:
        self.max_answers = max_answers
        self.max_names = max_names
        self._entries: OrderedDict[Any, tuple[list[TraceRecord], list[str] | str]] = OrderedDict()
        self._names = 0
        self._lock = threading.Lock()
        self.dirty = False

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def get(self, key: Any, top_fd: int, *, copy: bool = True) -> list[str] | None:
        """The answer for ``key`` if its trace still holds under ``top_fd``, else None.

        A new list, unless ``copy`` is false: then the one held, for a caller that only reads it.
        """
        with self._lock:
            found = self._entries.get(key)
        if found is None:
            return None
        trace, answer = found
        if not still_valid(trace, top_fd):
            with self._lock:
                if self._entries.get(key) is found:
                    self._drop(key)
            return None
        if isinstance(answer, str):  # from the store: split once, on first use
            answer = answer.split("\0") if answer else []
            with self._lock:
                if self._entries.get(key) is found:
                    self._entries[key] = (trace, answer)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
        return list(answer) if copy else answer

    def put(self, key: Any, trace: Trace, answer: list[str]) -> None:
        if not trace.ok or len(answer) > self.max_names // 2:
            return
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = (trace.records, list(answer))
            self._names += len(answer) + len(trace.records)
            self.dirty = True
            self._evict()

    def _drop(self, key: Any) -> None:
        trace, answer = self._entries.pop(key)
        self._names -= _weight(trace, answer)

    def _evict(self) -> None:
        while self._entries and (len(self._entries) > self.max_answers or self._names > self.max_names):
            key = next(iter(self._entries))
            self._drop(key)

    # -- to and from the store on disk --------------------------------------------------------

    def records(self) -> list[AnswerRecord]:
        """Every answer held, least recently used first; clears ``dirty``."""
        with self._lock:
            self.dirty = False
            return [
                (key, trace, answer if isinstance(answer, str) else "\0".join(answer))
                for key, (trace, answer) in self._entries.items()
            ]

    def seed(self, records: list[Any], newest_allowed: int) -> None:
        """Hold the answers of ``records`` (from a store); each is still validated on use (``get``).

        Malformed records, and traces with a directory or ignore file newer than ``newest_allowed``
        (the store's write time less the racy margin), are dropped.
        """
        kept: list[tuple[Any, list[TraceRecord], str]] = []
        for record in records:
            try:
                key, trace, answer = record
            except (TypeError, ValueError):
                continue
            if type(answer) is not str or type(trace) is not list or not _hashable(key):
                continue
            if not all(_well_formed(entry, newest_allowed) for entry in trace):
                continue
            kept.append((key, trace, answer))
        with self._lock:
            for key, trace, answer in reversed(kept):
                if key in self._entries:
                    continue
                self._entries[key] = (trace, answer)
                self._entries.move_to_end(key, last=False)
                self._names += _weight(trace, answer)
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._names = 0
            self.dirty = False


def _weight(trace: list[TraceRecord], answer: list[str] | str) -> int:
    held = (answer.count("\0") + 1 if answer else 0) if isinstance(answer, str) else len(answer)
    return held + len(trace)


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _well_formed(entry: Any, newest_allowed: int) -> bool:
    if type(entry) is not tuple or len(entry) != 7:
        return False
    depth, name, dev, ino, mtime, ctime, ignore = entry
    if not (type(depth) is type(dev) is type(ino) is type(mtime) is type(ctime) is int and type(name) is str):
        return False
    if depth < 0 or (depth and (not name or "/" in name or name in (".", ".."))):
        return False
    if max(mtime, ctime) > newest_allowed:
        return False
    if ignore is None:
        return True
    return (
        type(ignore) is tuple
        and len(ignore) == 5
        and all(type(v) is int for v in ignore)
        and max(ignore[3], ignore[4]) <= newest_allowed
    )
