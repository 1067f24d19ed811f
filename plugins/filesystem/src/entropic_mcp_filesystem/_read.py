"""filesystem.read_file: a page of a text file's lines, recorded in the read tracker.

The file is streamed once in fixed-size chunks: all of it is hashed (for the tracker) and its
newlines counted, but only the lines of the page are cut out, and of each line only what can be
shown is kept — one 200 MB line costs the same memory as a short one, and time linear in its
length.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, BinaryIO

import attrs
from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition, toolkit

from ._base import FilesystemTool
from ._fsio import open_regular

CHUNK = 1 << 20
SNIFF = 8192
#: Worst-case UTF-8 bytes per character: how many bytes to keep for N characters.
UTF8_MAX = 4


@attrs.frozen(kw_only=True)
class Line:
    number: int
    text: str  # the part shown (from ``column``), without the line ending
    rest: int  # bytes of the line after the part shown (0: the line is complete)


@attrs.frozen(kw_only=True)
class Page:
    lines: list[Line]
    total: int
    next_offset: int | None
    size: int
    digest: bytes


def binary_refusal(display: str) -> ToolError:
    return ToolError(
        "binary_file",
        f"{display} looks binary (it contains NUL bytes); the filesystem tools "
        "read text only — use filesystem.file_info to see its size and type",
    )


class _LineCutter:
    """Collects the page's lines from a stream of chunks, keeping a bounded part of each."""

    def __init__(self, *, offset: int, limit: int, budget: int, max_chars: int, column: int) -> None:
        self.offset = offset
        self.limit = limit
        self.budget = budget
        self.max_chars = max_chars
        self.column = column  # 1-based character of the first line to start at
        self.lines: list[Line] = []
        self.used = 0
        self.number = 1  # the line being read
        self.pieces: list[bytes] = []
        self.kept = 0  # bytes of the current line held in ``pieces``
        self.length = 0  # bytes of the current line seen so far
        self.next_offset: int | None = None
        self.full = False
        self.tail = b""  # the last byte of the current line seen so far

    def _keep_bytes(self) -> int:
        skip = self.column - 1 if self.number == self.offset else 0
        return (skip + self.max_chars + 1) * UTF8_MAX

    def feed(self, chunk: bytes) -> None:
        if self.full:
            return
        if not self.pieces and not self.length and self.number + chunk.count(b"\n") < self.offset:
            self.number += chunk.count(b"\n")  # wholly before the page: count, keep nothing
            return
        pos = 0
        end = len(chunk)
        while pos <= end and not self.full:
            at = chunk.find(b"\n", pos)
            stop = end if at < 0 else at
            if self.number >= self.offset:
                room = self._keep_bytes() - self.kept
                if room > 0 and stop > pos:
                    piece = chunk[pos : min(stop, pos + room)]
                    self.pieces.append(piece)
                    self.kept += len(piece)
            if stop > pos:
                self.tail = chunk[stop - 1 : stop]
            self.length += stop - pos
            if at < 0:
                return
            self._finish()
            pos = at + 1
            if pos == end:
                return

    def _finish(self) -> None:
        if self.number >= self.offset:
            raw = b"".join(self.pieces)
            length = self.length
            whole = len(raw) == length
            if self.tail == b"\r":  # a CRLF line ending: not part of the line
                length -= 1
                if whole:
                    raw = raw[:-1]
                whole = len(raw) == length
            text = raw.decode("utf-8", "replace")
            skip = self.column - 1 if self.number == self.offset else 0
            shown = text[skip : skip + self.max_chars]
            if whole and skip + len(shown) >= len(text):
                rest = 0
            else:
                rest = max(1, length - len(text[: skip + len(shown)].encode("utf-8")))
            if self.lines and self.used + len(shown) + 8 > self.budget:
                self.next_offset = self.number
                self.full = True
                return
            self.lines.append(Line(number=self.number, text=shown, rest=rest))
            self.used += len(shown) + 8
            if len(self.lines) >= self.limit:
                self.next_offset = self.number + 1
                self.full = True
        self.number += 1
        self.pieces = []
        self.kept = 0
        self.length = 0
        self.tail = b""

    def close(self) -> None:
        """The file ended: the last line, if it had no newline."""
        if not self.full and (self.length or self.pieces):
            self._finish()


