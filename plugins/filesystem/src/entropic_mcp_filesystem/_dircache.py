"""Directory listings remembered between walks, validated the way git validates its index.

A listing is keyed by the directory's (device, inode) and trusted only while the directory's
``st_mtime_ns`` and ``st_ctime_ns`` are exactly those seen before it was read: creating,
removing or renaming an entry changes both. Two rules keep that sound:

* the "racy" rule: a listing is only stored when both timestamps are older than the walk's
  start by ``margin_ns`` (2 s). A change made in the same timestamp tick as the listing's own
  mtime would leave the timestamps unchanged; a directory that old cannot get such a change
  after it was read.
* only filesystems known to update directory timestamps on every change (``TRUSTED_FS``,
  looked up in ``/proc/self/mountinfo``) are cached; anything else (proc, network and FUSE
  filesystems, an unknown platform) is read afresh on every walk.

The cache never replaces opening a directory: walks still open every directory relative to its
verified parent with ``O_NOFOLLOW`` and validate the listing with one ``fstat`` of that
descriptor. Memory is bounded by names held (LRU); the cache lives in the server's
``IgnoreCache`` and is dropped with it (``set_working_dir``, ``close``). ``records`` and
``seed`` carry it to and from the store on disk (``_dirstore``) that a new server starts from.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

#: Filesystems whose directory mtime/ctime change on every create, remove and rename.
TRUSTED_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "bcachefs"})
MOUNTINFO = "/proc/self/mountinfo"
RACY_MARGIN_NS = 2_000_000_000
MAX_CACHED_NAMES = 500_000
#: Derived results kept per listing (different ignore stacks or patterns); more are recomputed.
MAX_VIEWS = 8


class Listing:
    """One directory as read: its file and sub-directory names, in directory order (``.git`` left out).

    The file names are held either as a list (``files``, read from disk) or as the store's
    NUL-joined text (``text``), whichever the listing was made from; a list is split from the
    text only when something asks for it. A glob by suffix matches the text without splitting
    it, so a first call from the store does not build (and later free) one string per file.
    """

    __slots__ = ("_files", "_text", "count", "ctime", "dirs", "has_gitignore", "key", "mtime", "views", "weight")

    def __init__(
        self,
        *,
        mtime: int,
        ctime: int,
        count: int,
        files: list[str] | None = None,
        dirs: list[str],
        text: str | None = None,
    ) -> None:
        self.mtime = mtime
        self.ctime = ctime
        self.count = count  # every entry the directory held (the walk budget counts them all)
        self.dirs = dirs
        self.views: dict[Hashable, tuple[Any, int]] | None = None  # key -> (value, names it holds)
        self.key: tuple[int, int] | None = None
        if files is not None:
            self._files: list[str] | None = files
            self._text: str | None = None
            self.has_gitignore = ".gitignore" in files
            held = len(files)
        else:
            self._files = None
            self._text = text = text or ""
            self.has_gitignore = _has_name(text, ".gitignore")
            held = text.count("\0") + 1 if text else 0
        self.weight = held + len(dirs) + 1

    @property
    def files(self) -> list[str]:
        """The file names (split from the stored text on first use; the text is then dropped)."""
        files = self._files
        if files is None:
            text = self._text
            files = self._files = text.split("\0") if text else []
            self._text = None
        return files

    @property
    def text(self) -> str:
        """The file names joined by NUL (no file name holds one), as the store writes them."""
        text = self._text
        return text if text is not None else "\0".join(self._files or ())

    @property
    def has_files(self) -> bool:
        return bool(self._files) or bool(self._text)


def _has_name(text: str, name: str) -> bool:
    """Is ``name`` one of the NUL-separated names of ``text``?"""
    return text == name or text.startswith(name + "\0") or text.endswith("\0" + name) or f"\0{name}\0" in text


class ListingCache:
    """Listings by (device, inode); ``clock`` and ``margin_ns`` are the racy rule's inputs."""

    def __init__(
        self,
        max_names: int = MAX_CACHED_NAMES,
        *,
        margin_ns: int = RACY_MARGIN_NS,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.max_names = max_names
        self.margin_ns = margin_ns
        self.clock = clock
        self._entries: OrderedDict[tuple[int, int], Listing] = OrderedDict()
        self._names = 0
        self._lock = threading.Lock()
        self._mountinfo: bytes | None = None
        self._fs_types: dict[int, str] = {}
        #: A listing was stored since the last ``records`` (the store on disk is behind).
        self.dirty = False
        #: Records from the store not turned into listings yet (``seed``): a new server whose
        #: first glob is answered whole (``_answers``) never builds them.
        self._pending: tuple[list[Any], int] | None = None

    def __len__(self) -> int:
        self._settle()
        return len(self._entries)

    @property
    def names(self) -> int:
        self._settle()
        return self._names

    def held(self) -> list[Listing]:
        """The listings held, least recently used first."""
        self._settle()
        with self._lock:
            return list(self._entries.values())

    # -- lookups and stores ---------------------------------------------------------------

    def get(self, st: os.stat_result) -> Listing | None:
        """The listing of the directory ``st`` describes, if it has not changed since it was read."""
        if self._pending is not None:
            self._settle()
        key = (st.st_dev, st.st_ino)
        with self._lock:
            listing = self._entries.get(key)
            if listing is None:
                return None
            if listing.mtime != st.st_mtime_ns or listing.ctime != st.st_ctime_ns:
                del self._entries[key]
                self._names -= listing.weight
                return None
            self._entries.move_to_end(key)
            return listing

    def storable(self, st: os.stat_result, started_ns: int, trusted: Callable[[int], bool]) -> bool:
        """May a listing read after ``st`` was taken (walk begun at ``started_ns``) be stored?"""
        newest = max(st.st_mtime_ns, st.st_ctime_ns)
        return started_ns - newest >= self.margin_ns and trusted(st.st_dev)

    def put(self, st: os.stat_result, listing: Listing) -> None:
        if self._pending is not None:
            self._settle()
        key = (st.st_dev, st.st_ino)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._names -= old.weight
            listing.key = key
            self._entries[key] = listing
            self._names += listing.weight
            self.dirty = True
            self._evict()

    def view(self, listing: Listing, key: Hashable, compute: Callable[[], Any], weight: Callable[[Any], int]) -> Any:
        """A result derived from ``listing`` alone (and ``key``), computed once and remembered."""
        views = listing.views
        found = views.get(key) if views is not None else None
        if found is not None:
            return found[0]
        value = compute()
        cost = weight(value)
        with self._lock:
            if listing.views is None:
                listing.views = {}
            elif len(listing.views) >= MAX_VIEWS:
                dropped = sum(held for _, held in listing.views.values())
                listing.views.clear()
                listing.weight -= dropped
                if self._owned(listing):
                    self._names -= dropped
            listing.views[key] = (value, cost)
            listing.weight += cost
            if self._owned(listing):
                self._names += cost
                self._evict()
        return value

    def _owned(self, listing: Listing) -> bool:
        # A listing evicted (or replaced) meanwhile no longer counts against the budget.
        return listing.key is not None and self._entries.get(listing.key) is listing

    def _evict(self) -> None:
        while self._names > self.max_names and self._entries:
            _, old = self._entries.popitem(last=False)
            self._names -= old.weight

    # -- to and from the store on disk ------------------------------------------------------

    def records(self) -> list[tuple[int, int, int, int, int, str, str]]:
        """Every listing held, least recently used first, as the store writes it; clears ``dirty``."""
        self._settle()
        with self._lock:
            self.dirty = False
            return [
                (
                    dev,
                    ino,
                    listing.mtime,
                    listing.ctime,
                    listing.count,
                    listing.text,
                    "\0".join(listing.dirs),
                )
                for (dev, ino), listing in self._entries.items()
            ]

    def seed(self, records: list[Any], written_ns: int) -> None:
        """Hold the listings of ``records`` (read from a store written at ``written_ns``).

        Each is still checked against the directory's ``fstat`` on use (``get``). Records that
        are malformed, racy against the write time or on a filesystem not trusted now are dropped.
        They are turned into listings when the cache is first used, not now.
        """
        self._settle()
        with self._lock:
            self._pending = (records, written_ns)

    def _settle(self) -> None:
        """Turn the records ``seed`` was given into listings, once."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self._seed_now(*pending)

    def _seed_now(self, records: list[Any], written_ns: int) -> None:
        trusted = self.trust_checker()
        newest_allowed = written_ns - self.margin_ns
        kept: list[tuple[tuple[int, int], Listing]] = []
        add = kept.append
        for record in records:
            try:
                dev, ino, mtime, ctime, count, files, dirs = record
            except (TypeError, ValueError):
                continue
            if not (type(dev) is type(ino) is type(mtime) is type(ctime) is type(count) is int):
                continue
            if not (type(files) is str and type(dirs) is str):
                continue
            if mtime > newest_allowed or ctime > newest_allowed or not trusted(dev):
                continue
            # The file names stay joined until a walk needs them as a list (``Listing.files``).
            listing = Listing(mtime=mtime, ctime=ctime, count=count, text=files, dirs=dirs.split("\0") if dirs else [])
            add(((dev, ino), listing))
        with self._lock:
            for key, listing in reversed(kept):  # older than anything this server read: the LRU's front
                if key in self._entries:
                    continue  # read by this server already: at least as current
                listing.key = key
                self._entries[key] = listing
                self._entries.move_to_end(key, last=False)
                self._names += listing.weight
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self.dirty = False
            self._pending = None
            self._entries.clear()
            self._names = 0
            self._fs_types.clear()
            self._mountinfo = None

    # -- which filesystems may be cached ----------------------------------------------------

    def trust_checker(self) -> Callable[[int], bool]:
        """A per-walk ``device -> bool``: is the filesystem one whose directory times are kept?

        ``/proc/self/mountinfo`` is read once per walk that needs it (mounts come and go).
        """
        verdicts: dict[int, bool] = {}
        read = False

        def trusted(dev: int) -> bool:
            nonlocal read
            verdict = verdicts.get(dev)
            if verdict is None:
                if not read:
                    self._refresh_mounts()
                    read = True
                with self._lock:
                    fs_type = self._fs_types.get(dev)
                verdict = verdicts[dev] = fs_type in TRUSTED_FS
            return verdict

        return trusted

    def _refresh_mounts(self) -> None:
        try:
            with open(MOUNTINFO, "rb") as handle:
                data = handle.read()
        except OSError:
            data = b""
        with self._lock:
            if data == self._mountinfo:
                return
        types = parse_mountinfo(data)
        with self._lock:
            self._mountinfo = data
            self._fs_types = types


def parse_mountinfo(data: bytes) -> dict[int, str]:
    """``device number -> filesystem type`` from ``/proc/self/mountinfo`` text."""
    types: dict[int, str] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-")
            major, minor = fields[2].split(":")
            fs_type = fields[separator + 1]
            dev = os.makedev(int(major), int(minor))
        except (ValueError, IndexError):
            continue
        if types.get(dev, fs_type) != fs_type:
            types[dev] = ""  # the same device under two types: trust neither
        else:
            types[dev] = fs_type
    return types
