"""The path checked is the path used: canonical paths pinned at the permission stage.

The pipeline asks ``permission_parts`` (in the call's task) and then runs the tool (in a worker
thread that sees a copy of the task's context variables). Re-resolving the path in the tool
would let a symlink flipped in between send an allowed write into a denied directory, so the
permission stage records the canonical path it judged, and the tool takes it from here and
opens exactly that path, component by component, without following links.

Each ``permission_parts`` call sets a fresh mapping (never mutating one another task could
share); the tool removes the pin it uses, so a later call of the same task cannot pick up a
stale one (a call judged by a permission hook instead of the server pins nothing).
"""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path

#: (root, tool, argument, raw path) -> the canonical path the permission stage judged.
PinKey = tuple[str, str, str, str]
_PINS: ContextVar[dict[PinKey, Path] | None] = ContextVar("entropic_mcp_filesystem_pins", default=None)
MAX_PINS = 64


def pin(pins: dict[PinKey, Path]) -> None:
    """Publish this call's pins (replacing the task's earlier ones)."""
    if len(pins) > MAX_PINS:
        pins = dict(list(pins.items())[-MAX_PINS:])
    _PINS.set(pins)


def take(key: PinKey) -> Path | None:
    """The pinned canonical path for ``key`` (None when nothing was pinned), removed once taken."""
    pins = _PINS.get()
    if not pins:
        return None
    return pins.pop(key, None)
