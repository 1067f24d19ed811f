"""Ignore rules: nested .gitignore files, the root .entropicignore, and .git/info/exclude.

Each ignore file is compiled once (and cached by inode and mtime) into a single regular
expression: pathspec's gitignore patterns, alternated last-first so that the first alternative
that matches is the last matching line of the file — git's "last match wins" in one ``match``.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from ._fsio import FILE_FLAGS, read_all

GITIGNORE = ".gitignore"
ENTROPICIGNORE = ".entropicignore"
MAX_IGNORE_FILE_BYTES = 1 << 20
MAX_CACHED = 4096
#: How pathspec spells "in any directory": a pattern with no inner '/' (``*.log``, ``**/x``).
BASENAME_PREFIX = "^(?:.+/)?"


class IgnoreFile:
    """The patterns of one ignore file; ``verdict`` is True (ignored), False (re-included) or None."""

    __slots__ = ("_includes", "_match", "_spec", "count", "name_patterns")

    def __init__(self, lines: Sequence[str]) -> None:
        from pathspec import GitIgnoreSpec

        spec = GitIgnoreSpec.from_lines(lines)
        active = [p for p in spec.patterns if p.include is not None and getattr(p, "regex", None) is not None]
        self.count = len(active)
        self._spec = spec
        self._includes: dict[str, bool] = {}
        self._match: Callable[[str], re.Match[str] | _SpecMatch | None] | None
        alternatives = []
        #: For files: (regex on the bare file name, include), last line first; None when some
        #: line depends on the directory (then every file is checked by full path).
        names: list[tuple[str, bool]] | None = []
        for pattern in reversed(active):
            raw = pattern.regex.pattern  # type: ignore[union-attr]
            if raw.endswith("(?P<ps_d>/)"):
                continue  # directory-only ("build/"): files under it are pruned with the directory
            rest = raw[len(BASENAME_PREFIX) :] if raw.startswith(BASENAME_PREFIX) else None
            if rest is None or "/" in rest.replace("[^/]", "").replace("(?P<ps_d>/)", ""):
                names = None
                break
            if names is not None:
                names.append((rest.replace("(?P<ps_d>/)", "/"), bool(pattern.include)))
        self.name_patterns = names
        for index, pattern in enumerate(reversed(active)):
            # Each alternative keeps its own "matched as the contents of a directory" group: git
            # ranks a line that names the path itself above one that names a parent directory
            # (``!keep.log`` does not re-include ``keep.log/x1`` that ``x?`` ignores).
            source = pattern.regex.pattern.replace("(?P<ps_d>/)", f"(?P<d{index}>/)")  # type: ignore[union-attr]
            name = f"p{index}"
            self._includes[name] = bool(pattern.include)
            alternatives.append(f"(?P<{name}>{source})")
        try:
            combined = re.compile("|".join(alternatives)) if alternatives else None
            self._match = combined.match if combined is not None else None
        except re.error:  # a pattern form we do not know how to combine: ask pathspec line by line
            self._match = self._spec_match

    def _spec_match(self, path: str) -> _SpecMatch | None:
        result = self._spec.check_file(path)
        return None if result.include is None else _SpecMatch(result.include)

    def verdict(self, path: str) -> bool | None:
        """``path`` is relative to the ignore file's directory, with a trailing ``/`` for directories."""
        if self._match is None:
            return None
        found = self._match(path)
        if found is None:
            return None
        if isinstance(found, _SpecMatch):
            return found.include
        name = found.lastgroup or ""
        if found.group("d" + name[1:]) is not None:
            # matched through a parent directory: a later line may name the path itself
            exact = self._spec_match(path)
            return None if exact is None else exact.include
        return self._includes[name]


class _SpecMatch:
    __slots__ = ("include",)

    def __init__(self, include: bool) -> None:
        self.include = include