def read_page(
    handle: BinaryIO,
    *,
    offset: int,
    limit: int,
    budget: int,
    display: str,
    max_chars: int = 2000,
    column: int = 1,
) -> Page:
    """Stream the file once: hash all of it, count its lines, keep the page's lines."""
    hasher = hashlib.blake2b(digest_size=16)
    cutter = _LineCutter(offset=offset, limit=limit, budget=budget, max_chars=max_chars, column=column)
    newlines = 0
    size = 0
    last = b""
    first = True
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
        cutter.feed(chunk)
    cutter.close()
    total = newlines + (1 if size and last != b"\n" else 0)
    next_offset = cutter.next_offset
    if next_offset is not None and next_offset > total:
        next_offset = None
    return Page(lines=cutter.lines, total=total, next_offset=next_offset, size=size, digest=hasher.digest())


def render_text(page: Page, *, display: str, offset: int, column: int) -> str:
    """``cat -n`` style: the right-aligned line number, a tab, the line; notes in brackets."""
    if page.total == 0:
        return f"[{display} is empty]"
    if not page.lines:
        return (
            f"[offset {offset} is past the end of {display}, which has {page.total} "
            f"line{'s' if page.total != 1 else ''}; read from an offset between 1 and {page.total}]"
        )
    width = len(str(page.lines[-1].number))
    out = []
    for line in page.lines:
        text = line.text
        if line.rest:
            shown_to = (column - 1 if line.number == offset else 0) + len(line.text)
            text += (
                f" [… line continues: {line.rest} more bytes; read them with offset={line.number}, "
                f"limit=1, column={shown_to + 1}]"
            )
        out.append(f"{line.number:>{width}}\t{text}")
    first, last = page.lines[0].number, page.lines[-1].number
    if page.next_offset is not None:
        out.append(f"[lines {first}-{last} of {page.total}; more follow: call again with offset={page.next_offset}]")
    elif first > 1:
        out.append(f"[end of file: lines {first}-{last} of {page.total}]")
    return "\n".join(out)


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


def fit_text(text: str, cap: int) -> str:
    """Cut a text page to ``cap`` bytes at a line boundary, saying where to continue."""
    if not cap or len(text.encode("utf-8")) <= cap:
        return text
    lines = text.split("\n")
    out: list[str] = []
    used = 0
    for line in lines:
        cost = len(line.encode("utf-8")) + 1
        if used + cost > cap - 200:
            break
        out.append(line)
        used += cost
    number = None
    if out and "\t" in out[-1]:
        head = out[-1].split("\t", 1)[0].strip()
        number = int(head) + 1 if head.isdigit() else None
    hint = f"call again with offset={number}" if number else "read fewer lines with 'limit'"
    out.append(f"[the page was cut to fit max_result_bytes ({cap} bytes); {hint}]")
    return "\n".join(out)


def read_lines(
    fs: Any,
    fd: int,
    st: Any,
    loc: Any,
    resolved: Any,
    ctx: CallContext,
    *,
    offset: int,
    limit: int,
    column: int = 1,
) -> Page:
    """Page one open file (closing it); records the read in the tracker."""
    settings = fs.settings
    with open(fd, "rb", closefd=True) as handle:
        page = read_page(
            handle,
            offset=offset,
            limit=limit,
            budget=settings.max_read_bytes,
            display=loc.display,
            max_chars=settings.max_line_chars,
            column=column,
        )
    fs.tracker.record(
        ctx.conversation_id, str(resolved.path), size=page.size, mtime_ns=st.st_mtime_ns, data_digest=page.digest
    )
    return page


