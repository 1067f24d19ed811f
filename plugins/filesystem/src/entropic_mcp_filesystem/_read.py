"""filesystem.read_file: a page of a text file's lines, recorded in the read tracker.

A page costs what it shows, not the file: the cutter stops at the page's line limit or byte
budget (the rendered page's bytes, so nothing is rendered only to be dropped), and of each line
only what can be shown is kept — one 200 MB line costs the same memory as a short one. The rest
of the file is only counted (for ``total``), and not even that once the server's line index
knows the file: it keeps, per file identity, the line count and where each page it ended
starts, so the next page seeks there. The tracker records the file's stat identity instead of a
hash; only a file changed within the racy window is streamed whole and hashed (``_tracker``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from bisect import bisect_right
from collections import OrderedDict
from itertools import accumulate
from typing import Any, BinaryIO

import attrs
from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition, toolkit

from ._base import FilesystemTool
from ._fsio import open_regular
from ._settings import READ_RESULT_BYTES
from ._tracker import Identity, identity, identity_vouches, store_of

CHUNK = 1 << 20
SNIFF = 8192
#: Worst-case UTF-8 bytes per character: how many bytes to keep for N characters.
UTF8_MAX = 4
#: Bytes kept back from the byte budget for the page's closing note.
NOTE_BYTES = 240
#: A cut line's continuation marker, at most.
MARKER_BYTES = 120


@attrs.frozen(kw_only=True)
class Line:
    number: int
    text: str  # the part shown (from ``column``), without the line ending
    rest: int  # bytes of the line after the part shown (0: the line is complete)


@attrs.frozen(kw_only=True)
class Page:
    """A page's lines are consecutive from ``first``: their texts, and what was cut from the
    few that did not fit whole (``rests``: line number -> bytes left), so a page of short lines
    is two lists, not an object per line."""

    first: int
    texts: list[str]
    rests: dict[int, int]
    total: int
    next_offset: int | None
    size: int
    digest: bytes | None
    #: Where line ``next_offset`` starts in the file (bytes), when known.
    next_byte: int | None = None

    @property
    def lines(self) -> list[Line]:
        rests = self.rests
        return [
            Line(number=number, text=text, rest=rests.get(number, 0))
            for number, text in enumerate(self.texts, self.first)
        ]


class LineIndex:
    """Per file identity: its line count and the byte offsets of lines pages ended at (bounded)."""

    FILES = 128
    MARKS = 512

    def __init__(self) -> None:
        self._files: OrderedDict[tuple[str, Identity], tuple[int, dict[int, int]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str, ident: Identity, line: int) -> tuple[int | None, tuple[int, int] | None]:
        """The file's line count (None: not known) and the known line start nearest before ``line``."""
        with self._lock:
            entry = self._files.get((path, ident))
            if entry is None:
                return None, None
            self._files.move_to_end((path, ident))
            total, marks = entry
            if line in marks:
                return total, (line, marks[line])
            best = max((n for n in marks if n <= line), default=None)
            return total, None if best is None else (best, marks[best])

    def put(self, path: str, ident: Identity, total: int, line: int | None, at: int | None) -> None:
        with self._lock:
            key = (path, ident)
            entry = self._files.get(key)
            marks = entry[1] if entry is not None else {1: 0}
            if line is not None and at is not None and len(marks) < self.MARKS:
                marks[line] = at
            self._files[key] = (total, marks)
            self._files.move_to_end(key)
            while len(self._files) > self.FILES:
                self._files.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._files.clear()


def binary_refusal(display: str) -> ToolError:
    return ToolError(
        "binary_file",
        f"{display} looks binary (it contains NUL bytes); the filesystem tools "
        "read text only — use filesystem.file_info to see its size and type",
    )


