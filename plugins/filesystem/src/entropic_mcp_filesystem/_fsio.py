"""Opening confined paths so that a swapped-in symlink can never redirect a read or a write.

``confine`` canonicalises a path (every symlink resolved), so the canonical path has no links in
it. Here every component is opened relative to its parent's descriptor with ``O_NOFOLLOW``,
starting from the root's descriptor (or ``/`` for an approved outside path): if a component was
swapped for a symlink after the check, the open fails instead of following it. Writes go to a
temporary file created in the already-open parent directory and are renamed over the target
within that same directory.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

import attrs
from entropic_mcp import ToolError
from entropic_mcp.toolkit.paths import ResolvedPath, is_within, shown_entry
from entropic_mcp.toolkit.paths import printable as printable  # re-exported: the tools import it from here

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not hang the call; it has no effect on regular files.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

FIND_HINT = "use filesystem.list_directory or filesystem.glob to find the right path"


@attrs.frozen(kw_only=True)
class Location:
    """Where a resolved path is opened from: a trusted base directory and the components below it."""

    base: Path
    parts: tuple[str, ...]
    display: str

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""


def on_disk(path: Path, root: Path) -> Path:
    """``path`` (below ``root``, already canonical) with each missing component that holds U+FFFD
    replaced by the one entry of its directory whose ``printable`` form it is, so a name the
    tools showed with U+FFFD names the same file when the model sends it back; links followed.

    Raises ``ToolError("ambiguous_path")`` when several entries print the same way. A path that
    exists as written, or with no such entry, is returned unchanged (the tool then says not_found).
    """
    if os.path.lexists(path) or not is_within(path, root) or path == root:
        return path
    current = root
    parts = path.relative_to(root).parts
    for index, part in enumerate(parts):
        nxt = current / part
        if "\ufffd" in part and not os.path.lexists(nxt):
            entry = shown_entry(current, part, display=printable(str(nxt.relative_to(root))))
            if entry is None:
                return path
            nxt = Path(os.path.realpath(current / entry))
            if not is_within(nxt, root):
                return Path(os.path.realpath(nxt.joinpath(*parts[index + 1 :])))
        current = nxt
    return Path(os.path.realpath(current))


def locate(resolved: ResolvedPath, root: Path) -> Location:
    display = printable(resolved.display)
    if resolved.inside:
        return Location(base=root, parts=resolved.path.relative_to(root).parts, display=display)
    return Location(base=Path("/"), parts=resolved.path.parts[1:], display=display)


def unsafe(display: str) -> ToolError:
    return ToolError(
        "unsafe_path",
        f"a component of {display} is a symbolic link that could not be followed safely (it was "
        "replaced while the call ran, or it loops); nothing was read or written. Check the path "
        "with filesystem.list_directory and call again",
    )


def os_failure(exc: OSError, display: str, verb: str = "open") -> ToolError:
    """The ToolError for an OS error on ``display``; the message says how to recover."""
    code = exc.errno
    if code == errno.ENOENT:
        return ToolError("not_found", f"{display} does not exist; {FIND_HINT}")
    if code == errno.ENOTDIR:
        return ToolError("not_found", f"a parent of {display} is a file, not a directory; {FIND_HINT}")
    if code == errno.ELOOP:
        return unsafe(display)
    if code == errno.EISDIR:
        return is_directory(display)
    if code == errno.ENAMETOOLONG:
        return ToolError("invalid_args", f"{display} is too long a path for this system; use a shorter name")
    reason = exc.strerror or type(exc).__name__
    return ToolError("io_error", f"could not {verb} {display}: {reason}; check its permissions or use another path")


def is_directory(display: str) -> ToolError:
    return ToolError("is_directory", f"{display} is a directory; use filesystem.list_directory to see what it contains")


def _is_symlink_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_dir(base: Path, parts: tuple[str, ...] | list[str], *, create: bool = False) -> int:
    """A descriptor for ``base/parts...`` reached without following any link below ``base``.

    Raises ``OSError`` (``ELOOP`` when a component is now a symlink); with ``create``, missing
    directories are made one by one, each relative to its verified parent.
    """
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            try:
                child = _open_child(fd, part)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile (or swapped in): the open below checks what it is
                child = _open_child(fd, part)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child(fd: int, part: str) -> int:
    try:
        return os.open(part, DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        # Linux reports a symlink opened with O_DIRECTORY | O_NOFOLLOW as ENOTDIR: tell them apart.
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and _is_symlink_at(fd, part):
            raise OSError(errno.ELOOP, "symbolic link in path", part) from None
        raise


def open_directory(loc: Location) -> int:
    """Open ``loc`` as a directory; ``not_directory`` when it is something else."""
    try:
        return open_dir(loc.base, loc.parts)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR and loc.parts:
            try:
                parent = open_dir(loc.base, loc.parts[:-1])
            except OSError:
                raise os_failure(exc, loc.display) from None
            try:
                os.stat(loc.name, dir_fd=parent, follow_symlinks=False)
            except OSError:
                raise os_failure(exc, loc.display) from None
            finally:
                os.close(parent)
            raise ToolError(
                "not_directory",
                f"{loc.display} is a file, not a directory; read it with filesystem.read_file or list its parent",
            ) from None
        raise os_failure(exc, loc.display) from None


def open_regular(loc: Location) -> tuple[int, os.stat_result]:
    """Open ``loc`` for reading: a regular file, never through a link. The caller closes the fd."""
    if not loc.parts:
        raise is_directory(loc.display)
    try:
        parent = open_dir(loc.base, loc.parts[:-1])
    except OSError as exc:
        raise os_failure(exc, loc.display) from None
    try:
        fd = os.open(loc.name, FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise os_failure(exc, loc.display) from None
    finally:
        os.close(parent)
    return fd, _regular_stat(fd, loc.display)


def _regular_stat(fd: int, display: str) -> os.stat_result:
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode):
        return st
    os.close(fd)
    if stat.S_ISDIR(st.st_mode):
        raise is_directory(display)
    raise ToolError("not_regular_file", f"{display} is not a regular file (device, FIFO or socket); use another path")


def read_all(fd: int) -> bytes:
    """Read an open descriptor to the end and close it."""
    with open(fd, "rb", closefd=True) as handle:
        return handle.read()


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from the descriptor's position; the caller keeps (and closes) it.

    Callers that must notice a file larger than expected ask for one byte more than they accept.
    """
    chunks = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


