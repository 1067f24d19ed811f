"""Which paths of a project a sandboxed program may not read, or may read but not change.

Computed before each run from the rules as they are then (a walk of the project, cached for a
moment): the kernel enforces what this finds, so a path the rules deny is refused even to
``python -c`` or ``find -exec``. Only paths that exist can be covered; what a command creates
during its run is its own.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from .._pipeline._rules import PermissionRules

log = logging.getLogger("entropic_mcp.sandbox")

#: Entries looked at per walk; a larger project is covered up to here (logged once).
WALK_LIMIT = 50_000
#: Seconds a walk's answer is reused: a burst of commands walks once.
CACHE_SECONDS = 2.0
#: Policy files at the root, protected whether or not they exist (a missing one is created
#: empty for the run and removed after: an empty file of each is harmless).
ROOT_POLICY = ("entropic-mcp.toml", "entropic-mcp.local.toml", ".entropicignore", ".mcp.json")


@attrs.frozen(kw_only=True)
class Covered:
    """Existing paths to hide (files and directories) and to keep read-only."""

    hidden_files: tuple[Path, ...] = ()
    hidden_dirs: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


def _ignore_spec(root: Path, extra: Sequence[str]) -> tuple[object | None, int]:
    import pathspec

    lines = list(extra)
    ignore = root / ".entropicignore"
    try:
        stat = ignore.stat()
        lines += ignore.read_text(encoding="utf-8", errors="replace").splitlines()
        stamp = stat.st_mtime_ns
    except OSError:
        stamp = 0
    lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return None, stamp
    return pathspec.GitIgnoreSpec.from_lines(lines), stamp


_GLOB = ("*", "?", "[")


@attrs.frozen(kw_only=True)
class _Scope:
    """Where a walk must look: root-relative prefixes a deny rule's path can match under
    (``full`` when one starts with a glob), a regex of those paths, and absolute literal paths
    outside the root."""

    full: bool = False
    prefixes: tuple[str, ...] = ()
    regex: re.Pattern[str] | None = None
    outside: tuple[Path, ...] = ()


def _scope(root: Path, rules: PermissionRules | None) -> _Scope:
    """The deny rules' paths (``filesystem.<tool>:<path>``), fnmatch-style as the rules match
    them (``*`` crosses ``/``): a rule can only match paths starting with its literal prefix."""
    if rules is None:
        return _Scope()
    full = False
    prefixes: list[str] = []
    globs: list[str] = []
    outside: list[Path] = []
    root_text = str(root) + "/"
    for rule in rules.lists.get("deny", ()):
        if not rule.startswith("filesystem"):
            continue
        pattern = rule.partition(":")[2]
        if not pattern:
            continue
        if pattern.startswith("/"):
            if pattern.startswith(root_text):
                pattern = pattern[len(root_text) :]
            else:
                if not any(ch in pattern for ch in _GLOB):
                    outside.append(Path(pattern))
                continue
        cut = min((i for i in (pattern.find(ch) for ch in _GLOB) if i >= 0), default=-1)
        prefix = pattern if cut < 0 else pattern[:cut]
        full = full or prefix == ""
        prefixes.append(prefix)
        globs.append(fnmatch.translate(pattern))
    regex = re.compile("|".join(f"(?:{g})" for g in globs)) if globs else None
    return _Scope(full=full, prefixes=tuple(prefixes), regex=regex, outside=tuple(outside))


def _may_hold(rel_dir: str, scope: _Scope) -> bool:
    """Whether a rule's path can lie inside directory ``rel_dir`` (so the walk goes in)."""
    if scope.full:
        return True
    inside = rel_dir + "/"
    return any(inside.startswith(p) or p.startswith(inside) for p in scope.prefixes)