class _LineCutter:
    """Collects the page's lines from a stream of chunks, keeping a bounded part of each."""

    def __init__(
        self, *, offset: int, limit: int, budget: int, max_chars: int, column: int, numbered: bool = False
    ) -> None:
        self.offset = offset
        self.limit = limit
        self.budget = budget
        self.max_chars = max_chars
        self.column = column  # 1-based character of the first line to start at
        self.texts: list[str] = []  # the page's lines, from line ``offset`` on
        self.rests: dict[int, int] = {}  # line number -> bytes not shown, for the lines cut
        self.used = 0
        self.number = 1  # the line being read
        self.pieces: list[bytes] = []
        self.kept = 0  # bytes of the current line held in ``pieces``
        self.length = 0  # bytes of the current line seen so far
        self.next_offset: int | None = None
        self.full = False
        self.tail = b""  # the last byte of the current line seen so far
        self.base = 0  # the file offset of the chunk being fed
        self.line_start = 0  # the file offset of the line being read
        self.next_byte: int | None = None
        #: Rendered bytes per line besides its text: a newline, and the number and a tab if numbered.
        self.overhead = len(str(offset + limit)) + 2 if numbered else 1

    def start_at(self, line: int, at: int) -> None:
        """The stream starts at line ``line``, byte ``at`` of the file (a known line start)."""
        self.number = line
        self.base = self.line_start = at

    def _keep_bytes(self) -> int:
        skip = self.column - 1 if self.number == self.offset else 0
        return (skip + self.max_chars + 1) * UTF8_MAX

    def feed(self, chunk: bytes) -> None:
        if self.full:
            return
        if not self.pieces and not self.length:
            newlines = chunk.count(b"\n")
            if self.number + newlines < self.offset:  # wholly before the page: count, keep nothing
                self.number += newlines
                if newlines:
                    self.line_start = self.base + chunk.rfind(b"\n") + 1
                self.base += len(chunk)
                return
        pos = 0
        end = len(chunk)
        try:
            self._feed(chunk, pos, end)
        finally:
            self.base += end

    def _feed(self, chunk: bytes, pos: int, end: int) -> None:
        while not self.length and self.number < self.offset:  # lines before the page: count them
            at = chunk.find(b"\n", pos)
            if at < 0:
                break
            self.number += 1
            pos = at + 1
            self.line_start = self.base + pos
            if pos == end:
                return
        while pos <= end and not self.full:
            if not self.length and self.number >= self.offset and (self.column == 1 or self.number != self.offset):
                pos = self._short_lines(chunk, pos, end)
                if self.full or pos == end:
                    return
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
            self._finish(self.base + at + 1)
            pos = at + 1
            if pos == end:
                return

    def _short_lines(self, chunk: bytes, pos: int, end: int) -> int:
        """Whole lines no longer than ``max_chars`` bytes, taken in one split (most of a page):
        their costs summed and cut against the budget and the line limit in C, not line by
        line; returns where the line-by-line path goes on."""
        stop = chunk.rfind(b"\n", pos, min(end, pos + self.budget - self.used + 1))
        if stop < 0:
            return pos
        segment = chunk[pos:stop]
        raws = segment.split(b"\n")
        sizes = list(map(len, raws))
        if max(sizes) > self.max_chars:  # a long line: stop before it (the slow path cuts it)
            limit_at = next(i for i, size in enumerate(sizes) if size > self.max_chars)
            del raws[limit_at:], sizes[limit_at:]
        else:
            limit_at = len(raws)
        room_lines = self.limit - len(self.texts)
        crlf = b"\r" in segment
        if crlf:
            costs = [size - 1 if raw.endswith(b"\r") else size for raw, size in zip(raws, sizes, strict=True)]
        else:
            costs = sizes
        overhead = self.overhead
        spent = list(accumulate(cost + overhead for cost in costs))
        count = bisect_right(spent, self.budget - self.used)
        if count == 0 and not self.texts and spent:
            count = 1  # a page holds at least one line
        count = min(count, room_lines)
        if count:
            taken = b"\n".join(raws[:count]).decode("utf-8", "replace").split("\n")
            if crlf:
                taken = [text[:-1] if text.endswith("\r") else text for text in taken]
            self.texts.extend(taken)
            self.used += spent[count - 1]
            self.number += count
            pos += sum(sizes[:count]) + count
            self.line_start = self.base + pos
        if len(self.texts) >= self.limit or count < limit_at:  # the line limit, or the budget is spent
            self.next_offset = self.number
            self.next_byte = self.line_start
            self.full = True
        return pos

    def _finish(self, after: int) -> None:
        """Line ``number`` ended; the next one starts at byte ``after``."""
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
            cost = (len(shown) if shown.isascii() else len(shown.encode("utf-8"))) + self.overhead
            if rest:
                cost += MARKER_BYTES
            if self.texts and self.used + cost > self.budget:
                self.next_offset = self.number
                self.next_byte = self.line_start
                self.full = True
                return
            self.texts.append(shown)
            if rest:
                self.rests[self.number] = rest
            self.used += cost
            if len(self.texts) >= self.limit:
                self.next_offset = self.number + 1
                self.next_byte = after
                self.full = True
        self.number += 1
        self.line_start = after
        self.pieces = []
        self.kept = 0
        self.length = 0
        self.tail = b""

    def close(self) -> None:
        """The file ended: the last line, if it had no newline."""
        if not self.full and (self.length or self.pieces):
            self._finish(self.base)


