"""The stdout guard: what plugin code prints goes to stderr, with a warning naming the plugin.

On stdio, stdout carries the MCP stream, and ``--json`` commands print one JSON document there:
a ``print()`` at plugin import or in a tool would corrupt either. While plugins import and run,
``sys.stdout`` is this guard instead.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Iterator
from typing import Any

from ._isolation import plugin_of_stack


class StdoutGuard(io.TextIOBase):
    """A text stream that forwards to the current ``sys.stderr`` and records who wrote.

    ``seen`` holds (plugin, first text) per plugin that wrote (``"unknown"`` when no plugin's code
    is on the stack), for the plugin-author kit to report.
    """

    def __init__(self, *, announce: bool = True) -> None:
        super().__init__()
        self.announce = announce
        self.seen: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def _target(self) -> Any:
        return sys.stderr if sys.stderr is not self else sys.__stderr__

    def write(self, text: str) -> int:
        if text and text.strip():
            plugin = plugin_of_stack(sys._getframe(1)) or "unknown"
            with self._lock:
                first = plugin not in self.seen
                if first:
                    self.seen[plugin] = text.strip()[:200]
            if first and self.announce:
                who = f"plugin {plugin!r}" if plugin != "unknown" else "plugin code"
                self._target.write(
                    f"warning: {who} wrote to stdout, which carries entropic-mcp's own output; "
                    "sent to stderr instead (plugins log to stderr or use logging)\n"
                )
        return self._target.write(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._target.flush()

    def fileno(self) -> int:
        # A child started with stdout=sys.stdout writes to stderr too.
        return int(self._target.fileno())

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self._target, "encoding", "utf-8"))

    @property
    def buffer(self) -> Any:
        return getattr(self._target, "buffer", None)


@contextlib.contextmanager
def guard_stdout(guard: StdoutGuard | None = None) -> Iterator[StdoutGuard]:
    """``sys.stdout`` is a ``StdoutGuard`` inside; the stream before it is put back after.

    Nested guards keep the outer one (one warning per plugin for the whole command).
    """
    current = sys.stdout
    if isinstance(current, StdoutGuard) and guard is None:
        yield current
        return
    installed = guard if guard is not None else StdoutGuard()
    sys.stdout = installed
    try:
        yield installed
    finally:
        if sys.stdout is installed:
            sys.stdout = current
