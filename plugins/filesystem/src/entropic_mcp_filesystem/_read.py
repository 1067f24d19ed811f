"""filesystem.read_file: a page of a text file's lines, recorded in the read tracker."""

from __future__ import annotations

from typing import Any, BinaryIO

import attrs
from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition

from . import _args
from ._base import FilesystemTool, result_cap
from ._fsio import open_regular

CHUNK = 1 << 20
SNIFF = 8192


@attrs.frozen(kw_only=True)
class Page:
    lines: list[str]
    total: int
    next_offset: int | None
    size: int
    digest: bytes
    line_cut: bool


def binary_refusal(display: str) -> ToolError:
    return ToolError(
        "binary_file",
        f"{display} looks binary (it contains NUL bytes); the filesystem tools "
        "read text only — use filesystem.list_directory to see its size",
    )


def read_page(handle: BinaryIO, *, offset: int, limit: int | None, budget: int, display: str) -> Page:
    """Stream the file once: hash all of it, count its lines, keep lines ``offset``.. that fit."""
    import hashlib

    hasher = hashlib.blake2b(digest_size=16)
    lines: list[str] = []
    used = 0
    index = 0  # number of the last line split off
    newlines = 0
    size = 0
    last = b""
    pending = b""
    collecting = True
    next_offset: int | None = None
    line_cut = False
    first = True

    def take(raw: bytes) -> bool:
        """Consider line ``index``; False once the page is full."""
        nonlocal used, next_offset, line_cut
        if index < offset:
            return True
        if limit is not None and len(lines) >= limit:
            next_offset = index
            return False
        cost = len(raw) + 1
        if used + cost > budget:
            if lines:
                next_offset = index
                return False
            raw = raw[:budget]  # one line longer than the whole budget: return its start
            line_cut = True
            next_offset = index + 1
        used += cost
        text = raw.decode("utf-8", "replace")
        lines.append(text[:-1] if text.endswith("\r") else text)
        return not line_cut

    while True:
        chunk = handle.read(CHUNK)
        if first:
            first = False
            if b"\x00" in chunk[:SNIFF]:
                raise binary_refusal(display)
        if not chunk:
            break
        size += len(chunk)
        hasher.update(chunk)
        newlines += chunk.count(b"\n")
        last = chunk[-1:]
        if not collecting:
            continue
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        for raw in parts:
            index += 1
            if not take(raw):
                collecting = False
                break
        if not collecting:
            pending = b""
    if collecting and pending:
        index += 1
        take(pending)
    total = newlines + (1 if size and last != b"\n" else 0)
    if next_offset is not None and next_offset > total:
        next_offset = None
    return Page(lines=lines, total=total, next_offset=next_offset, size=size, digest=hasher.digest(), line_cut=line_cut)


def fit_page(data: dict[str, Any], cap: int) -> dict[str, Any]:
    """Drop lines from the end until the JSON fits ``cap`` bytes; ``next_offset`` follows them."""
    import orjson

    if not cap or len(orjson.dumps(data)) <= cap:
        return data
    lines, start = data["lines"], data["start"]

    def page(count: int) -> dict[str, Any]:
        return {**data, "lines": lines[:count], "truncated": True, "next_offset": start + count}

    low, high = 0, len(lines)
    while low < high:
        middle = (low + high + 1) // 2
        if len(orjson.dumps(page(middle))) <= cap:
            low = middle
        else:
            high = middle - 1
    if low:
        return page(low)
    # Not even one line fits: return the start of the first line, and move past it.
    room = max(0, cap - len(orjson.dumps(page(0))) - 64)
    head = lines[0].encode("utf-8")[: room // 2].decode("utf-8", "ignore") if lines else ""
    fitted = {**page(1), "lines": [head], "line_truncated": True}
    if fitted["next_offset"] > data["total"]:
        fitted.update(truncated=False, next_offset=None)
    return fitted


class ReadFile(FilesystemTool):
    definition = load_tool_definition(__package__, "read_file")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="read")
        offset = _args.integer(args, "offset", default=1, minimum=1)
        limit = _args.integer(args, "limit", default=None, minimum=1)
        assert offset is not None
        fs.refuse_ignored(resolved, loc)
        fd, st = open_regular(loc)
        with open(fd, "rb", closefd=True) as handle:
            page = read_page(handle, offset=offset, limit=limit, budget=fs.settings.max_read_bytes, display=loc.display)
        fs.tracker.record(
            ctx.conversation_id, str(resolved.path), size=page.size, mtime_ns=st.st_mtime_ns, data_digest=page.digest
        )
        data: dict[str, Any] = {
            "path": loc.display,
            "total": page.total,
            "start": offset,
            "lines": page.lines,
            "truncated": page.next_offset is not None,
            "next_offset": page.next_offset,
        }
        if page.line_cut:
            data["line_truncated"] = True
        return ToolResult.json(fit_page(data, result_cap(ctx)))

    def anchor_key(self, args: dict[str, Any]) -> str | None:
        canonical = self.fs.canonical_display(args.get("path"))
        return None if canonical is None else f"file:{canonical}"