def read_page(
    handle: BinaryIO,
    *,
    offset: int,
    limit: int,
    budget: int,
    display: str,
    max_chars: int = 2000,
    column: int = 1,
    whole: bool = True,
    total: int | None = None,
    start: tuple[int, int] | None = None,
    numbered: bool = False,
) -> Page:
    """Cut the page's lines from the stream.

    ``whole``: stream the whole file and hash it (the tracker cannot trust the stat identity).
    Otherwise the stream stops at the end of the page when ``total`` (the file's line count) is
    known, else only counts the lines after it; ``start`` is a known (line, byte) to seek to.
    ``numbered``: the page will be rendered with line numbers (they count against ``budget``).
    """
    hasher = hashlib.blake2b(digest_size=16) if whole else None
    cutter = _LineCutter(
        offset=offset, limit=limit, budget=budget, max_chars=max_chars, column=column, numbered=numbered
    )
    newlines = 0
    size = 0
    last = b""
    pending = b""
    if start is not None and hasher is None and total is not None and start[0] > 1:
        handle.seek(start[1])
        cutter.start_at(*start)
    else:
        pending = handle.read(SNIFF)
        if b"\x00" in pending:
            raise binary_refusal(display)
    while True:
        chunk, pending = (pending, b"") if pending else (handle.read(CHUNK), b"")
        if not chunk:
            break
        size += len(chunk)
        if hasher is not None:
            hasher.update(chunk)
        last = chunk[-1:]
        if not cutter.full:
            cutter.feed(chunk)
            if cutter.full and hasher is None and total is not None:
                break
        if total is None:
            newlines += chunk.count(b"\n")
    cutter.close()
    if total is None:
        total = newlines + (1 if size and last != b"\n" else 0)
    next_offset = cutter.next_offset
    if next_offset is not None and next_offset > total:
        next_offset = None
    return Page(
        first=offset,
        texts=cutter.texts,
        rests=cutter.rests,
        total=total,
        next_offset=next_offset,
        size=size,
        digest=None if hasher is None else hasher.digest(),
        next_byte=cutter.next_byte if next_offset is not None else None,
    )


