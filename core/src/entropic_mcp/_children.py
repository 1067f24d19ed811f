"""Child processes tools leave behind: found through /proc, stopped when the host stops.

A tool may start a process of its own (``subprocess.Popen`` in a tool) and return: it outlived
``serve`` and ``check-plugin``. ``serve`` makes itself a child subreaper (Linux), so even the
grandchildren of a child that exited stay its descendants, and stops every descendant at exit.
Elsewhere than Linux these are no-ops.
"""

from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); False where not possible."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _stat(pid: str) -> tuple[int, str] | None:
    """(parent pid, state) of a process from /proc/<pid>/stat; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
    except OSError:
        return None
    fields = data[data.rfind(")") + 2 :].split()  # the command name may hold spaces and brackets
    return int(fields[1]), fields[0]


def descendants(pid: int | None = None, *, running_only: bool = True) -> list[int]:
    """Every descendant of ``pid`` (default: this process), zombies left out unless asked."""
    root = os.getpid() if pid is None else pid
    try:
        entries = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for name in entries:
        found = _stat(name)
        if found is not None:
            children.setdefault(found[0], []).append(int(name))
            states[int(name)] = found[1]
    out: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        child = todo.pop()
        if not running_only or states.get(child) != "Z":
            out.append(child)
        todo.extend(children.get(child, ()))
    return out


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip() or "?"
    except OSError:
        return "?"


def stop_processes(pids: list[int], *, grace: float = 2.0) -> None:
    """SIGTERM ``pids``, SIGKILL what still runs after ``grace`` seconds, reap our own children."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    left = pids
    while left and time.monotonic() < deadline:
        _reap(left)
        left = [pid for pid in left if _running(pid)]
        if left:
            time.sleep(0.05)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    _reap(pids)


def stop_descendants(*, grace: float = 2.0) -> list[int]:
    """Stop every process this one left running (see ``stop_processes``); the pids it found."""
    found = descendants()
    if found:
        stop_processes(found, grace=grace)
    return found


def _running(pid: int) -> bool:
    found = _stat(str(pid))
    return found is not None and found[1] != "Z"


def _reap(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass
