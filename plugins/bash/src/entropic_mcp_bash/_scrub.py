"""Keep the server's own secrets out of reach of the commands it runs (Linux).

Removing a variable from a command's environment is not enough: the command runs as the same
user as the server, and ``/proc/<server pid>/environ`` shows the environment the server was
*started* with (``cat /proc/$PPID/environ`` prints the serve token). That view is a block of the
server's memory which the kernel reads directly; later ``unsetenv`` calls do not change it.

So, for each hidden variable still in that block: the variable is set again (libc copies the
value to the heap and points ``environ`` at the copy, so the process and the children it starts
with an inherited environment keep seeing it), then its value in the original block is
overwritten with NUL bytes. The server also marks itself non-dumpable, so a process of the same
(non-root) user can no longer read its memory or its ``/proc`` files.
"""

from __future__ import annotations

import os
import re
import sys
import threading

_LOCK = threading.Lock()
_done: set[str] = set()


def hide_from_children(pattern: re.Pattern[str]) -> list[str]:
    """Blank the values of variables matching ``pattern`` in ``/proc/self/environ``; best effort.

    Returns the names blanked (empty where ``/proc`` is missing or not writable). Idempotent.
    """
    if not sys.platform.startswith("linux"):
        return []
    with _LOCK:
        _non_dumpable()
        try:
            with open("/proc/self/stat", "rb") as fh:
                stat = fh.read()
            fields = stat[stat.rfind(b")") + 2 :].split()
            # proc(5): fields 50 and 51 (1-based; the list starts at field 3) are env_start, env_end.
            start, end = int(fields[47]), int(fields[48])
            with open("/proc/self/mem", "r+b", buffering=0) as mem:
                mem.seek(start)
                block = mem.read(end - start)
                hidden = []
                offset = 0
                for entry in block.split(b"\0"):
                    name, eq, value = entry.partition(b"=")
                    text = name.decode("utf-8", errors="replace")
                    if eq and value.strip(b"\0") and pattern.match(text) and text not in _done:
                        current = os.environ.get(text)
                        if current is not None:
                            os.putenv(text, current)  # libc moves the live value to the heap
                        mem.seek(start + offset + len(name) + 1)
                        mem.write(b"\0" * len(value))
                        _done.add(text)
                        hidden.append(text)
                    offset += len(entry) + 1
                return hidden
        except (OSError, ValueError, IndexError):
            return []


def _non_dumpable() -> None:
    """``prctl(PR_SET_DUMPABLE, 0)``: same-user processes lose access to our memory and /proc files."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass
