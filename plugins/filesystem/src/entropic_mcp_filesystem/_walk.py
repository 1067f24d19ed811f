"""Bounded, gitignore-aware directory walks over verified directory descriptors.

Every directory is opened relative to its parent's descriptor with ``O_NOFOLLOW``, so a walk
never follows a symlink (nor one swapped in mid-walk). Ignored directories are pruned before
they are opened; ``.git`` is always skipped; the walk stops after ``limit`` entries and says so.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable, Hashable, Iterator
from itertools import compress
from pathlib import Path
from typing import Any

import attrs
from entropic_mcp import ToolError

from ._answers import Trace
from ._dircache import Listing
from ._fsio import DIR_FLAGS, Location, open_dir
from ._ignore import ENTROPICIGNORE, GITIGNORE, IgnoreCache, IgnoreFile, Level, NameRules, stack_verdict

#: Deeper than this a walk does not go (and says so); protects the recursion and the fd count.
MAX_DEPTH = 128


@attrs.define(kw_only=True, slots=True)
class Dir:
    """One directory of a walk: its open descriptor (valid until the walk resumes) and entries."""

    fd: int
    rel: str  # root-relative (inside) or walk-top-relative (outside) directory; "" at the base
    depth: int  # 1 for the walk's top directory
    files: list[os.DirEntry[str]]  # every non-directory entry (symlinks included), not yet ignore-checked
    file_names: list[str]  # the names of ``files``, in the same order
    dirs: list[os.DirEntry[str]]  # sub-directories that survived pruning
    stack: tuple[Level, ...]
    entropic: IgnoreFile | None
    #: File verdicts by bare name for this directory's stack (None: check full paths).
    names: NameRules | None = None

    def join(self, name: str) -> str:
        return f"{self.rel}/{name}" if self.rel else name

    def file_ignored(self, name: str) -> bool:
        """Is the file ``name`` of this directory ignored (directories above are already pruned)?"""
        if self.names is not None:
            return self.names.ignored(name)
        return self.ignored(self.join(name), False)

    def ignored(self, path: str, is_dir: bool) -> bool:
        return _ignored(path, is_dir, self.stack, self.entropic)


def _ignored(path: str, is_dir: bool, stack: tuple[Level, ...], entropic: IgnoreFile | None) -> bool:
    probe = path + "/" if is_dir else path
    if entropic is not None:
        verdict = entropic.verdict(probe)
        if verdict is not None:
            return verdict
    return stack_verdict(stack, probe)


@attrs.define(kw_only=True, slots=True)
class NameDir:
    """One directory of a names-only walk.

    ``names`` are all its non-directory entries (in directory order, ignore rules not applied yet; shared with
    the listing cache: read it, never change it), ``text`` the same names joined by NUL (what a listing from
    the store holds; reading it splits nothing); ``kept`` drops the ignored ones from a subset.
    """

    fd: int
    rel: str
    depth: int
    stack: tuple[Level, ...]
    entropic: IgnoreFile | None
    _walk: Walk
    _listing: Listing
    _key: tuple[object, ...]
    _rules: NameRules | None

    @property
    def names(self) -> list[str]:
        return self._listing.files

    @property
    def text(self) -> str:
        return self._listing.text

    @property
    def has_files(self) -> bool:
        return self._listing.has_files

    def join(self, name: str) -> str:
        return f"{self.rel}/{name}" if self.rel else name

    def kept_paths(self) -> list[str]:
        """Every file of this directory the ignore rules keep, as walk-relative paths (directory order)."""
        listing = self._listing
        names = listing._files if listing._files is not None else listing.text.split("\0")
        rules = self._rules
        kept = rules.keep_all(names) if rules is not None else self.kept(names)
        if not self.rel:
            return list(kept)
        lead = self.rel + "/"
        return (lead + ("\0" + lead).join(kept)).split("\0") if kept else []

    def kept(self, names: list[str]) -> list[str]:
        """``names`` (files of this directory) without those the ignore rules exclude."""
        rules = self._rules
        if rules is not None:
            return rules.keep(names)
        lead = self.rel + "/" if self.rel else ""
        stack, entropic = self.stack, self.entropic
        return [n for n in names if not _ignored(lead + n, False, stack, entropic)]

    def derived(self, tag: Hashable, compute: Callable[[], list[str]]) -> list[str]:
        """``compute()`` (worked out from ``names`` and the ignore rules alone), kept with the listing."""
        return self._walk.cache.listings.view(self._listing, (self._key, tag), compute, len)


@attrs.define(kw_only=True)
class Walk:
    """One walk's budget and outcome: ``truncated`` (entry limit), ``too_deep``, ``cancelled``."""

    limit: int
    cache: IgnoreCache
    cancelled: threading.Event | None = None
    entries: int = 0
    truncated: bool = False
    too_deep: bool = False
    stopped: bool = False
    _names: dict[tuple[object, ...], NameRules | None] = attrs.field(factory=dict)
    #: ``_name_rules`` by the (entropic, stack) pair itself: most directories inherit their parent's
    #: stack object, so this is one tuple hash per directory instead of building the rules' key.
    _by_stack: dict[tuple[object, ...], NameRules | None] = attrs.field(factory=dict)
    #: Record what a names walk visits (``_answers.Trace``), for an answer to be kept with it.
    tracing: bool = False
    trace: Trace | None = None
    #: Write the caches to the store when a names walk ends (a caller that keeps more after the
    #: walk turns this off and calls ``cache.save`` itself).
    saves: bool = True
    _started: int = 0
    _trusted: Callable[[int], bool] | None = None

    def _name_rules(self, entropic: IgnoreFile | None, stack: tuple[Level, ...]) -> NameRules | None:
        pair = (entropic, stack)
        try:
            return self._by_stack[pair]
        except KeyError:
            pass
        # Keyed without the cut lengths: the same ignore files at another depth decide names alike.
        key = (entropic, *(rules for _, rules in stack))
        if key not in self._names:
            self._names[key] = NameRules.for_stack(entropic, stack)
        found = self._by_stack[pair] = self._names[key]
        return found

    def walk(
        self,
        top_fd: int,
        top_rel: str,
        stack: tuple[Level, ...],
        entropic: IgnoreFile | None,
        *,
        max_depth: int | None = None,
        sort: bool = True,
    ) -> Iterator[Dir]:
        """Yield the directories under ``top_fd`` (itself first), depth first, sorted by name."""
        yield from self._visit(top_fd, top_rel, stack, entropic, 1, max_depth, sort)

    def _visit(
        self,
        fd: int,
        rel: str,
        stack: tuple[Level, ...],
        entropic: IgnoreFile | None,
        depth: int,
        max_depth: int | None,
        sort: bool,
    ) -> Iterator[Dir]:
        if self.cancelled is not None and self.cancelled.is_set():
            self.stopped = True
            return
        try:
            with os.scandir(fd) as scan:
                entries = list(scan)
        except OSError:
            return  # vanished or unreadable mid-walk: nothing to report under it
        self.entries += len(entries)
        if self.entries > self.limit:
            entries = entries[: max(0, len(entries) - (self.entries - self.limit))]
            self.entries = self.limit
            self.truncated = True
        # List comprehensions, not a loop with branches: this is the hot path of every walk.
        try:
            subdirs = [e for e in entries if e.is_dir(follow_symlinks=False)]
            files = [e for e in entries if not e.is_dir(follow_symlinks=False)] if subdirs else entries
        except OSError:  # an entry of unknown type vanished before it could be stat'ed
            subdirs, files = _split_slowly(entries)
        if sort:
            files.sort(key=_name)
        names = [e.name for e in files]
        has_gitignore = GITIGNORE in names
        if ".git" in names:
            files = [e for e in files if e.name != ".git"]
            names = [e.name for e in files]
        if subdirs and any(e.name == ".git" for e in subdirs):
            subdirs = [e for e in subdirs if e.name != ".git"]
        if has_gitignore:
            rules = self.cache.load(fd, GITIGNORE)
            if rules is not None:
                stack = (*stack, (len(rel) + 1 if rel else 0, rules))
        current = Dir(
            fd=fd,
            rel=rel,
            depth=depth,
            files=files,
            file_names=names,
            dirs=subdirs,
            stack=stack,
            entropic=entropic,
            names=self._name_rules(entropic, stack),
        )
        if subdirs:
            if current.names is not None:  # every ignore file decides by name: no path matching
                dir_ignored = current.names.dir_ignored
                current.dirs = subdirs = [d for d in subdirs if not dir_ignored(d.name)]
            else:
                current.dirs = subdirs = [d for d in subdirs if not current.ignored(current.join(d.name), True)]
            if sort:
                subdirs.sort(key=_name)
        yield current
        yield from self._descend(
            fd,
            rel,
            [entry.name for entry in subdirs],
            depth,
            max_depth,
            lambda child, child_rel: self._visit(child, child_rel, stack, entropic, depth + 1, max_depth, sort),
        )

    def _descend(
        self,
        fd: int,
        rel: str,
        subdirs: list[str],
        depth: int,
        max_depth: int | None,
        visit: Callable[[int, str], Iterator[Any]],
    ) -> Iterator[Any]:
        """Visit each sub-directory, opened relative to ``fd`` without following links, within the limits."""
        if self.truncated or (max_depth is not None and depth >= max_depth):
            return
        if depth >= MAX_DEPTH:
            self.too_deep = self.too_deep or bool(subdirs)
            return
        for name in subdirs:
            if self.truncated or self.stopped:
                return
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # replaced by a link, removed or unreadable since it was listed: not followed
            try:
                yield from visit(child, f"{rel}/{name}" if rel else name)
            finally:
                os.close(child)

    def walk_names(
        self,
        top_fd: int,
        top_rel: str,
        stack: tuple[Level, ...],
        entropic: IgnoreFile | None,
        *,
        max_depth: int | None = None,
    ) -> Iterator[NameDir]:
        """Like ``walk``, yielding the file names of each directory (unsorted, like ``sort=False``).

        Directory listings come from the server's listing cache when the directory's timestamps
        prove them current (see ``_dircache``); directories are opened exactly as in ``walk``.
        That cache starts from the store on disk (``_dirstore``) and is written back to it when
        the walk is over, if it read something new.
        """
        self.cache.prepare()
        self._started = self.cache.listings.clock()  # before any directory of this walk is stat'ed
        if self.tracing:
            listings = self.cache.listings
            self._trusted = self._trusted or listings.trust_checker()
            self.trace = Trace(self._started, listings.margin_ns, self._trusted)
        # One generator and a stack of open directories, not one generator per directory: a yield
        # from a directory at depth d no longer passes through 2d suspended frames. The order, the
        # limits and when each descriptor is closed are those of ``_descend``.
        entered = self._enter_names(top_fd, top_rel, stack, entropic, 1)
        if entered is None:
            if self.trace is not None:
                self.trace.fail()
            if self.saves:
                self.cache.save()
            return
        yield entered[0]
        #: (descriptor, its directory, the sub-directories still to visit); the top one is the caller's
        frames: list[tuple[int, NameDir, Iterator[str]]] = [(top_fd, entered[0], self._children(entered, max_depth))]
        try:
            while frames:
                fd, parent, pending = frames[-1]
                name = next(pending, None)
                if name is None or self.truncated or self.stopped:
                    frames.pop()
                    if frames:
                        os.close(fd)
                    if self.truncated or self.stopped:
                        break
                    continue
                try:
                    child = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    # replaced by a link, removed or unreadable since it was listed: not followed,
                    # and no answer kept (a chmod of it would not show in the listing above)
                    if self.trace is not None:
                        self.trace.fail()
                    continue
                rel = f"{parent.rel}/{name}" if parent.rel else name
                try:
                    entered = self._enter_names(child, rel, parent.stack, parent.entropic, parent.depth + 1)
                except BaseException:
                    os.close(child)
                    raise
                if entered is None:
                    os.close(child)
                    if self.trace is not None:
                        self.trace.fail()
                    continue
                frames.append((child, entered[0], iter(())))
                yield entered[0]
                frames[-1] = (child, entered[0], self._children(entered, max_depth))
        finally:
            for fd, _, _ in frames[1:]:  # a walk stopped, left early or failed still closes what it opened
                os.close(fd)
        if self.saves:
            self.cache.save()

    def _children(self, entered: tuple[NameDir, list[str]], max_depth: int | None) -> Iterator[str]:
        """The sub-directories of a directory just visited that the walk goes on to (``_descend``'s limits)."""
        current, subdirs = entered
        depth = current.depth
        if self.truncated or (max_depth is not None and depth >= max_depth):
            return iter(())
        if depth >= MAX_DEPTH:
            self.too_deep = self.too_deep or bool(subdirs)
            return iter(())
        return iter(subdirs)

    def _enter_names(
        self, fd: int, rel: str, stack: tuple[Level, ...], entropic: IgnoreFile | None, depth: int
    ) -> tuple[NameDir, list[str]] | None:
        """The directory ``fd`` of a names walk and its sub-directories not ignored; None: not walked."""
        if self.cancelled is not None and self.cancelled.is_set():
            self.stopped = True
            return None
        listings = self.cache.listings
        try:
            st = os.fstat(fd)
        except OSError:
            return None
        listing = listings.get(st)
        if listing is not None and self.entries + listing.count <= self.limit:
            self.entries += listing.count
        else:  # not cached, changed, or this directory exhausts the budget: read it as walk does
            listing = self._read_listing(fd, st)
            if listing is None:
                return None
        trace = self.trace
        ignore_key: tuple[int, ...] | None = None
        if listing.has_gitignore:
            if trace is None:
                found = self.cache.load(fd, GITIGNORE)
            else:
                found, ignore_key = self.cache.load_keyed(fd, GITIGNORE)
                if ignore_key is None:
                    trace.fail()  # racy or vanished: no key vouches for the rules it gave
            if found is not None:
                stack = (*stack, (len(rel) + 1 if rel else 0, found))
        if trace is not None and trace.ok:
            trace.directory(depth - 1, rel[rel.rfind("/") + 1 :] if depth > 1 else "", st, ignore_key)
        key = (rel, entropic, stack)
        rules = self._name_rules(entropic, stack)
        subdirs = (
            listings.view(listing, key, lambda: self._unignored_dirs(listing, rel, stack, entropic, rules), len)
            if listing.dirs
            else listing.dirs
        )
        current = NameDir(
            fd=fd,
            rel=rel,
            depth=depth,
            stack=stack,
            entropic=entropic,
            walk=self,
            listing=listing,
            key=key,
            rules=rules,
        )
        return current, subdirs

    def _read_listing(self, fd: int, st: os.stat_result) -> Listing | None:
        """Read the directory ``fd`` (``st`` taken before); stored in the cache when complete and not racy."""
        try:
            with os.scandir(fd) as scan:
                entries = list(scan)
        except OSError:
            return None  # vanished or unreadable mid-walk: nothing to report under it
        count = len(entries)
        self.entries += count
        complete = True
        if self.entries > self.limit:
            entries = entries[: max(0, count - (self.entries - self.limit))]
            self.entries = self.limit
            self.truncated = True
            complete = False
        try:
            # One type check per entry (the d_type readdir gave, no stat unless it gave none).
            names = [e.name for e in entries]
            kinds = [e.is_dir(follow_symlinks=False) for e in entries]
            if True in kinds:
                subdirs = list(compress(names, kinds))
                files = [n for n, is_dir in zip(names, kinds, strict=True) if not is_dir]
            else:
                subdirs, files = [], names
        except OSError:  # an entry of unknown type vanished before it could be stat'ed
            split_dirs, split_files = _split_slowly(entries)
            subdirs, files = [e.name for e in split_dirs], [e.name for e in split_files]
            complete = False
        if ".git" in files:
            files.remove(".git")
        if ".git" in subdirs:
            subdirs.remove(".git")
        listing = Listing(mtime=st.st_mtime_ns, ctime=st.st_ctime_ns, count=count, files=files, dirs=subdirs)
        if complete:
            if self._trusted is None:
                self._trusted = self.cache.listings.trust_checker()
            if self.cache.listings.storable(st, self._started, self._trusted):
                self.cache.listings.put(st, listing)
        return listing

    def _unignored_dirs(
        self,
        listing: Listing,
        rel: str,
        stack: tuple[Level, ...],
        entropic: IgnoreFile | None,
        rules: NameRules | None,
    ) -> list[str]:
        if rules is not None:  # every ignore file decides by name: one remembered verdict per name
            return rules.dirs_kept(listing.dirs)
        lead = rel + "/" if rel else ""
        return [d for d in listing.dirs if not _ignored(lead + d, True, stack, entropic)]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (Mercurial's ``nogc``), if it was on.

    A walk that builds a listing cache allocates thousands of containers that all stay alive;
    each few hundred trigger a collection that finds nothing, and the older generations'
    collections traverse the whole heap: about 10 ms of a 60 ms first glob of the bench tree.
    A walk is bounded (``max_walk_entries``), so the garbage it could leave uncollected is too.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _split_slowly(entries: list[os.DirEntry[str]]) -> tuple[list[os.DirEntry[str]], list[os.DirEntry[str]]]:
    subdirs: list[os.DirEntry[str]] = []
    files: list[os.DirEntry[str]] = []
    for entry in entries:
        try:
            (subdirs if entry.is_dir(follow_symlinks=False) else files).append(entry)
        except OSError:
            continue
    return subdirs, files


@attrs.frozen(kw_only=True)
class Start:
    """Where a walk begins: the open top directory and the ignore rules that apply there."""

    fd: int
    rel: str
    stack: tuple[Level, ...]
    entropic: IgnoreFile | None
    display_base: str  # "" inside the root (paths are root-relative), else the absolute top

    def display(self, rel: str) -> str:
        if not self.display_base:
            return rel or "."
        return f"{self.display_base}/{rel}" if rel else self.display_base


def root_rules(root: Path, cache: IgnoreCache) -> tuple[IgnoreFile | None, IgnoreFile | None]:
    """The root's ``.entropicignore`` and ``.git/info/exclude`` (either may be None)."""
    try:
        fd = open_dir(root, ())
    except OSError:
        return None, None
    try:
        entropic = cache.load(fd, ENTROPICIGNORE)
        exclude = None
        try:
            info = open_dir(root, (".git", "info"))
        except OSError:
            info = None
        if info is not None:
            try:
                exclude = cache.load(info, "exclude")
            finally:
                os.close(info)
        return entropic, exclude
    finally:
        os.close(fd)


def start(loc: Location, *, inside: bool, root: Path, cache: IgnoreCache) -> Start:
    """Open ``loc`` for a walk with the ignore rules of the directories above it.

    A directory the root's ``.entropicignore`` excludes is refused (``ignored``); one that only
    ``.gitignore`` excludes is walked when asked for by name, with the rules found inside it.
    """
    from ._fsio import open_directory

    top_fd = open_directory(loc)
    if not inside:
        return Start(fd=top_fd, rel="", stack=(), entropic=None, display_base=loc.display)
    try:
        entropic, exclude = root_rules(root, cache)
        stack: tuple[Level, ...] = ((0, exclude),) if exclude is not None else ()
        parts = loc.parts
        if ".git" in parts:
            raise ToolError(
                "ignored",
                f"{loc.display} is inside .git, which filesystem tools never walk; "
                "use the git tools for repository data",
            )
        rel = ""
        for index, part in enumerate(parts):
            try:
                level_fd = open_dir(root, parts[:index])
            except OSError:
                break
            try:
                rules = cache.load(level_fd, GITIGNORE)
            finally:
                os.close(level_fd)
            if rules is not None:
                stack = (*stack, (len(rel) + 1 if rel else 0, rules))
            rel = f"{rel}/{part}" if rel else part
            probe = rel + "/"
            verdict = entropic.verdict(probe) if entropic is not None else None
            if verdict:
                raise ToolError(
                    "ignored",
                    f"{loc.display} is excluded by the project's .entropicignore; the filesystem tools do not show it",
                )
            if verdict is None and stack_verdict(stack, probe):
                stack = ()  # asked for by name: walk it with the rules found inside it
        return Start(fd=top_fd, rel=rel, stack=stack, entropic=entropic, display_base="")
    except BaseException:
        os.close(top_fd)
        raise
