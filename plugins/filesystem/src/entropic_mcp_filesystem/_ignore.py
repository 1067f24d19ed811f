"""Ignore rules: nested .gitignore files, the root .entropicignore, and .git/info/exclude.

Each ignore file is compiled once (and cached by inode and mtime) into a pathspec
``GitIgnoreSpec``; matching uses its public ``check_file`` only (git's "last match wins", with
a line naming the path itself ranked above one naming a parent directory).
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._fsio import FILE_FLAGS, read_all

if TYPE_CHECKING:
    from ._dirstore import ListingStore

GITIGNORE = ".gitignore"
ENTROPICIGNORE = ".entropicignore"
MAX_IGNORE_FILE_BYTES = 1 << 20
MAX_CACHED = 4096
#: File-name verdicts remembered per ignore file (names repeat across directories).
MAX_REMEMBERED_NAMES = 16384


class IgnoreFile:
    """The patterns of one ignore file; ``verdict`` is True (ignored), False (re-included) or None.

    Matching goes through pathspec's public ``GitIgnoreSpec.check_file`` on its RE2 backend, named
    rather than left to pathspec's choice: the pure-Python one backtracks, and an ignore file is
    project content a model can write (``*a*a*a*a*a*a*b`` would stall every walk). An earlier version combined pathspec's private regex groups into
    one expression and broke on lines ending in ``/**``, which carry no such group.
    """

    __slots__ = ("_check", "_names", "count", "name_only", "source")

    def __init__(self, lines: Sequence[str], source: bytes | None = None) -> None:
        from pathspec import GitIgnoreSpec

        active = [line for line in (_clean(raw) for raw in lines) if line]
        spec = GitIgnoreSpec.from_lines(active, backend="re2")
        self.count = sum(1 for p in spec.patterns if p.include is not None)
        self._check = spec.check_file
        #: True when every line decides a file by its bare name (``*.log``, ``!keep.log``,
        #: ``**/gen``, directory-only ``build/``): a file's verdict then depends on its name alone.
        self.name_only = all(_name_only(line) for line in active)
        self._names: dict[str, bool | None] = {}
        #: The bytes compiled (kept for the store on disk when they are shared by text).
        self.source = source

    def verdict(self, path: str) -> bool | None:
        """``path`` is relative to the ignore file's directory, with a trailing ``/`` for directories."""
        if not self.count:
            return None
        return self._check(path).include

    def name_verdict(self, name: str) -> bool | None:
        """The verdict for a file called ``name`` (only meaningful when ``name_only``), remembered."""
        try:
            return self._names[name]
        except KeyError:
            pass
        found = self.verdict(name)
        if len(self._names) < MAX_REMEMBERED_NAMES:
            self._names[name] = found
        return found


def _clean(line: str) -> str:
    """``line`` without what git ignores in it (comments, blank lines; trailing unescaped spaces)."""
    stripped = line.rstrip("\r\n")
    if not stripped.strip() or stripped.startswith("#"):
        return ""
    return stripped


def _name_only(line: str) -> bool:
    body = line[1:] if line.startswith("!") else line
    body = body.rstrip(" ")
    if body.startswith("**/"):
        body = body[3:]
    if body.endswith("/"):
        body = body[:-1]
    return bool(body) and "/" not in body


#: Ignore files up to this size are shared by their text (larger ones are compiled per file).
MAX_SHARED_TEXT_BYTES = 64 * 1024


