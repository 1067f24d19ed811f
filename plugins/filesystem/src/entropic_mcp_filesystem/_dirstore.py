"""Directory listings and ignore files kept on disk between servers, as git keeps its untracked cache.

A new server's first glob would otherwise read every directory listing and every ignore file of
the tree. Instead the server's ``IgnoreCache`` is seeded from one file per project root, written
after a walk that read something new. Nothing in the file is trusted as it stands:

* a listing is keyed by (device, inode) and used only if the directory's ``fstat`` during the
  walk shows the ``st_mtime_ns`` and ``st_ctime_ns`` it was read with (``ListingCache.get``,
  the same check a repeated walk makes); only listings the racy rule let into memory are written
  (their timestamps were at least ``RACY_MARGIN_NS`` older than the walk that read them), and a
  loaded one whose timestamps are not that much older than the file's write time is dropped;
* an ignore file's text is keyed by (device, inode, size, mtime, ctime) and compiled only when a
  walk finds a file with that exact key (``IgnoreCache.load``); racy ones are never written;
* listings of a filesystem not in ``TRUSTED_FS`` now are dropped.

Whole glob answers (``_answers``) are kept in a second file beside it, ``<the same name>.answers``,
framed and checked the same way, and pruned with it.

The file lives outside the project (``<cache dir>/listings/<hash of the canonical root>``),
is replaced atomically, starts with a magic line, a format version and the Python version
(``marshal`` is version-specific), and carries a CRC-32 of its payload: anything unreadable,
corrupt, foreign or oversized is ignored and the walk reads the disk, never an error. Its size
is bounded by the in-memory cache it is written from (``MAX_CACHED_NAMES``, ``MAX_CACHED``);
at most ``MAX_STORE_FILES`` roots are kept, the least recently written removed first.

Layout (chosen by measurement over the 100,000-file bench tree, 2,061 listings: ``marshal`` of
per-directory names joined by NUL loads in 0.4 ms plus 3 ms to split, against 11 ms for
``marshal`` of name lists, 8 ms ``pickle``, 5.5 ms ``orjson``, 16 ms ``json``; see
docs/decisions.md).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

from entropic_mcp.toolkit.paths import cache_directory

MAGIC = b"entropic-mcp listings\n"
#: The whole glob answers (``_answers``) live beside the listings in a file of their own, so that
#: keeping a new answer writes that answer, not every listing again.
ANSWERS_MAGIC = b"entropic-mcp answers\n"
ANSWERS_SUFFIX = ".answers"
FORMAT_VERSION = 1
#: format version, marshal version, Python major and minor, CRC-32 and length of the payload
HEADER = struct.Struct(">HHBBIQ")
MAX_STORE_BYTES = 256 << 20
MAX_STORE_FILES = 64

#: (device, inode, mtime_ns, ctime_ns, entry count, NUL-joined file names, NUL-joined dir names)
ListingRecord = tuple[int, int, int, int, int, str, str]
#: (device, inode, size, mtime_ns, ctime_ns, index of the text in the texts list)
IgnoreRecord = tuple[int, int, int, int, int, int]


def default_directory() -> Path:
    """``$ENTROPIC_MCP_DATA_DIR/cache/listings`` if set, else the user's cache directory's ``listings``."""
    return Path(cache_directory("listings"))


class Snapshot:
    """What one store file holds: when it was written, listings, ignore-file texts and their keys."""

    __slots__ = ("ignores", "listings", "texts", "written_ns")

    def __init__(
        self, *, written_ns: int, listings: list[ListingRecord], texts: list[bytes], ignores: list[IgnoreRecord]
    ) -> None:
        self.written_ns = written_ns
        self.listings = listings
        self.texts = texts
        self.ignores = ignores


class ListingStore:
    """The store file of one project root."""

    def __init__(self, root: Path, directory: Path | None = None) -> None:
        self.root = os.path.realpath(root)
        self.directory = directory if directory is not None else default_directory()
        digest = hashlib.sha256(os.fsencode(self.root)).hexdigest()[:32]
        self.path = self.directory / digest

    @property
    def answers_path(self) -> Path:
        return self.path.with_name(self.path.name + ANSWERS_SUFFIX)

    def read(self) -> Snapshot | None:
        """The snapshot on disk, or None when there is none usable (missing, corrupt, foreign, too big)."""
        data = _read(self.path)
        return decode(data, self.root) if data is not None else None

    def write(self, snapshot: Snapshot) -> None:
        """Replace the file atomically; failures are ignored (the next server walks the disk)."""
        if self._replace(self.path, encode(snapshot, self.root)):
            self._prune()

    def read_answers(self) -> tuple[int, list[Any]] | None:
        """(when written, the answer records) from the answers file, or None when it is not usable."""
        data = _read(self.answers_path)
        if data is None:
            return None
        value = _payload(data, ANSWERS_MAGIC)
        try:
            stored_root, written_ns, answers = value
        except (TypeError, ValueError):
            return None
        if stored_root != self.root or type(written_ns) is not int or type(answers) is not list:
            return None
        return written_ns, answers

    def write_answers(self, written_ns: int, answers: list[Any]) -> None:
        """Replace the answers file atomically (failures are ignored, as ``write``'s)."""
        self._replace(self.answers_path, _framed(ANSWERS_MAGIC, (self.root, written_ns, answers)))

    def _replace(self, path: Path, data: bytes) -> bool:
        if len(data) > MAX_STORE_BYTES:
            return False
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        return True

    def _prune(self) -> None:
        """At most ``MAX_STORE_FILES`` roots: the least recently written go, with their answers."""
        try:
            with os.scandir(self.directory) as scan:
                found = [
                    (e.stat(follow_symlinks=False).st_mtime_ns, e.path)
                    for e in scan
                    if e.is_file() and not e.name.endswith(ANSWERS_SUFFIX)
                ]
        except OSError:
            return
        if len(found) <= MAX_STORE_FILES:
            return
        found.sort()
        for _, path in found[: len(found) - MAX_STORE_FILES]:
            for doomed in (path, path + ANSWERS_SUFFIX):
                try:
                    os.unlink(doomed)
                except OSError:
                    pass


def _read(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_STORE_BYTES + 1)
    except OSError:
        return None


def _python() -> tuple[int, int]:
    return sys.version_info[0], sys.version_info[1]


def _framed(magic: bytes, value: Any) -> bytes:
    payload = marshal.dumps(value)
    major, minor = _python()
    header = HEADER.pack(FORMAT_VERSION, marshal.version, major, minor, zlib.crc32(payload), len(payload))
    return magic + header + payload


def _payload(data: bytes, magic: bytes) -> Any:
    """The value framed in ``data`` if it is whole and of this format and Python; else None."""
    if not data.startswith(magic) or len(data) > MAX_STORE_BYTES:
        return None
    start = len(magic) + HEADER.size
    try:
        version, marshal_version, major, minor, crc, length = HEADER.unpack_from(data, len(magic))
    except struct.error:
        return None
    payload = memoryview(data)[start:]
    if (
        (version, marshal_version, (major, minor)) != (FORMAT_VERSION, marshal.version, _python())
        or len(payload) != length
        or zlib.crc32(payload) != crc
    ):
        return None
    try:
        return marshal.loads(payload)
    except (ValueError, TypeError, EOFError):
        return None


def encode(snapshot: Snapshot, root: str) -> bytes:
    return _framed(MAGIC, (root, snapshot.written_ns, snapshot.listings, snapshot.texts, snapshot.ignores))


def decode(data: bytes, root: str) -> Snapshot | None:
    """The snapshot in ``data`` if it is whole, of this format and Python, and of ``root``; else None."""
    value = _payload(data, MAGIC)
    try:
        stored_root, written_ns, listings, texts, ignores = value
    except (ValueError, TypeError):
        return None
    if (
        stored_root != root
        or type(written_ns) is not int
        or type(listings) is not list
        or type(texts) is not list
        or type(ignores) is not list
    ):
        return None
    # The records are checked where they are used (``ListingCache.seed``, ``IgnoreCache.prepare``).
    return Snapshot(written_ns=written_ns, listings=listings, texts=texts, ignores=ignores)