@attrs.frozen(kw_only=True)
class Existing:
    """The file a write replaces, as it is on disk just before the write."""

    data: bytes
    stat: os.stat_result


@attrs.frozen(kw_only=True)
class Written:
    created: bool
    size: int
    mtime_ns: int


def write_atomic(
    loc: Location,
    render: Callable[[Existing | None], bytes],
    *,
    inspect: Callable[[os.stat_result], None] | None = None,
) -> Written:
    """Replace (or create) ``loc`` atomically.

    ``render`` gets the current file (``None`` when there is none) and returns the new bytes; it
    may raise ``ToolError`` to refuse, in which case nothing at all is written or created. The new
    content goes to a temporary file in the same, already-verified directory, is flushed, given the
    old file's mode, and renamed over the target. ``inspect`` sees the existing file's status
    before a byte of it is read, and may refuse it (too large, a hard link).
    """
    if not loc.parts:
        raise is_directory(loc.display)
    parent: int | None = None
    try:
        parent = open_dir(loc.base, loc.parts[:-1])
    except FileNotFoundError:
        parent = None
    except OSError as exc:
        raise os_failure(exc, loc.display) from None
    try:
        existing = _existing(parent, loc, inspect) if parent is not None else None
        data = render(existing)
        if parent is None:
            try:
                parent = open_dir(loc.base, loc.parts[:-1], create=True)
            except OSError as exc:
                raise os_failure(exc, loc.display, "create the directories of") from None
        return _replace(parent, loc, data, existing)
    finally:
        if parent is not None:
            os.close(parent)


def _existing(parent: int, loc: Location, inspect: Callable[[os.stat_result], None] | None) -> Existing | None:
    try:
        fd = os.open(loc.name, FILE_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if _is_symlink_at(parent, loc.name):  # a dangling link appeared since the check
            raise unsafe(loc.display) from None
        return None
    except OSError as exc:
        raise os_failure(exc, loc.display) from None
    st = _regular_stat(fd, loc.display)
    if inspect is not None:
        try:
            inspect(st)
        except BaseException:
            os.close(fd)
            raise
    return Existing(data=read_all(fd), stat=st)


def _replace(parent: int, loc: Location, data: bytes, existing: Existing | None) -> Written:
    temp = f".{loc.name[:40]}.{os.urandom(6).hex()}.entropic-tmp"
    try:
        fd = os.open(temp, TEMP_FLAGS, 0o666, dir_fd=parent)
    except OSError as exc:
        raise os_failure(exc, loc.display, "write") from None
    renamed = False
    try:
        try:
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.stat.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        try:
            os.rename(temp, loc.name, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                raise is_directory(loc.display) from None
            raise os_failure(exc, loc.display, "write") from None
        renamed = True
        try:
            os.fsync(parent)
        except OSError:
            pass  # some filesystems refuse fsync on a directory; the rename itself is done
    except OSError as exc:
        raise os_failure(exc, loc.display, "write") from None
    finally:
        if not renamed:
            try:
                os.unlink(temp, dir_fd=parent)
            except OSError:
                pass
    return Written(created=existing is None, size=st.st_size, mtime_ns=st.st_mtime_ns)