class IgnoreCache:
    """Compiled ignore files keyed by (device, inode, size, mtime, ctime): edits are picked up.

    An entry read within ``RACY_MARGIN_NS`` of the file's own timestamps is "racy" (an edit in
    the same timestamp tick would keep the key): it keeps the bytes it was compiled from and is
    re-read and compared on every use until it is old enough. The server's directory listing
    cache (``listings``) lives here too, so that both are dropped together.

    With a ``store`` (``_dirstore.ListingStore``), both start from what an earlier server wrote:
    seeded on first use, written back after a walk that read something new (``save``).
    """

    def __init__(self, max_entries: int = MAX_CACHED) -> None:
        from ._answers import Answers
        from ._dircache import ListingCache

        self.max_entries = max_entries
        self._files: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        #: Compiled ignore files by their bytes: a tree repeats the same .gitignore in many
        #: directories (a first glob of 100,000 files compiled 493 copies of three lines), and a
        #: compiled file depends on its text alone (paths are given relative to its directory).
        self._by_text: OrderedDict[bytes, IgnoreFile] = OrderedDict()
        self._lock = threading.Lock()
        self.listings = ListingCache()
        #: Whole glob answers with the directories and ignore files that decided them (``_answers``).
        self.answers = Answers()
        self.store: ListingStore | None = None
        #: Ignore-file texts from the store by key, compiled when a file with that key is loaded.
        self._stored: dict[tuple[int, ...], bytes] = {}
        self._seeded = False
        self._dirty = False  # an ignore file was compiled since the last save

    def persist_to(self, store: ListingStore | None) -> None:
        """Seed from, and save to, ``store`` from now on (None: keep nothing on disk)."""
        self.clear()
        self.store = store

    def prepare(self) -> None:
        """Seed both caches from the store once (a walk calls this before its first directory)."""
        if self._seeded:
            return
        with self._lock:
            if self._seeded:
                return
            self._seeded = True
            store = self.store
        if store is None:
            return
        answers = store.read_answers()
        if answers is not None:
            self.answers.seed(answers[1], answers[0] - self.listings.margin_ns)
        snapshot = store.read()
        if snapshot is None:
            return
        self.listings.seed(snapshot.listings, snapshot.written_ns)
        texts = snapshot.texts
        stored: dict[tuple[int, ...], bytes] = {}
        newest_allowed = snapshot.written_ns - self.listings.margin_ns
        for record in snapshot.ignores:
            try:
                dev, ino, size, mtime, ctime, index = record
                text = texts[index]
            except (TypeError, ValueError, IndexError):
                continue
            key = (dev, ino, size, mtime, ctime)
            well_formed = all(type(v) is int for v in key) and type(text) is bytes and len(text) == size
            if well_formed and max(mtime, ctime) <= newest_allowed:
                stored[key] = text
        with self._lock:
            self._stored = stored

    def save(self) -> None:
        """Write both caches to the store if either learnt something since the last save."""
        store = self.store
        if store is None:
            return
        if self.answers.dirty:
            store.write_answers(self.listings.clock(), self.answers.records())
        if not (self._dirty or self.listings.dirty):
            return
        from ._dirstore import Snapshot

        written_ns = self.listings.clock()
        listings = self.listings.records()
        with self._lock:
            self._dirty = False
            texts: dict[bytes, int] = {}
            ignores: list[Any] = []
            for key, entry in self._files.items():
                source = entry.rules.source
                if entry.data is None and source is not None:  # racy ones are re-read, never stored
                    ignores.append((*key, texts.setdefault(source, len(texts))))
            for key, text in self._stored.items():  # seeded and not used by this server yet
                if key not in self._files:
                    ignores.append((*key, texts.setdefault(text, len(texts))))
        store.write(Snapshot(written_ns=written_ns, listings=listings, texts=list(texts), ignores=ignores))

    def load(self, dir_fd: int, name: str) -> IgnoreFile | None:
        """The ignore file ``name`` in the directory ``dir_fd`` (never through a link); None if absent."""
        return self.load_keyed(dir_fd, name)[0]

    def load_keyed(self, dir_fd: int, name: str) -> tuple[IgnoreFile | None, tuple[int, ...] | None]:
        """``load`` and the stat key the answer was decided by; None for the key when no key vouches
        for it: the file is racy (an edit in the same tick would keep its key) or vanished."""
        if not self._seeded:
            self.prepare()
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return None, None
        key = _key(st)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IGNORE_FILE_BYTES:
            return None, key
        with self._lock:
            cached = self._files.get(key)
            text = self._stored.pop(key, None) if cached is None and self._stored else None
        if cached is not None and cached.data is None:
            with self._lock:
                self._files.move_to_end(key)
            return cached.result(), key
        if text is not None:  # the store's copy of a file whose key (ctime included) is unchanged
            entry = _Entry(self._compiled(text), None)
            self._remember(key, entry)
            return entry.result(), key
        return self._read(dir_fd, name)

    def _read(self, dir_fd: int, name: str) -> tuple[IgnoreFile | None, tuple[int, ...] | None]:
        started = self.listings.clock()
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None, None
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None, None
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IGNORE_FILE_BYTES:
            os.close(fd)
            return None, None
        try:
            data = read_all(fd)
        except OSError:
            return None, None
        key = _key(st)
        racy = started - max(st.st_mtime_ns, st.st_ctime_ns) < self.listings.margin_ns
        with self._lock:
            cached = self._files.get(key)
        if cached is not None and (cached.data is None or cached.data == data):
            compiled = cached.rules  # the same bytes: keep the same object (walks key on it)
        else:
            compiled = self._compiled(data)
        entry = _Entry(compiled, data if racy else None)
        self._remember(key, entry)
        if not racy:
            self._dirty = True
        return entry.result(), None if racy else key

    def _remember(self, key: tuple[int, ...], entry: _Entry) -> None:
        with self._lock:
            self._files[key] = entry
            self._files.move_to_end(key)
            while len(self._files) > self.max_entries:
                self._files.popitem(last=False)

    def _compiled(self, data: bytes) -> IgnoreFile:
        with self._lock:
            found = self._by_text.get(data)
            if found is not None:
                self._by_text.move_to_end(data)
                return found
        shared = len(data) <= MAX_SHARED_TEXT_BYTES
        compiled = IgnoreFile(data.decode("utf-8", "replace").splitlines(), data if shared else None)
        if shared:
            with self._lock:
                self._by_text[data] = compiled
                while len(self._by_text) > self.max_entries:
                    self._by_text.popitem(last=False)
        return compiled

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self._by_text.clear()
            self._stored = {}
            self._seeded = False
            self._dirty = False
        self.listings.clear()
        self.answers.clear()


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
    """The file and directory verdicts of a whole stack of ignore files, decided by the bare name.

    Only built when every ignore file in the stack decides files by name alone (the usual
    ``*.log`` / ``!keep.log`` kind); the root ``.entropicignore`` first, then the deepest
    ``.gitignore`` with an opinion decides — as ``stack_verdict`` does with full paths. A walk
    only asks about the entries of directories it did not prune, so the directories above are
    known not to be ignored, and a name-only line matches the bare name at any depth.
    """

    __slots__ = ("_files", "_ignored", "_verdicts")

    def __init__(self, files: Sequence[IgnoreFile]) -> None:
        self._files = tuple(files)
        #: The stack's verdict by name (``name/`` for a directory), bounded: names repeat across
        #: the directories of a walk, so most are one dictionary look-up instead of one call per file.
        self._verdicts: dict[str, bool] = {}
        #: The names of ``_verdicts`` that are ignored (``keep_all`` tests a directory against it at once).
        self._ignored: set[str] = set()

    @classmethod
    def for_stack(cls, entropic: IgnoreFile | None, stack: Sequence[Level]) -> NameRules | None:
        files = ([entropic] if entropic is not None else []) + [rules for _, rules in reversed(stack)]
        if any(not rules.name_only for rules in files):
            return None
        return cls(files)

    def keep(self, names: list[str]) -> list[str]:
        """``names`` without the ignored ones."""
        if not self._files:
            return list(names)
        verdicts = self._verdicts
        try:
            return [n for n in names if not verdicts[n]]
        except KeyError:
            pass
        decide = self._decide
        if len(verdicts) >= MAX_REMEMBERED_NAMES:
            return [n for n in names if not decide(n)]
        for n in names:
            if n not in verdicts:
                self._remember(n, decide(n))
        return [n for n in names if not verdicts[n]]

    def keep_all(self, names: list[str]) -> list[str]:
        """``keep(names)`` for a whole directory: the names not seen yet decided once, then one set test
        of the directory against the ignored ones (most directories hold none); ``names`` may be returned."""
        if not self._files:
            return names
        verdicts = self._verdicts
        unknown = set(names).difference(verdicts)
        if unknown:
            if len(verdicts) + len(unknown) > MAX_REMEMBERED_NAMES:
                return self.keep(names)
            for n in unknown:
                self._remember(n, self._decide(n))
        ignored = self._ignored
        if ignored.isdisjoint(names):
            return names
        return [n for n in names if n not in ignored]

    def _remember(self, name: str, verdict: bool) -> None:
        self._verdicts[name] = verdict
        if verdict:
            self._ignored.add(name)

    def ignored(self, name: str) -> bool:
        verdict = self._verdicts.get(name)
        if verdict is None:
            verdict = self._decide(name)
            if len(self._verdicts) < MAX_REMEMBERED_NAMES:
                self._remember(name, verdict)
        return verdict

    def _decide(self, name: str) -> bool:
        for rules in self._files:
            verdict = rules.name_verdict(name)
            if verdict is not None:
                return verdict
        return False

    def dir_ignored(self, name: str) -> bool:
        """Is the sub-directory ``name`` ignored? Decided by its bare name too (``build/``, ``**/gen``)."""
        return self.ignored(name + "/")

    def dirs_kept(self, names: list[str]) -> list[str]:
        """``names`` (sub-directories) without the ignored ones."""
        if not self._files:
            return list(names)
        ignored = self.ignored
        return [n for n in names if not ignored(n + "/")]
