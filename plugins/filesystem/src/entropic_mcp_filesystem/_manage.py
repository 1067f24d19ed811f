"""filesystem.move_file, delete_file and create_directory: the same confinement, rules and gates.

Every path is resolved once (pinned at the permission stage) and reached through directory
descriptors opened without following links. A file's content may only be destroyed (deleted,
or moved away from under a read rule) under the same gate as a write: it was read in this
conversation and is unchanged since. A directory is moved only when nothing inside it is hidden
by ``.entropicignore``, refused by a rule, or a policy file — moving it would carry those out
from under their protection.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition
from entropic_mcp.toolkit.paths import POLICY_FILES

from ._base import FilesystemTool
from ._fsio import FILE_FLAGS, Location, open_dir, os_failure, read_at_most, unsafe
from ._rules import WalkGate
from ._tracker import digest, store_of

#: Entries a directory move inspects before it gives up (and says to move less at once).
MAX_MOVE_ENTRIES = 10_000


def _parent(loc: Location, *, create: bool = False) -> int:
    if not loc.parts:
        raise ToolError(
            "invalid_args", f"{loc.display} is the project root (or /), which these tools never move or delete"
        )
    try:
        return open_dir(loc.base, loc.parts[:-1], create=create)
    except OSError as exc:
        raise os_failure(exc, loc.display) from None


def _lstat(parent: int, loc: Location) -> os.stat_result | None:
    try:
        return os.stat(loc.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_failure(exc, loc.display) from None


def _check_read(fs: Any, ctx: CallContext, parent: int, loc: Location, key: str, verb: str) -> os.stat_result:
    """The write gate for a regular file about to be moved or deleted: seen, unchanged, not too big.

    When the conversation saw only the file's status (file_info, a listing), that status decides
    and the file is not read; after a read of its content, the content is compared.
    """
    store = store_of(ctx)
    st = _lstat(parent, loc)
    if st is not None and stat.S_ISREG(st.st_mode):
        try:
            if fs.tracker.unchanged_since_stat(ctx.conversation_id, key, loc.display, st, store):
                fs.refuse_hard_link(st, loc.display)
                return st
        except ToolError as exc:
            raise ToolError(exc.code, exc.message.replace("then decide again", f"then {verb}"), **exc.extra) from None
    try:
        fd = os.open(loc.name, FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise os_failure(exc, loc.display) from None
    try:
        st = os.fstat(fd)
        fs.inspect_existing(loc.display)(st)
        data = read_at_most(fd, st.st_size + 1)
    finally:
        os.close(fd)
    try:
        fs.tracker.check(ctx.conversation_id, key, loc.display, data, st, store)
    except ToolError as exc:
        raise ToolError(exc.code, exc.message.replace("write or edit it", verb), **exc.extra) from None
    # The content's hash stands for it from here: a move changes the file's ctime.
    fs.tracker.record(
        ctx.conversation_id, key, size=st.st_size, mtime_ns=st.st_mtime_ns, data_digest=digest(data), store=store
    )
    return st


def _same(a: os.stat_result, b: os.stat_result | None) -> bool:
    return b is not None and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class CreateDirectory(FilesystemTool):
    definition = load_tool_definition(__package__, "create_directory")
    required_access_level = AccessLevel.WRITE
    idempotent = True

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="write")
        if not loc.parts:
            return ToolResult.json({"path": loc.display, "created": False})
        try:
            existed = open_dir(loc.base, loc.parts)
        except FileNotFoundError:
            existed = None
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                raise ToolError(
                    "not_directory",
                    f"{loc.display} (or a parent of it) is a file, not a directory; choose another path",
                ) from None
            raise os_failure(exc, loc.display) from None
        if existed is not None:
            os.close(existed)
            return ToolResult.json({"path": loc.display, "created": False})
        try:
            os.close(open_dir(loc.base, loc.parts, create=True))
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                raise ToolError("not_directory", f"a parent of {loc.display} is a file; choose another path") from None
            raise os_failure(exc, loc.display, "create") from None
        return ToolResult.json({"path": loc.display, "created": True})


class DeleteFile(FilesystemTool):
    definition = load_tool_definition(__package__, "delete_file")
    required_access_level = AccessLevel.WRITE
    destructive = True
    idempotent = False

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="write")
        parent = _parent(loc)
        try:
            st = _lstat(parent, loc)
            if st is None:
                raise ToolError("not_found", f"{loc.display} does not exist; nothing was deleted")
            if stat.S_ISDIR(st.st_mode):
                try:
                    os.rmdir(loc.name, dir_fd=parent)
                except OSError as exc:
                    if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                        raise ToolError(
                            "not_empty",
                            f"{loc.display} is a directory that is not empty; delete_file removes files "
                            "and empty directories only — delete what it contains first",
                        ) from None
                    raise os_failure(exc, loc.display, "delete") from None
                kind = "directory"
            else:
                if stat.S_ISREG(st.st_mode):
                    checked = _check_read(fs, ctx, parent, loc, str(resolved.path), "delete it")
                    if not _same(checked, _lstat(parent, loc)):
                        raise unsafe(loc.display)
                try:
                    os.unlink(loc.name, dir_fd=parent)
                except OSError as exc:
                    raise os_failure(exc, loc.display, "delete") from None
                kind = "file" if stat.S_ISREG(st.st_mode) else "other"
        finally:
            os.close(parent)
        fs.tracker.discard(ctx.conversation_id, str(resolved.path), store_of(ctx))
        return ToolResult.json({"path": loc.display, "deleted": kind})


class MoveFile(FilesystemTool):
    definition = load_tool_definition(__package__, "move_file")
    required_access_level = AccessLevel.WRITE
    destructive = False
    idempotent = False

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        source, src = fs.resolve(args, ctx, tool=self.name, access="write", argument="source")
        target, dst = fs.resolve(args, ctx, tool=self.name, access="write", argument="destination")
        if source.path == target.path:
            raise ToolError("invalid_args", f"source and destination are the same path ({src.display})")
        if target.path.is_relative_to(source.path):
            raise ToolError("invalid_args", f"cannot move {src.display} into itself ({dst.display})")
        src_parent = _parent(src)
        try:
            st = _lstat(src_parent, src)
            if st is None:
                raise ToolError("not_found", f"{src.display} does not exist; use filesystem.glob to find it")
            if stat.S_ISREG(st.st_mode):
                checked = _check_read(fs, ctx, src_parent, src, str(source.path), "move it")
                if not _same(checked, _lstat(src_parent, src)):
                    raise unsafe(src.display)
            elif stat.S_ISDIR(st.st_mode):
                self._check_tree(ctx, src_parent, src, source.inside)
            dst_parent = _parent(dst, create=True)
            try:
                if _lstat(dst_parent, dst) is not None:
                    raise ToolError(
                        "exists",
                        f"{dst.display} already exists; move_file never replaces a file — choose another "
                        "name, or delete it first with filesystem.delete_file",
                    )
                self._move(src_parent, dst_parent, src, dst, directory=stat.S_ISDIR(st.st_mode))
            finally:
                os.close(dst_parent)
        finally:
            os.close(src_parent)
        fs.tracker.move(ctx.conversation_id, str(source.path), str(target.path), store_of(ctx))
        return ToolResult.json({"source": src.display, "destination": dst.display})

    def _move(self, src_parent: int, dst_parent: int, src: Location, dst: Location, *, directory: bool) -> None:
        if not directory:
            # link + unlink never replaces a destination that appeared after the check above.
            try:
                os.link(src.name, dst.name, src_dir_fd=src_parent, dst_dir_fd=dst_parent, follow_symlinks=False)
            except FileExistsError:
                raise ToolError("exists", f"{dst.display} appeared meanwhile; nothing was moved") from None
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                    raise os_failure(exc, dst.display, "move to") from None
            else:
                try:
                    os.unlink(src.name, dir_fd=src_parent)
                except OSError as exc:
                    raise os_failure(exc, src.display, "remove the old name of") from None
                return
        try:
            os.rename(src.name, dst.name, src_dir_fd=src_parent, dst_dir_fd=dst_parent)
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise ToolError(
                    "cross_device",
                    f"{src.display} and {dst.display} are on different filesystems; copy it with "
                    "read_file/write_file instead",
                ) from None
            raise os_failure(exc, src.display, "move") from None

    def _check_tree(self, ctx: CallContext, parent: int, src: Location, inside: bool) -> None:
        """Refuse to move a directory holding anything a rule, .entropicignore or policy protects."""
        from ._walk import root_rules

        fs = self.fs
        entropic, _ = root_rules(fs.root, fs.ignore_cache) if inside else (None, None)
        reads, writes = WalkGate(ctx, fs.root), WalkGate(ctx, fs.root, access="write")
        try:
            top = os.open(src.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        except OSError as exc:
            raise os_failure(exc, src.display) from None
        seen = 0
        stack: list[tuple[int, str]] = [(top, src.display)]
        try:
            while stack:
                fd, rel = stack.pop()
                try:
                    seen += self._check_entries(fd, rel, src, stack, entropic, reads, writes, seen)
                finally:
                    os.close(fd)
        finally:
            for fd, _ in stack:
                os.close(fd)

    def _check_entries(
        self,
        fd: int,
        rel: str,
        src: Location,
        stack: list[tuple[int, str]],
        entropic: Any,
        reads: WalkGate,
        writes: WalkGate,
        seen: int,
    ) -> int:
        """Check one directory's entries (queueing its sub-directories); returns how many it holds."""
        from ._walk import _ignored

        with os.scandir(fd) as scan:
            entries = list(scan)
        if seen + len(entries) > MAX_MOVE_ENTRIES:
            raise ToolError(
                "too_many_entries",
                f"{src.display} holds more than {MAX_MOVE_ENTRIES} entries, too many to check "
                "before moving; move its parts separately",
            )
        for entry in entries:
            path = f"{rel}/{entry.name}"
            is_dir = entry.is_dir(follow_symlinks=False)
            if entry.name in POLICY_FILES or entry.name == ".git":
                self._refuse(src, path, "is protected (a policy file or a .git directory)")
            if entropic is not None and _ignored(path, is_dir, (), entropic):
                self._refuse(src, path, "is excluded by .entropicignore")
            if reads.refused(path) or writes.refused(path):
                self._refuse(src, path, "is refused by a permission rule")
            if is_dir:
                try:
                    child = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError:
                    raise unsafe(path) from None
                stack.append((child, path))
        return len(entries)

    def _refuse(self, src: Location, path: str, why: str) -> None:
        raise ToolError(
            "protected_contents",
            f"{src.display} cannot be moved: {path} inside it {why}, and moving the directory would take "
            "it out from under that protection; move the other files one by one",
        )