def render_text(page: Page, *, display: str, offset: int, column: int, numbered: bool = False) -> str:
    """The page's lines as the file has them, a note in brackets after them (the range shown, and
    where to continue); ``numbered``: ``N<TAB>`` before each line (``cat -n`` without its padding).

    Numbers cost a 2,000-line file 7 % more o200k tokens than its text (docs/decisions.md), so
    they are off unless asked for; the note still names the lines shown."""
    if page.total == 0:
        return f"[{display} is empty]"
    texts = page.texts
    if not texts:
        return (
            f"[offset {offset} is past the end of {display}, which has {page.total} "
            f"line{'s' if page.total != 1 else ''}; read from an offset between 1 and {page.total}]"
        )
    first = page.first
    last = first + len(texts) - 1
    if page.rests:
        texts = list(texts)
        for number, rest in page.rests.items():
            shown_to = (column - 1 if number == offset else 0) + len(texts[number - first])
            texts[number - first] += (
                f" [… line continues: {rest} more bytes; read them with offset={number}, "
                f"limit=1, column={shown_to + 1}]"
            )
    out = "\n".join(map("{}\t{}".format, range(first, last + 1), texts) if numbered else texts)
    if page.next_offset is not None:
        return f"{out}\n[lines {first}-{last} of {page.total}; more follow: call again with offset={page.next_offset}]"
    if first > 1:
        return f"{out}\n[end of file: lines {first}-{last} of {page.total}]"
    return out


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


def kept_lines(lines: list[str], room: int) -> int:
    """How many of ``lines``, each with its newline, fit in ``room`` bytes."""
    used = 0
    for count, line in enumerate(lines):
        used += len(line.encode("utf-8")) + 1
        if used > room:
            return count
    return len(lines)


def fit_text(text: str, cap: int, *, page: Page) -> str:
    """Cut read_file's text (``page`` rendered) to ``cap`` bytes at a line boundary, saying where
    to continue: the page's lines come first in the text, one text line each, so the lines kept
    say the offset without parsing it back (unnumbered lines carry no number to parse)."""
    if not cap or len(text.encode("utf-8")) <= cap:
        return text
    lines = text.split("\n")
    kept = kept_lines(lines, cap - 200)
    shown = min(kept, len(page.texts))
    if shown == len(page.texts):  # every line fits; only the note did not
        number = page.next_offset
        hint = f"call again with offset={number}" if number else "that was the end of the file"
    elif shown:
        hint = f"call again with offset={page.first + shown}"
    else:
        hint = "read fewer lines with 'limit'"
    return "\n".join([*lines[:kept], f"[the page was cut to fit max_result_bytes ({cap} bytes); {hint}]"])


def fit_sections(sections: list[tuple[str, str, Page | None]], cap: int) -> str:
    """read_files' sections (display, text under its ``==> path <==`` header, page or None for a
    note) joined, cut to ``cap`` bytes: whole sections while they fit, then the lines of the one
    cut; the note names it and the read_file call that continues it (read_files has no offset)."""
    joined = "\n\n".join(text for _, text, _ in sections)
    if not cap or len(joined.encode("utf-8")) <= cap:
        return joined
    room = cap - 200 - max(len(display.encode("utf-8")) for display, _, _ in sections)  # the note names one
    out: list[str] = []
    hint = "read fewer files per call, or fewer lines with 'limit'"
    for display, text, page in sections:
        lines = text.split("\n")
        header = 1  # the lines before the page's: its header, after the blank line between sections
        if out:
            lines = ["", *lines]
            header = 2
        kept = kept_lines(lines, room)
        room -= sum(len(line.encode("utf-8")) + 1 for line in lines[:kept])
        out.extend(lines[:kept])
        if kept == len(lines):
            continue
        shown = 0 if page is None else min(max(0, kept - header), len(page.texts))
        number = None
        if page is not None and 0 < shown < len(page.texts):
            number = page.first + shown
        elif page is not None and shown and page.next_offset:  # every line fits; only the note did not
            number = page.next_offset
        if number:
            hint = f"continue {display} with filesystem.read_file offset={number}; read the other files alone"
        break
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
    numbered: bool = False,
) -> Page:
    """Page one open file (closing it); records the read in the tracker."""
    settings = fs.settings
    path = str(resolved.path)
    ident = identity(st)
    trusted = identity_vouches(st)
    total, start = fs.line_index.get(path, ident, offset) if trusted else (None, None)
    with open(fd, "rb", closefd=True) as handle:
        page = read_page(
            handle,
            offset=offset,
            limit=limit,
            budget=page_budget(settings.max_read_bytes, toolkit.result_limit(ctx)),
            display=loc.display,
            max_chars=settings.max_line_chars,
            column=column,
            whole=not trusted,
            total=total,
            start=start,
            numbered=numbered,
        )
    if trusted:
        fs.line_index.put(path, ident, page.total, page.next_offset, page.next_byte)
    fs.tracker.record(
        ctx.conversation_id,
        path,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        data_digest=page.digest,
        stat_identity=ident,
        store=store_of(ctx),
    )
    return page


