"""filesystem.write_file: a whole-file atomic write behind the read gate."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolResult, load_tool_definition

from ._args import file_text
from ._base import FilesystemTool
from ._fsio import Existing, write_atomic
from ._tracker import digest, store_of


def line_style(text: str) -> str:
    """``"crlf"`` when every line ends in CRLF, ``"lf"`` when none does, else ``"mixed"``."""
    crlf = text.count("\r\n")
    if not crlf:
        return "lf"
    return "crlf" if crlf == text.count("\n") else "mixed"


def in_style(text: str, style: str) -> str:
    """``text`` (from the model, usually LF) with the line endings of a file of ``style``."""
    if style == "crlf":
        return text.replace("\r\n", "\n").replace("\n", "\r\n")
    if style == "lf":
        return text.replace("\r\n", "\n")
    return text


class WriteFile(FilesystemTool):
    definition = load_tool_definition(__package__, "write_file")
    required_access_level = AccessLevel.WRITE
    destructive = True
    idempotent = True

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="write")
        content = file_text(args, "content")
        key = str(resolved.path)
        store = store_of(ctx)
        written_data = b""

        def render(existing: Existing | None) -> bytes:
            nonlocal written_data
            text = content
            if existing is not None:
                fs.tracker.check(ctx.conversation_id, key, loc.display, existing.data, existing.stat, store)
                old = existing.data.decode("utf-8", "replace")
                # A file that is CRLF throughout stays CRLF when the model sends LF text.
                if line_style(old) == "crlf" and "\r\n" not in text:
                    text = in_style(text, "crlf")
            written_data = text.encode("utf-8")
            return written_data

        written = write_atomic(loc, render, inspect=fs.inspect_existing(loc.display))
        fs.tracker.record(
            ctx.conversation_id,
            key,
            size=written.size,
            mtime_ns=written.mtime_ns,
            data_digest=digest(written_data),
            store=store,
        )
        return ToolResult.json({"path": loc.display, "bytes_written": written.size, "created": written.created})