class IgnoreCache:
    """Compiled ignore files keyed by (device, inode, size, mtime, ctime): edits are picked up.

    An entry read within ``RACY_MARGIN_NS`` of the file's own timestamps is "racy" (an edit in
    the same timestamp tick would keep the key): it keeps the bytes it was compiled from and is
    re-read and compared on every use until it is old enough. The server's directory listing
    cache (``listings``) lives here too, so that both are dropped together.
    """

    def __init__(self, max_entries: int = MAX_CACHED) -> None:
        from ._dircache import ListingCache

        self.max_entries = max_entries
        self._files: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.listings = ListingCache()

    def load(self, dir_fd: int, name: str) -> IgnoreFile | None:
        """The ignore file ``name`` in the directory ``dir_fd`` (never through a link); None if absent."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IGNORE_FILE_BYTES:
            return None
        with self._lock:
            cached = self._files.get(_key(st))
        if cached is not None and cached.data is None:
            with self._lock:
                self._files.move_to_end(_key(st))
            return cached.result()
        return self._read(dir_fd, name)

    def _read(self, dir_fd: int, name: str) -> IgnoreFile | None:
        started = self.listings.clock()
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IGNORE_FILE_BYTES:
            os.close(fd)
            return None
        try:
            data = read_all(fd)
        except OSError:
            return None
        key = _key(st)
        racy = started - max(st.st_mtime_ns, st.st_ctime_ns) < self.listings.margin_ns
        with self._lock:
            cached = self._files.get(key)
        if cached is not None and (cached.data is None or cached.data == data):
            compiled = cached.rules  # the same bytes: keep the same object (walks key on it)
        else:
            compiled = IgnoreFile(data.decode("utf-8", "replace").splitlines())
        entry = _Entry(compiled, data if racy else None)
        with self._lock:
            self._files[key] = entry
            self._files.move_to_end(key)
            while len(self._files) > self.max_entries:
                self._files.popitem(last=False)
        return entry.result()

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
        self.listings.clear()


def _key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Entry:
    """A compiled ignore file; ``data`` is kept (to compare on the next use) while it is racy."""

    __slots__ = ("data", "rules")

    def __init__(self, rules: IgnoreFile, data: bytes | None) -> None:
        self.rules = rules
        self.data = data

    def result(self) -> IgnoreFile | None:
        return self.rules if self.rules.count else None


#: (length of the directory prefix to cut from a path, the ignore file of that directory)
Level = tuple[int, IgnoreFile]


def stack_verdict(stack: Sequence[Level], path: str) -> bool:
    """Deepest ignore file with an opinion decides; no opinion anywhere = not ignored."""
    for cut, rules in reversed(stack):
        verdict = rules.verdict(path[cut:])
        if verdict is not None:
            return verdict
    return False


class NameRules:
    """The file verdicts of a whole stack of ignore files as one regex on the bare file name.

    Only built when every ignore file in the stack decides files by name alone (the usual
    ``*.log`` / ``!keep.log`` kind); alternatives run deepest file first, last line first, so the
    first alternative that matches is the line git would apply.
    """

    __slots__ = ("_includes", "_match")

    def __init__(self, files: Sequence[IgnoreFile]) -> None:
        alternatives: list[str] = []
        self._includes: dict[str, bool] = {}
        for rules in files:
            assert rules.name_patterns is not None
            for source, include in rules.name_patterns:
                name = f"n{len(alternatives)}"
                self._includes[name] = include
                alternatives.append(f"(?P<{name}>{source})")
        self._match = re.compile("|".join(alternatives)).match if alternatives else None

    @classmethod
    def for_stack(cls, entropic: IgnoreFile | None, stack: Sequence[Level]) -> NameRules | None:
        files = ([entropic] if entropic is not None else []) + [rules for _, rules in reversed(stack)]
        if any(rules.name_patterns is None for rules in files):
            return None
        try:
            return cls(files)
        except re.error:
            return None

    def keep(self, names: list[str]) -> list[str]:
        """``names`` without the ignored ones (``ignored`` for a whole directory, without a call per name)."""
        match = self._match
        if match is None:
            return list(names)
        includes = self._includes
        return [n for n in names if (found := match(n)) is None or not includes[found.lastgroup or ""]]

    def ignored(self, name: str) -> bool:
        if self._match is None:
            return False
        found = self._match(name)
        return found is not None and self._includes[found.lastgroup or ""]
