"""Paths the git tools must not print: the project's ``.entropicignore`` and path read rules.

``.entropicignore`` (gitignore syntax, at the project root) hides files from every tool that
shows file contents or names: ``show <rev>:<path>`` is refused, and diffs, patches and per-file
statistics leave the paths out. For git's own output the patterns become ``:(exclude,glob)``
pathspecs — git's glob magic and gitignore use the same matcher (wildmatch), so a pattern
without a ``/`` becomes ``**/<pattern>``, an anchored one stays anchored, and each also hides
everything below it. Negated lines (``!keep.txt``) are not honoured: a path any positive line
matches stays hidden (the safe side).

The permission rules of the host (``deny = ["filesystem.read:secrets/*"]``) are checked through
the core's ``path_refused`` for each path whose content git would print.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

from entropic_mcp import CallContext
from entropic_mcp.toolkit.paths import READ_PATH_TOOLS

IGNORE_FILE = ".entropicignore"
MAX_IGNORE_BYTES = 1 << 20
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")
_READ_NAMES = ("filesystem.read", *(f"filesystem.{tool}" for tool in READ_PATH_TOOLS))


class IgnoreRules:
    """The positive lines of one ``.entropicignore``, as a matcher and as exclude pathspecs."""

    def __init__(self, lines: Iterable[str]) -> None:
        from pathspec import GitIgnoreSpec

        self.patterns: list[str] = []
        for raw in lines:
            line = raw.rstrip("\n").rstrip("\r")
            # trailing spaces are dropped unless escaped (gitignore)
            stripped = line.rstrip(" ")
            if stripped.endswith("\\") and len(stripped) < len(line):
                stripped += " "
            if not stripped or stripped.startswith("#") or stripped.startswith("!"):
                continue
            self.patterns.append(stripped)
        self.spec = GitIgnoreSpec.from_lines(self.patterns)

    def hides(self, path: str) -> bool:
        """``path`` (project-root-relative POSIX; a directory ends with ``/``) or a directory
        above it is matched."""
        directory = path.endswith("/")
        parts = path.strip("/").split("/")
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            is_dir = end < len(parts) or directory
            if self.spec.match_file(prefix) or (is_dir and self.spec.match_file(prefix + "/")):
                return True
        return False

    def excludes(self, base: str) -> list[str]:
        """``:(exclude,glob)`` pathspecs (relative to the work tree top) hiding every matched path.

        ``base`` is the project root relative to the top (``""`` when they are the same).
        """
        prefix = _GLOB_SPECIAL.sub(r"\\\1", base) + "/" if base else ""
        out: list[str] = []
        for pattern in self.patterns:
            directory_only = pattern.endswith("/")
            body = pattern.rstrip("/")
            if not body:
                continue
            anchored = "/" in body
            body = body.lstrip("/")
            full = prefix + (body if anchored else f"**/{body}")
            if not directory_only:
                out.append(f":(exclude,glob){full}")
            out.append(f":(exclude,glob){full}/**")
        return out


class IgnoreCache:
    """The root's ``.entropicignore``, re-read when its size, times or inode change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[Path, tuple[tuple[int, ...], IgnoreRules]] = {}

    def rules(self, root: Path) -> IgnoreRules | None:
        path = root / IGNORE_FILE
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IGNORE_BYTES:
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self._lock:
            found = self._entries.get(root)
        if found is not None and found[0] == key:
            return found[1]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            text = f.read(MAX_IGNORE_BYTES).decode("utf-8", errors="replace")
        rules = IgnoreRules(text.splitlines())
        with self._lock:
            self._entries[root] = (key, rules)
        return rules


def rules_may_refuse_reads(ctx: CallContext) -> bool:
    """Whether any deny or ask rule of the host could match a file read (a cheap over-estimate:
    when False, no per-file check is needed, and no extra ``--name-only`` git run)."""
    services = ctx.services
    for rule in [*services.rules("deny"), *services.rules("ask")]:
        head = rule.split(":", 1)[0]
        if any(fnmatchcase(name, head) for name in _READ_NAMES):
            return True
        if ":" not in rule and fnmatchcase("filesystem.read:x", rule):
            return True
    return False


def refused_read(ctx: CallContext, root: Path, top: Path, path: str) -> str | None:
    """The host rule refusing a read of ``path`` (relative to the work tree ``top``), or None."""
    absolute = (top / path).as_posix()
    if root == top:
        display = path
    else:
        try:
            display = (top / path).relative_to(root).as_posix()
        except ValueError:
            return ctx.services.path_refused("read", absolute)
    return ctx.services.path_refused("read", display or ".", also=(absolute,))


def refused_write(ctx: CallContext, root: Path, top: Path, path: str) -> str | None:
    """Why git must not rewrite ``path`` (relative to ``top``) in the work tree, or None.

    The same verdict a ``write_file`` of that path gets, minus asking: a deny or ask rule on
    ``filesystem.write:<path>`` (or any write tool's name), and the protection of the policy
    files (``entropic-mcp.toml``, ``entropic-mcp.local.toml``, ``.entropicignore``), which only an
    allow rule naming the file opens — also for a server used without a host.
    """
    absolute = (top / path).as_posix()
    display = root_relative(root, top, path)
    reason = ctx.services.write_refused(display or absolute, also=(absolute,) if display else ())
    if reason is None:
        return None
    if reason == "a protected policy file":
        return "it is a protected policy file (only an allow rule naming it lets a tool change it)"
    return f"the permission rule {reason!r} refuses writing it"


def root_relative(root: Path, top: Path, path: str) -> str | None:
    """``path`` (relative to ``top``) relative to the project root; None outside the root."""
    if root == top:
        return path
    try:
        return (top / path).relative_to(root).as_posix()
    except ValueError:
        return None
