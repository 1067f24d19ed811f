"""Permission rules inside walks: every file grep opens and every entry glob or a listing shows.

A call-level rule names the searched directory; a read rule on ``secrets/*`` must also keep
``secrets/key`` out of a grep of the whole tree. Each file or directory a walk would show is
checked with ``ctx.services.path_refused`` (deny and ask rules; never asks anyone); refused ones
are skipped and counted, so the answer can say how many were left out without naming them.

Most projects have no read rules naming paths: the gate then costs one look at the rule lists
per walk and nothing per file.
"""

from __future__ import annotations

import re
from fnmatch import translate
from pathlib import Path
from typing import Literal

from entropic_mcp import CallContext
from entropic_mcp.toolkit.paths import READ_PATH_TOOLS, WRITE_PATH_TOOLS

_SPECIAL = "*?["


def _literal_prefix(rule: str) -> str:
    cut = min((i for i in (rule.find(c) for c in _SPECIAL) if i >= 0), default=len(rule))
    return rule[:cut]


def relevant_rules(ctx: CallContext, access: Literal["read", "write"]) -> list[str] | None:
    """The deny and ask rules that could match a path name of ``access`` (``filesystem.read:...``).

    Read from ``ctx.services.rules``: with them a walk asks about single files only where a
    rule could name them, not for every file of a project with no rule naming paths.
    """
    lists = {kind: ctx.services.rules(kind) for kind in ("deny", "ask")}
    heads = _heads(access)
    found = []
    for kind in ("deny", "ask"):
        for rule in lists.get(kind, ()):
            literal = _literal_prefix(rule)
            if any(literal.startswith(head) or head.startswith(literal) for head in heads):
                found.append(rule)
    return found


def _heads(access: str) -> list[str]:
    tools = READ_PATH_TOOLS if access == "read" else WRITE_PATH_TOOLS
    return [f"filesystem.{access}:", *(f"filesystem.{t}:" for t in tools)]


def _prefilter(rules: list[str], access: str) -> _Prefilter | None:
    """A test over bare paths that every refused path passes, when the rules allow one.

    A rule whose part before ``:`` is a literal name of this kind (``filesystem.read:``,
    ``filesystem.grep:``) matches a name exactly when its glob after the ``:`` matches the path,
    so a path none of those globs matches is not refused — one match instead of the core's
    dozen names per file. A rule with a wildcard before the ``:`` (``filesystem.*:x``) defeats it.
    """
    heads = set(_heads(access))
    globs = []
    for rule in rules:
        head, colon, rest = rule.partition(":")
        if not colon or any(c in head for c in _SPECIAL):
            return None
        if head + ":" in heads:
            globs.append(rest)
    if not globs:
        return None
    return _Prefilter(globs)


class _Prefilter:
    """The rule globs, narrowed per directory to those whose literal prefix fits under it.

    A glob matches a path only if the path starts with the glob's literal prefix (before its
    first ``*``, ``?`` or ``[``), so for the files of one directory only the globs whose prefix
    agrees with the directory can match: compiled once per directory, and a directory that no
    rule can reach costs one dictionary look-up per file, however many rules there are.
    """

    def __init__(self, globs: list[str]) -> None:
        names: set[str] = set()
        suffixes: list[str] = []
        rest = []
        for glob in globs:
            kind, value = _name_rule(glob)
            if kind == "name":
                names.add(value)
            elif kind == "suffix":
                suffixes.append(value)
            else:
                rest.append(glob)
        #: ``**/NAME`` and ``**/*SUFFIX`` rules (``.env``, ``*.pem``): they reach every directory,
        #: so they are decided by the file name alone (a set look-up, one ``endswith``), never by
        #: a pattern rematched per file.
        self.names = frozenset(names)
        self.suffixes = tuple(suffixes)
        self._globs = [(_literal_prefix(glob), glob) for glob in rest]
        self._dirs: dict[str, re.Pattern[str] | None] = {}

    def name_hit(self, name: str) -> bool:
        """True when a name rule matches a path with a ``/`` whose last part is ``name`` (so the
        absolute spelling of any path with that name, which the core judges too)."""
        return name in self.names or (bool(self.suffixes) and name.endswith(self.suffixes))

    def under(self, directory: str) -> re.Pattern[str] | None:
        try:
            return self._dirs[directory]
        except KeyError:
            pass
        under = directory + "/" if directory else ""
        chosen = [glob for literal, glob in self._globs if under.startswith(literal) or literal.startswith(under)]
        found = re.compile("|".join(f"(?:{translate(g)})" for g in chosen)) if chosen else None
        self._dirs[directory] = found
        return found

    def may_match(self, path: str) -> bool:
        head, slash, name = path.rpartition("/")
        if slash and self.name_hit(name):
            return True
        pattern = self.under(head)
        return pattern is not None and pattern.match(path) is not None


