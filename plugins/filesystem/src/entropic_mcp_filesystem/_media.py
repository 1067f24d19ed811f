"""Images and PDFs for read_file: recognised by their first bytes, returned as MCP content.

A model that can see images gets the picture itself (an MCP ``image`` block); a PDF goes as an
embedded ``resource`` with its bytes. Both are bounded by ``max_media_bytes``; anything else
with NUL bytes stays a ``binary_file`` refusal.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import attrs
import orjson
from entropic_mcp import ToolError, ToolResult

from ._fsio import read_at_most

#: (magic prefix, offset of the prefix, MIME type)
SIGNATURES: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),
    (b"%PDF-", 0, "application/pdf"),
)
HEAD = 16


def sniff(head: bytes) -> str | None:
    """The MIME type of an image or PDF starting with ``head``; None for anything else."""
    for magic, at, mime in SIGNATURES:
        if head[at : at + len(magic)] == magic and (mime != "image/webp" or head[:4] == b"RIFF"):
            return mime
    return None


def supports_content() -> bool:
    """Does this core's ToolResult carry extra MCP content blocks?"""
    return "content" in attrs.fields_dict(ToolResult)


def media_result(fs: Any, fd: int, st: os.stat_result, loc: Any, resolved: Any) -> ToolResult | None:
    """The open file ``fd`` as MCP image/resource content, or None when it is not an image or PDF."""
    mime = sniff(os.pread(fd, HEAD, 0))
    if mime is None:
        return None
    limit = fs.settings.max_media_bytes
    if st.st_size > limit:
        raise ToolError(
            "too_large",
            f"{loc.display} is a {mime} file of {st.st_size} bytes, more than max_media_bytes "
            f"({limit}) under [servers.filesystem]; it was not read. Ask the user to raise the limit "
            "if you need it",
        )
    data = read_at_most(fd, limit + 1)
    if len(data) > limit:
        raise ToolError("too_large", f"{loc.display} grew past max_media_bytes ({limit}) while it was read")
    info = {"path": loc.display, "mime_type": mime, "size": len(data)}
    if not supports_content():
        return ToolResult(
            text=_dumps(
                {
                    **info,
                    "note": "this server's core cannot send images or documents as MCP content; "
                    "use filesystem.file_info for its size and type",
                }
            )
        )
    encoded = base64.b64encode(data).decode("ascii")
    if mime.startswith("image/"):
        block: dict[str, Any] = {"type": "image", "data": encoded, "mimeType": mime}
    else:
        block = {
            "type": "resource",
            "resource": {"uri": resolved.path.as_uri(), "mimeType": mime, "blob": encoded},
        }
    return ToolResult(text=_dumps(info), content=(block,))


def _dumps(data: Any) -> str:
    return orjson.dumps(data).decode()
