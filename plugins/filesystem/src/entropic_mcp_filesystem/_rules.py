"""Permission rules inside walks: every file grep opens and every entry glob or a listing shows.

A call-level rule names the searched directory; a read rule on ``secrets/*`` must also keep
``secrets/key`` out of a grep of the whole tree. Each file or directory a walk would show is
checked with the core's ``path_refused`` (deny and ask rules; never asks anyone); refused ones
are skipped and counted, so the answer can say how many were left out without naming them.

Most projects have no read rules naming paths: the gate then costs one look at the rule lists
per walk and nothing per file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from entropic_mcp import READ_PATH_TOOLS, WRITE_PATH_TOOLS, CallContext, path_refused

_SPECIAL = "*?["


def _literal_prefix(rule: str) -> str:
    cut = min((i for i in (rule.find(c) for c in _SPECIAL) if i >= 0), default=len(rule))
    return rule[:cut]


def rules_could_match(ctx: CallContext, access: Literal["read", "write"]) -> bool:
    """Could any deny or ask rule match a path name of ``access`` (``filesystem.read:...``)?"""
    manager = ctx.manager
    if manager is None:
        return False
    try:
        lists = manager.permissions.lists
    except AttributeError:
        return True
    tools = READ_PATH_TOOLS if access == "read" else WRITE_PATH_TOOLS
    heads = [f"filesystem.{access}:", *(f"filesystem.{t}:" for t in tools)]
    for kind in ("deny", "ask"):
        for rule in lists.get(kind, ()):
            literal = _literal_prefix(rule)
            if any(literal.startswith(head) or head.startswith(literal) for head in heads):
                return True
    return False


class WalkGate:
    """Per walk: is a path (or a directory above it) refused by a rule? Counts what it refused."""

    def __init__(self, ctx: CallContext, root: Path, *, access: Literal["read", "write"] = "read") -> None:
        self.ctx = ctx
        self.root = root
        self.access = access
        self.active = rules_could_match(ctx, access)
        self.skipped = 0
        self._dirs: dict[str, bool] = {}

    def _refused_one(self, display: str) -> bool:
        also = (str(self.root / display),) if not display.startswith("/") and display != "." else ()
        return path_refused(self.ctx, self.access, display, also=also) is not None

    def _dir_refused(self, display: str) -> bool:
        found = self._dirs.get(display)
        if found is None:
            head, _, _ = display.rpartition("/")
            found = (bool(head) and head != "/" and self._dir_refused(head)) or self._refused_one(display)
            self._dirs[display] = found
        return found

    def refused(self, display: str) -> bool:
        """True (and counted) when ``display`` or a directory above it is refused by a rule."""
        if not self.active:
            return False
        head, _, _ = display.rpartition("/")
        if (head and head != "/" and self._dir_refused(head)) or self._refused_one(display):
            self.skipped += 1
            return True
        return False

    def note(self) -> dict[str, object] | None:
        """The final entry of a walk's answer when rules kept entries out (None when none did)."""
        if not self.skipped:
            return None
        return {
            "skipped_by_rules": self.skipped,
            "note": f"{self.skipped} entries were left out because permission rules refuse reading them",
        }