def _name_rule(glob: str) -> tuple[str, str]:
    """``("name", X)`` for ``**/X``, ``("suffix", S)`` for ``**/*S`` (X and S literal, no ``/``),
    else ``("glob", glob)``. In fnmatch ``**/X`` matches a path exactly when it holds a ``/`` and
    its last part is X; ``**/*S`` when it holds a ``/`` and ends with S: decided by the name."""
    if not glob.startswith("**/"):
        return "glob", glob
    tail = glob[3:]
    if not tail or "/" in tail or "\\" in tail:
        return "glob", glob
    if not any(c in tail for c in _SPECIAL):
        return "name", tail
    if tail.startswith("*") and tail[1:] and not any(c in tail[1:] for c in _SPECIAL):
        return "suffix", tail[1:]
    return "glob", glob


def _private_displays(ctx: CallContext, root: Path) -> tuple[str, ...]:
    """The host's private directories as a walk of ``root`` spells them (root-relative or absolute)."""
    out = []
    for path in ctx.services.private_dirs:
        try:
            out.append(path.relative_to(root).as_posix())
        except ValueError:
            out.append(str(path))
    return tuple(p for p in out if p not in (".", ""))


class WalkGate:
    """Per walk: is a path (or a directory above it) refused by a rule? Counts what it refused."""

    def __init__(self, ctx: CallContext, root: Path, *, access: Literal["read", "write"] = "read") -> None:
        self.ctx = ctx
        self.root = root
        self.access = access
        self._ask = ctx.services.path_refused
        rules = relevant_rules(ctx, access)
        # The store and entropic-mcp's data directory, when a walk can reach them (a store
        # configured inside the project): never shown, whatever the rules (docs/user-guide.md).
        self._private = _private_displays(ctx, root)
        self.active = rules != []
        self._quick = _prefilter(rules, access) if rules else None
        self._root_text = str(root).rstrip("/")
        self._globs_under: dict[str, tuple[re.Pattern[str] | None, re.Pattern[str] | None]] = {}
        self._private_set = frozenset(self._private)
        self._private_dirs = tuple(p + "/" for p in self._private)
        self.skipped = 0
        self._dirs: dict[str, bool] = {}

    def _refused_one(self, display: str, head: str | None = None) -> bool:
        relative = not display.startswith("/") and display != "."
        quick = self._quick
        if quick is not None and not quick.name_hit(display.rpartition("/")[2]):
            if head is None:
                head = display.rpartition("/")[0]
            pair = self._globs_under.get(head)
            if pair is None:
                # The rule globs that could match here, for both spellings the core judges.
                absolute = f"{self._root_text}/{head}" if head else self._root_text
                pair = self._globs_under[head] = (quick.under(head), quick.under(absolute) if relative else None)
            near, far = pair
            if (near is None or near.match(display) is None) and (
                far is None or far.match(f"{self._root_text}/{display}") is None
            ):
                return False
        also = (str(self.root / display),) if relative else ()
        return self._ask(self.access, display, also=also) is not None

    def _dir_refused(self, display: str) -> bool:
        found = self._dirs.get(display)
        if found is None:
            head, _, _ = display.rpartition("/")
            found = (bool(head) and head != "/" and self._dir_refused(head)) or self._refused_one(display)
            self._dirs[display] = found
        return found

    def refused(self, display: str) -> bool:
        """True (and counted) when ``display`` or a directory above it is refused by a rule."""
        if self._private and (display in self._private_set or display.startswith(self._private_dirs)):
            self.skipped += 1
            return True
        if not self.active:
            return False
        head, _, _ = display.rpartition("/")
        if (head and head != "/" and self._dir_refused(head)) or self._refused_one(display, head):
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