def page_budget(read_bytes: int, result_cap: int) -> int:
    """The bytes a page's lines may take: the read budget, within the host's result cap."""
    if result_cap > 0:
        return max(1, min(read_bytes, result_cap - NOTE_BYTES))
    return read_bytes


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
    result_budget_bytes = READ_RESULT_BYTES

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="read")
        offset = toolkit.integer(args, "offset", default=1, minimum=1)
        limit = toolkit.integer(args, "limit", default=fs.settings.read_page_lines, minimum=1)
        column = toolkit.integer(args, "column", default=1, minimum=1)
        form = toolkit.choice(args, "format", ("text", "json"), default="text")
        numbered = toolkit.flag(args, "line_numbers", default=fs.settings.read_line_numbers) and form == "text"
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
        page = read_lines(fs, fd, st, loc, resolved, ctx, offset=offset, limit=limit, column=column, numbered=numbered)
        if form == "text":
            text = render_text(page, display=loc.display, offset=offset, column=column, numbered=numbered)
            return ToolResult(text=fit_text(text, toolkit.result_limit(ctx), page=page))
        data: dict[str, Any] = {
            "path": loc.display,
            "total": page.total,
            "start": offset,
            "lines": page.texts,
            "truncated": page.next_offset is not None,
            "next_offset": page.next_offset,
        }
        if page.rests:
            data["line_truncated"] = True
        if not page.texts and page.total and offset > page.total:
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
    result_budget_bytes = READ_RESULT_BYTES

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        paths = args.get("paths")
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
            raise ToolError("invalid_args", "'paths' must be a non-empty list of paths relative to the project root")
        if len(paths) > MAX_FILES:
            raise ToolError("invalid_args", f"at most {MAX_FILES} paths per call; split them over several calls")
        limit = toolkit.integer(args, "limit", default=fs.settings.read_page_lines, minimum=1)
        numbered = toolkit.flag(args, "line_numbers", default=fs.settings.read_line_numbers)
        budget = page_budget(fs.settings.max_read_bytes, toolkit.result_limit(ctx))
        share = max(4096, budget // len(paths))
        sections = [self._one(raw, ctx, limit, share=share, args=args, numbered=numbered) for raw in paths]
        return ToolResult(text=fit_sections(sections, toolkit.result_limit(ctx)))

    def _one(
        self, raw: str, ctx: CallContext, limit: int, *, share: int, args: dict[str, Any], numbered: bool
    ) -> tuple[str, str, Page | None]:
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
                note = f"==> {loc.display} <==\n[{mime} file: read it alone with filesystem.read_file to see it]"
                return loc.display, note, None
            settings = attrs.evolve(fs.settings, max_read_bytes=share)
            page = read_lines(_With(fs, settings), fd, st, loc, resolved, ctx, offset=1, limit=limit, numbered=numbered)
        except ToolError as exc:
            return raw, f"==> {raw} <==\n[{exc.code}: {exc.message}]", None
        text = render_text(page, display=loc.display, offset=1, column=1, numbered=numbered)
        # read_files has no offset: the continuation is a read_file call.
        text = text.replace("; more follow: call again with offset=", "; more follow: filesystem.read_file offset=")
        return loc.display, f"==> {loc.display} <==\n" + text, page


class _With:
    """The server seen with other settings (one file's share of the byte budget)."""

    def __init__(self, fs: Any, settings: Any) -> None:
        self.settings = settings
        self.tracker = fs.tracker
        self.line_index = fs.line_index
