"""The path checked is the path used: canonical paths pinned at the permission stage.

The pipeline asks ``permission_parts`` (in the call's task) and then runs the tool (in a worker
thread that sees a copy of the task's context variables) with the very same argument dict.
Re-resolving the path in the tool would let a symlink flipped in between send an allowed write
into a denied directory, so the permission stage records the canonical path it judged, and the
tool takes it from here and opens exactly that path, component by component, without following
links.

Pins are keyed by the argument dict itself (identity, not equality): another look at the same
call's pattern — ``ServerManager.permission_pattern`` copies the arguments — cannot replace the
pin the permission decision made. Each stage publishes a new mapping (never mutating one another
task could share), and the tool removes the pin it uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

#: (root, tool, argument, raw path) of one path argument.
PinKey = tuple[str, str, str, str]
_Stored = dict[tuple[int, str, str, str, str], tuple[Mapping[str, Any], Path]]
_PINS: ContextVar[_Stored | None] = ContextVar("entropic_mcp_filesystem_pins", default=None)
MAX_PINS = 64


def pin(args: Mapping[str, Any], pins: dict[PinKey, Path]) -> None:
    """Publish the canonical paths judged for the call whose arguments are ``args``."""
    if not pins:
        return
    merged: _Stored = dict(_PINS.get() or {})
    for key, path in pins.items():
        merged[(id(args), *key)] = (args, path)
    if len(merged) > MAX_PINS:
        merged = dict(list(merged.items())[-MAX_PINS:])
    _PINS.set(merged)


def take(args: Mapping[str, Any], key: PinKey) -> Path | None:
    """The canonical path pinned for this argument of this call (None: none), removed once taken."""
    pins = _PINS.get()
    if not pins:
        return None
    found = pins.pop((id(args), *key), None)
    if found is None or found[0] is not args:
        return None
    return found[1]
