"""filesystem.file_info: what a path is (type, size, time, mode), without reading its content."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition

from ._base import FilesystemTool
from ._fsio import FILE_FLAGS, open_dir, os_failure
from ._media import HEAD, sniff
from ._read import SNIFF
from ._tracker import store_of


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


class FileInfo(FilesystemTool):
    definition = load_tool_definition(__package__, "file_info")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="read")
        fs.refuse_ignored(resolved, loc)
        try:
            parent = open_dir(loc.base, loc.parts[:-1] if loc.parts else ())
        except OSError as exc:
            raise os_failure(exc, loc.display) from None
        try:
            name = loc.name or "."
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                raise os_failure(exc, loc.display) from None
            if stat.S_ISREG(st.st_mode):  # shown unchanged, it may be moved or deleted without a read
                fs.tracker.record_stat(ctx.conversation_id, str(resolved.path), st, store_of(ctx))
            info: dict[str, Any] = {
                "path": loc.display,
                "type": _kind(st.st_mode),
                "size": st.st_size,
                "modified": datetime.fromtimestamp(st.st_mtime, UTC).isoformat(timespec="seconds"),
                "mode": f"{stat.S_IMODE(st.st_mode):04o}",
            }
            if stat.S_ISDIR(st.st_mode):
                try:
                    fd = open_dir(loc.base, loc.parts)
                except OSError as exc:
                    raise os_failure(exc, loc.display) from None
                try:
                    info["entries"] = len(os.listdir(fd))
                finally:
                    os.close(fd)
            elif stat.S_ISREG(st.st_mode):
                info["hard_links"] = st.st_nlink
                info.update(self._content_kind(parent, name, st, loc.display))
        finally:
            os.close(parent)
        return ToolResult.json(info)

    def _content_kind(self, parent: int, name: str, st: os.stat_result, display: str) -> dict[str, Any]:
        """Text or binary (and the media type of images and PDFs), from the first bytes only."""
        if st.st_nlink > 1 and not self.fs.settings.allow_hard_links:
            return {}  # its bytes may be another file's: not even sniffed
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise ToolError("io_error", f"could not open {display}: {exc.strerror}") from None
        try:
            head = os.pread(fd, max(SNIFF, HEAD), 0)
        finally:
            os.close(fd)
        mime = sniff(head)
        if mime is not None:
            return {"content": "binary", "mime_type": mime}
        return {"content": "binary" if b"\x00" in head else "text"}