class Walker:
    """The covered paths of one root under the current rules, walked at most every few seconds.

    The walk goes only where a deny rule's path can be (``secrets/*`` looks in ``secrets``,
    ``.env`` at the top level; only a rule starting with a glob, or an ignore file, walks the
    whole project), and each entry is tested against one regex of the rules' paths before the
    pipeline's own matcher confirms it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[object, ...], tuple[float, Covered]] = {}
        self._warned: set[Path] = set()

    def covered(self, root: Path, rules: PermissionRules | None, deny_read: Sequence[str]) -> Covered:
        spec, stamp = _ignore_spec(root, deny_read)
        scope = _scope(root, rules)
        key = (root, id(rules), rules.version if rules is not None else 0, tuple(deny_read), stamp)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < CACHE_SECONDS:
                return hit[1]
        found = self._walk(root, rules, spec, scope) if spec is not None or scope.prefixes else Covered()
        if scope.outside:
            more = [p for p in scope.outside if os.path.lexists(p) and self._denied_read(rules, p)]
            found = attrs.evolve(
                found,
                hidden_files=(*found.hidden_files, *(p for p in more if not p.is_dir())),
                hidden_dirs=(*found.hidden_dirs, *(p for p in more if p.is_dir())),
            )
        with self._lock:
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = (now, found)
        return found

    @staticmethod
    def _denied_read(rules: PermissionRules | None, path: Path) -> bool:
        from .._pipeline._rules import path_part

        if rules is None:
            return False
        return rules.verdict(path_part("read", str(path), neutral=True), read_only=True).kind == "deny"

    def _walk(self, root: Path, rules: PermissionRules | None, spec: object | None, scope: _Scope) -> Covered:
        from .._pipeline._rules import path_part

        hidden_files: list[Path] = []
        hidden_dirs: list[Path] = []
        read_only: list[Path] = []
        seen = 0
        everywhere = spec is not None
        regex = scope.regex
        for top, dirs, files in os.walk(root):
            rel_top = os.path.relpath(top, root)
            keep = []
            for name, is_dir in [*((d, True) for d in dirs), *((f, False) for f in files)]:
                seen += 1
                rel = name if rel_top == "." else f"{rel_top}/{name}"
                full = Path(top) / name
                if rel == ".git":
                    continue  # its config and hooks are covered by name; the rest is git's
                if spec is not None and spec.match_file(rel + ("/" if is_dir else "")):  # type: ignore[attr-defined]
                    (hidden_dirs if is_dir else hidden_files).append(full)
                    continue
                if rules is not None and regex is not None and (regex.match(rel) or regex.match(str(full))):
                    also = (str(full),)
                    if rules.verdict(path_part("read", rel, also=also, neutral=True), read_only=True).kind == "deny":
                        (hidden_dirs if is_dir else hidden_files).append(full)
                        continue
                    if (
                        rules.verdict(path_part("write", rel, also=also, neutral=True), read_only=False).decision
                        == "deny"
                    ):
                        read_only.append(full)
                        continue
                if is_dir and not os.path.islink(full) and (everywhere or _may_hold(rel, scope)):
                    keep.append(name)
            dirs[:] = [d for d in dirs if d in keep]
            if seen > WALK_LIMIT:
                if root not in self._warned:
                    self._warned.add(root)
                    log.warning(
                        "sandbox: %s has more than %d entries; deny rules and .entropicignore are enforced "
                        "by the kernel for the first %d only (the rules still apply to every path)",
                        root,
                        WALK_LIMIT,
                        WALK_LIMIT,
                    )
                break
        return Covered(hidden_files=tuple(hidden_files), hidden_dirs=tuple(hidden_dirs), read_only=tuple(read_only))


class Placeholders:
    """Empty stand-ins for missing protected files, alive while any run needs them.

    A bind mount needs something to cover: a policy file that does not exist yet is created
    empty for the run (and so cannot be created by the program), and removed when the last run
    using it ends if it is still empty.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[Path, int] = {}

    def acquire(self, paths: Iterable[tuple[Path, bool]]) -> list[Path]:
        """Make each missing ``(path, is_dir)`` exist; returns the placeholders to release."""
        taken = []
        with self._lock:
            for path, is_dir in paths:
                if path in self._users:
                    self._users[path] += 1
                    taken.append(path)
                    continue
                if os.path.lexists(path) or not path.parent.is_dir():
                    continue
                try:
                    if is_dir:
                        path.mkdir()
                    else:
                        path.touch(exist_ok=False)
                except OSError:
                    continue
                self._users[path] = 1
                taken.append(path)
        return taken

    def share(self, paths: Iterable[Path]) -> list[Path]:
        """Of ``paths``, the placeholders that exist now, kept for one more user (release them too)."""
        with self._lock:
            taken = [path for path in paths if path in self._users]
            for path in taken:
                self._users[path] += 1
        return taken

    def release(self, paths: Iterable[Path]) -> None:
        with self._lock:
            for path in paths:
                left = self._users.get(path, 0) - 1
                if left > 0:
                    self._users[path] = left
                    continue
                self._users.pop(path, None)
                try:
                    if path.is_dir() and not path.is_symlink():
                        path.rmdir()  # only when still empty
                    elif path.stat().st_size == 0:
                        path.unlink()
                except OSError:
                    pass