def open_for_reading(fs: Any, loc: Any, resolved: Any) -> tuple[int, Any]:
    """The file opened (ignore rules and hard links checked); the caller closes the descriptor."""
    fs.refuse_ignored(resolved, loc)
    fd, st = open_regular(loc)
    try:
        fs.refuse_hard_link(st, loc.display)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


class ReadFile(FilesystemTool):
    definition = load_tool_definition(__package__, "read_file")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="read")
        offset = toolkit.integer(args, "offset", default=1, minimum=1)
        limit = toolkit.integer(args, "limit", default=fs.settings.read_page_lines, minimum=1)
        column = toolkit.integer(args, "column", default=1, minimum=1)
        form = toolkit.choice(args, "format", ("text", "json"), default="text")
        from ._media import media_result

        fd, st = open_for_reading(fs, loc, resolved)
        try:
            media = media_result(fs, fd, st, loc, resolved)
        except BaseException:
            os.close(fd)
            raise
        if media is not None:
            os.close(fd)
            return media
        page = read_lines(fs, fd, st, loc, resolved, ctx, offset=offset, limit=limit, column=column)
        if form == "text":
            text = render_text(page, display=loc.display, offset=offset, column=column)
            return ToolResult(text=fit_text(text, toolkit.result_limit(ctx)))
        data: dict[str, Any] = {
            "path": loc.display,
            "total": page.total,
            "start": offset,
            "lines": [line.text for line in page.lines],
            "truncated": page.next_offset is not None,
            "next_offset": page.next_offset,
        }
        if any(line.rest for line in page.lines):
            data["line_truncated"] = True
        if not page.lines and page.total and offset > page.total:
            data["note"] = f"offset {offset} is past the end of the file ({page.total} lines)"
        return ToolResult.json(fit_page(data, toolkit.result_limit(ctx)))

    def anchor_key(self, args: dict[str, Any]) -> str | None:
        canonical = self.fs.canonical_display(args.get("path"))
        return None if canonical is None else f"file:{canonical}"


MAX_FILES = 20


class ReadFiles(FilesystemTool):
    """Several files in one call: each as read_file would show it, under a ``==> path <==`` header."""

    definition = load_tool_definition(__package__, "read_files")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        paths = args.get("paths")
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
            raise ToolError("invalid_args", "'paths' must be a non-empty list of paths relative to the project root")
        if len(paths) > MAX_FILES:
            raise ToolError("invalid_args", f"at most {MAX_FILES} paths per call; split them over several calls")
        limit = toolkit.integer(args, "limit", default=fs.settings.read_page_lines, minimum=1)
        sections = []
        for raw in paths:
            share = max(4096, fs.settings.max_read_bytes // len(paths))
            sections.append(self._one(raw, ctx, limit, share=share, args=args))
        return ToolResult(text=fit_text("\n\n".join(sections), toolkit.result_limit(ctx)))

    def _one(self, raw: str, ctx: CallContext, limit: int, *, share: int, args: dict[str, Any]) -> str:
        fs = self.fs
        try:
            resolved, loc = fs.resolve_value(raw, ctx, tool=self.name, access="read", argument="paths", args=args)
            fd, st = open_for_reading(fs, loc, resolved)
            from ._media import HEAD, sniff

            try:
                mime = sniff(os.pread(fd, HEAD, 0))
            except BaseException:
                os.close(fd)
                raise
            if mime is not None:
                os.close(fd)
                return f"==> {loc.display} <==\n[{mime} file: read it alone with filesystem.read_file to see it]"
            settings = attrs.evolve(fs.settings, max_read_bytes=share)
            page = read_lines(_With(fs, settings), fd, st, loc, resolved, ctx, offset=1, limit=limit)
        except ToolError as exc:
            return f"==> {raw} <==\n[{exc.code}: {exc.message}]"
        return f"==> {loc.display} <==\n" + render_text(page, display=loc.display, offset=1, column=1)


class _With:
    """The server seen with other settings (one file's share of the byte budget)."""

    def __init__(self, fs: Any, settings: Any) -> None:
        self.settings = settings
        self.tracker = fs.tracker
