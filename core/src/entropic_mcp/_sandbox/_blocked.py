"""Telling the model, in words, that the sandbox stopped something and how the user can allow it."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._sandbox import Sandbox


@functools.cache
def _patterns() -> dict[str, re.Pattern[str]]:
    """Compiled on first use: most runs never fail inside the sandbox."""
    return {
        "write": re.compile(r"(?:'([^'\n]+)'|([^\s:'\n][^:'\n]*)): (?:Read-only file system|Device or resource busy)"),
        "write_py": re.compile(r"\[Errno (?:30|16)\] [^:\n]+: '([^'\n]+)'"),
        "read": re.compile(r"(?:'([^'\n]+)'|([^\s:'\n][^:'\n]*)): Permission denied"),
        "read_py": re.compile(r"\[Errno 13\] Permission denied: '([^'\n]+)'"),
        "net": re.compile(
            r"Network is unreachable|Could not resolve host|Temporary failure in name resolution|"
            r"Name or service not known|\[Errno (?:101|-3|-2)\]|Connection refused|\[Errno 111\]"
        ),
    }


def _first(text: str, *patterns: re.Pattern[str]) -> str | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found is not None:
            return next((group for group in found.groups() if group), "").strip() or None
    return None


def blocked_note(output: str, sandbox: Sandbox, *, exit_code: int | None) -> str | None:
    """A note for a failed run whose output shows the sandbox refusing something, else None.

    Only read for a run that failed (a non-zero exit): a command that handles its own
    ``Permission denied`` and succeeds needs no note.
    """
    if not sandbox.active or exit_code in (0, None):
        return None
    where = f"[sandbox.servers.{sandbox.server}]" if sandbox.server else "[sandbox]"
    found = _patterns()
    notes = []
    path = _first(output, found["write"], found["write_py"])
    if path is not None:
        notes.append(
            f"the OS sandbox made {path!r} read-only: programs may write only under the project root and "
            "$TMPDIR (a private /tmp), and never to policy files (entropic-mcp.toml, .mcp.json, .entropicignore, "
            ".git/config, .git/hooks) or paths a write deny rule names. If this write is wanted, the user can add "
            f"the directory to `writable` under {where} in entropic-mcp.toml"
        )
    path = _first(output, found["read"], found["read_py"])
    if path is not None and sandbox.hides_something():
        notes.append(
            f"the OS sandbox may have refused reading {path!r}: paths a read deny rule, [sandbox] deny_read or "
            ".entropicignore names are unreadable to programs; the user decides that in the rules"
        )
    if not sandbox.network and found["net"].search(output):
        notes.append(
            "the OS sandbox has no network (only a private loopback): connections and name lookups fail. "
            f"The user can allow it with `network = true` under {where} in entropic-mcp.toml"
        )
    if not notes:
        return None
    return "[entropic-mcp sandbox] " + "; ".join(notes) + "."
