"""filesystem.grep: regex search over file contents, gitignore-aware, binaries skipped, bounded.

One call must not stall the server: patterns run on RE2 (linear time, and it releases the
interpreter lock while it searches), files are streamed in fixed-size chunks (a line longer than
``max_grep_line_bytes`` is searched in pieces, so memory stays bounded whatever the file), and
output lines are cut to a window around the match. Line numbers are counted only up to matches.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import attrs
from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition, toolkit

from ._base import FilesystemTool, truncation, walk_note
from ._fsio import FILE_FLAGS, printable, read_at_most
from ._globpat import compile_glob
from ._read import SNIFF, open_for_reading
from ._rules import WalkGate
from ._text import fit_result, grep_lines, wants_json
from ._walk import Walk, start

CHUNK = 1 << 20
#: Small files are searched together (``Search.add``): files up to this size, this much at once.
BATCH_FILE = 64 << 10
BATCH_BYTES = 256 << 10
MAX_CONTENT_CHARS = 1000
#: Characters shown before the match when a long line is cut to a window around it.
LEAD_CHARS = 100
MAX_CONTEXT = 20
MAX_HEAD_LIMIT = 10_000
MODES = ("content", "files_with_matches", "count")

#: ``type`` filter: ripgrep's names for the common languages and formats.
FILE_TYPES: dict[str, tuple[str, ...]] = {
    "py": (".py", ".pyi"),
    "js": (".js", ".mjs", ".cjs", ".jsx"),
    "ts": (".ts", ".tsx", ".mts", ".cts"),
    "go": (".go",),
    "rust": (".rs",),
    "java": (".java",),
    "kotlin": (".kt", ".kts"),
    "c": (".c", ".h"),
    "cpp": (".cpp", ".cc", ".cxx", ".hpp", ".hh", ".hxx", ".h"),
    "cs": (".cs",),
    "rb": (".rb",),
    "php": (".php",),
    "swift": (".swift",),
    "sh": (".sh", ".bash", ".zsh"),
    "html": (".html", ".htm"),
    "css": (".css", ".scss", ".sass", ".less"),
    "md": (".md", ".markdown"),
    "json": (".json",),
    "yaml": (".yaml", ".yml"),
    "toml": (".toml",),
    "sql": (".sql",),
    "txt": (".txt",),
    "xml": (".xml",),
}


class Matcher:
    """A compiled RE2 search over bytes (UTF-8); ``multiline`` lets matches span lines."""

    def __init__(self, pattern: str, case_insensitive: bool, *, multiline: bool = False) -> None:
        import re2

        options = re2.Options()
        options.log_errors = False
        options.case_sensitive = not case_insensitive
        if multiline:
            options.dot_nl = True
        else:
            options.never_nl = True  # a match never spans lines, as in grep
        options.never_capture = True  # only the span of the whole match is used
        self.multiline = multiline
        try:
            self.regex = re2.compile("(?m)" + pattern, options)
        except re2.error as exc:
            raise _regex_error(pattern, exc) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise ToolError("invalid_regex", f"'pattern' is not a valid regular expression ({exc})") from None
        self.find = _finder(self.regex)
        # \A and \z anchor at the text's ends: in a batch those are not each file's ends.
        self.batchable = "\\A" not in pattern and "\\z" not in pattern


def _finder(regex: Any) -> Callable[[bytes, int], tuple[int, int] | None]:
    """``find(data, pos)``: the span of the first match at or after ``pos`` (None: no match).

    Grep calls it once per file, so the wrapper's cost per call matters (P9): when the compiled
    object exposes RE2's ``Match`` directly it is called without building a match object.
    """
    import re2

    raw = getattr(regex, "_regexp", None)
    anchor = getattr(getattr(getattr(re2, "_re2", None), "RE2", None), "Anchor", None)
    if raw is not None and hasattr(raw, "Match") and anchor is not None:
        match, unanchored = raw.Match, anchor.UNANCHORED

        def find_raw(data: bytes, pos: int) -> tuple[int, int] | None:
            start, end = match(unanchored, data, pos, len(data))[0]
            return None if start < 0 else (start, end)

        return find_raw

    def find(data: bytes, pos: int) -> tuple[int, int] | None:
        found = regex.search(data, pos)
        return None if found is None else found.span()

    return find


def _regex_error(pattern: str, exc: Exception) -> ToolError:
    import re

    reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError, ValueError):
        return ToolError(
            "invalid_regex",
            f"'pattern' is not a valid regular expression ({reason}); fix it, "
            "or escape special characters such as ( [ . * with a backslash",
        )
    return ToolError(
        "invalid_regex",
        f"'pattern' uses a feature the linear-time search engine (RE2) does not support ({reason}): "
        "backreferences (\\1), lookahead/lookbehind ((?=, (?!, (?<=, (?<!), atomic groups and "
        "possessive quantifiers cannot be used; rewrite the pattern without them (e.g. search for "
        "the candidates and check them with filesystem.read_file)",
    )


@attrs.define(kw_only=True)
class Hit:
    line: int
    content: str
    before: list[str] | None = None
    after: list[str] | None = None
    missing_after: int = 0


def _text(raw: bytes) -> str:
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", "replace")


def _cut(raw: bytes, at: int = 0) -> str:
    """The line ``raw`` for output: whole when short, else a window that shows the match at ``at``."""
    if len(raw) <= MAX_CONTENT_CHARS:
        text = _text(raw)
        if len(text) <= MAX_CONTENT_CHARS:
            return text
    lead = max(0, min(at - LEAD_CHARS, len(raw) - MAX_CONTENT_CHARS))
    window = raw[lead : lead + MAX_CONTENT_CHARS * 4]
    text = _text(window) if lead + len(window) >= len(raw) else window.decode("utf-8", "replace")
    head = "…" if lead else ""
    if lead:
        text = text.lstrip("\ufffd")  # a character cut in half by the window
    if len(text) > MAX_CONTENT_CHARS or lead + len(window) < len(raw):
        return head + text[:MAX_CONTENT_CHARS] + "…"
    return head + text


class FileScan:
    """The matches of one file, read in chunks; ``want`` bounds what is kept (None: count only)."""

    def __init__(
        self,
        matcher: Matcher,
        *,
        want: int | None,
        before: int,
        after: int,
        max_line: int,
        cancelled: threading.Event | None,
    ) -> None:
        self.find = matcher.find
        self.want = want
        self.before = before
        self.after = after
        self.max_line = max_line
        self.cancelled = cancelled
        self.hits: list[Hit] = []
        self.count = 0
        self._line = 1  # number of the first line of the next region
        self._last = 0  # last line reported (a long line searched in pieces is reported once)
        self._tail: deque[str] = deque(maxlen=before or 1)
        self._pending: list[Hit] = []

    @property
    def done(self) -> bool:
        return self.want is not None and len(self.hits) >= self.want and not self._pending

    def run(self, read: Callable[[int], bytes], size_hint: int = CHUNK) -> None:
        """Read and search to the end; ``size_hint`` (the file's size + 1) lets a small file be
        read with one call, a short read marking the end."""
        carry = b""
        request = max(1, min(size_hint, CHUNK))
        first = True
        while not self.done:
            if self.cancelled is not None and self.cancelled.is_set():
                return
            chunk = read(request)
            if first:
                first = False
                if b"\x00" in chunk[:SNIFF]:
                    return  # binary: skipped
            if not chunk:
                break
            buf = carry + chunk if carry else chunk
            if len(chunk) < request:  # the end of a regular file
                self._region(buf, complete=True, final=True)
                return
            request = CHUNK
            cut = buf.rfind(b"\n") + 1
            if cut:
                self._region(buf[:cut], complete=True)
                carry = buf[cut:]
            else:
                carry = buf
            if len(carry) > self.max_line:
                # A line longer than the cap: search what we have of it, keep none of it.
                self._region(carry, complete=False)
                carry = b""
        if carry and not self.done:
            self._region(carry, complete=True, final=True)

    def _region(self, region: bytes, *, complete: bool, final: bool = False) -> None:
        """Search ``region`` (whole lines when ``complete``; else a piece of one long line).

        ``final``: the file's last region (its line count is not needed afterwards).
        """
        if self._pending:
            self._fill_after(region)
        find = self.find
        end = len(region)
        pos = 0
        line = self._line
        counted = 0
        while not self.done:
            found = find(region, pos)
            if found is None:
                break
            at = found[0]
            if at >= end and (not complete or end == 0 or region[-1:] == b"\n"):
                break  # the empty "line" after a final newline is not a line
            line += region.count(b"\n", counted, at)
            counted = at
            first = region.rfind(b"\n", 0, at) + 1
            last = region.find(b"\n", at)
            last = end if last < 0 else last
            if line != self._last:
                self._last = line
                self.count += 1
                if self.want is not None and len(self.hits) < self.want:
                    self._record(region, line, first, last, at, complete)
            pos = last + 1
            if pos > end:
                break
        if final:
            return
        self._line += region.count(b"\n")
        if self.before and complete:
            self._remember_tail(region)

    def _record(self, region: bytes, line: int, first: int, last: int, at: int, complete: bool) -> None:
        hit = Hit(line=line, content=_cut(region[first:last], at - first))
        if self.before:
            lines: list[str] = []
            cursor = first
            while len(lines) < self.before and cursor > 0:
                previous = region.rfind(b"\n", 0, cursor - 1) + 1
                lines.append(_cut(region[previous : cursor - 1]))
                cursor = previous
            if len(lines) < self.before and cursor == 0:
                older = list(self._tail)[-(self.before - len(lines)) :] if self._tail else []
                lines.extend(reversed(older))
            hit.before = lines[::-1]
        if self.after:
            hit.after = []
            cursor = last
            end = len(region)
            while len(hit.after) < self.after and cursor + 1 < end:
                following = region.find(b"\n", cursor + 1)
                following = end if following < 0 else following
                hit.after.append(_cut(region[cursor + 1 : following]))
                cursor = following
            hit.missing_after = self.after - len(hit.after) if complete else 0
            if hit.missing_after:
                self._pending.append(hit)
        self.hits.append(hit)

    def _fill_after(self, region: bytes) -> None:
        cursor = -1
        end = len(region)
        lines: list[str] = []
        need = max(h.missing_after for h in self._pending)
        while len(lines) < need and cursor + 1 < end:
            following = region.find(b"\n", cursor + 1)
            following = end if following < 0 else following
            lines.append(_cut(region[cursor + 1 : following]))
            cursor = following
        for hit in self._pending:
            taken = lines[: hit.missing_after]
            assert hit.after is not None
            hit.after.extend(taken)
            hit.missing_after -= len(taken)
        self._pending = [h for h in self._pending if h.missing_after]

    def _remember_tail(self, region: bytes) -> None:
        """Keep the region's last lines (it ends with a newline) as "before" lines of the next."""
        parts = region[:-1].rsplit(b"\n", self.before)
        self._tail.extend(_cut(part) for part in parts[-self.before :])

    def finish(self) -> None:
        self._pending = []


def scan_multiline(data: bytes, matcher: Matcher, want: int | None) -> tuple[list[Hit], int]:
    """Matches that may span lines: each reported at its first line, with the lines it covers."""
    if b"\x00" in data[:SNIFF]:
        return [], 0
    hits: list[Hit] = []
    count = 0
    line, counted, pos = 1, 0, 0
    end = len(data)
    while True:
        found = matcher.find(data, pos)
        if found is None:
            break
        at, stop = found
        if at >= end and end and data.endswith(b"\n"):
            break
        line += data.count(b"\n", counted, at)
        counted = at
        count += 1
        if want is None or len(hits) < want:
            first = data.rfind(b"\n", 0, at) + 1
            last = data.find(b"\n", max(stop - 1, at))
            last = end if last < 0 else last
            block = data[first:last]
            text = block.decode("utf-8", "replace").replace("\r\n", "\n")
            if len(text) > MAX_CONTENT_CHARS * 4:
                text = text[: MAX_CONTENT_CHARS * 4] + "…"
            hits.append(Hit(line=line, content=text))
        pos = stop if stop > at else at + 1
        if pos > end:
            break
    return hits, count


def _open_at(dir_fd: int, name: str) -> int | None:
    try:
        return os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


@attrs.define(kw_only=True)
class Search:
    """One grep call's settings and its paged output."""

    matcher: Matcher
    mode: str
    before: int
    after: int
    offset: int
    limit: int
    max_line: int
    max_multiline: int
    cancelled: threading.Event | None
    allow_hard_links: bool
    entries: list[Any] = attrs.field(factory=list)
    seen: int = 0  # output entries produced so far, including those skipped by ``offset``
    # Small text files waiting to be searched together (see ``add``).
    batch: list[tuple[str, bytes]] = attrs.field(factory=list)
    batch_bytes: int = 0
    hard_links: int = 0
    too_large: int = 0

    @property
    def full(self) -> bool:
        return self.seen > self.offset + self.limit

    def _emit(self, entry: Any) -> None:
        if self.offset <= self.seen < self.offset + self.limit + 1:
            self.entries.append(entry)
        self.seen += 1

    def add(self, fd: int, path: str) -> None:
        """Search one open file (closing it), small text files in batches.

        Most files of a tree do not match. One RE2 search over many small files joined by
        newlines answers "none of these match" in one call instead of one call each (P9): a
        match never spans a newline (``never_nl``), so a match in the joined text lies in one
        file, and every match of one file is one of the joined text. A batch with a match is
        searched file by file, in order.
        """
        if not self.batchable:
            self.file(fd, path)
            return
        try:
            st = os.fstat(fd)
            if st.st_nlink > 1 and not self.allow_hard_links:
                self.hard_links += 1
                os.close(fd)
                return
            hint = st.st_size + 1
            data = os.read(fd, hint) if hint <= BATCH_FILE else None
        except OSError:
            os.close(fd)
            return
        if data is None or len(data) >= hint:  # large, or grew meanwhile: on its own
            self.flush()
            self.file(fd, path, st=st, first=data)
            return
        os.close(fd)
        if b"\x00" in data[:SNIFF]:
            return
        self.batch.append((path, data))
        self.batch_bytes += len(data) + 1
        if self.batch_bytes >= BATCH_BYTES:
            self.flush()

    @property
    def batchable(self) -> bool:
        return not self.matcher.multiline and self.matcher.batchable

    def flush(self) -> None:
        """Search the waiting small files."""
        batch = self.batch
        if not batch:
            return
        self.batch, self.batch_bytes = [], 0
        joined = b"\n".join(data for _, data in batch)
        starts = []
        at = 0
        for _, data in batch:
            starts.append(at)
            at += len(data) + 1
        pos = 0
        find = self.matcher.find
        while not self.full:
            span = find(joined, pos)
            if span is None:
                return
            # The first match from ``pos`` on lies in one file: the files before it have none.
            index = bisect.bisect_right(starts, span[0]) - 1
            path, data = batch[index]
            self._found(path, *self._scan(lambda size: b"", data, len(data) + 1))
            if index + 1 >= len(batch):
                return
            pos = starts[index + 1]

    def file(self, fd: int, path: str, *, st: os.stat_result | None = None, first: bytes | None = None) -> None:
        """Search one open file (closing it) and add its output entries."""
        try:
            if st is None:
                st = os.fstat(fd)
                if st.st_nlink > 1 and not self.allow_hard_links:
                    self.hard_links += 1
                    return
            room = self.offset + self.limit + 1 - self.seen
            want = 1 if self.mode == "files_with_matches" else (room if self.mode == "content" else None)
            if self.matcher.multiline:
                if st.st_size > self.max_multiline:
                    self.too_large += 1
                    return
                hits, count = scan_multiline(read_at_most(fd, self.max_multiline), self.matcher, want)
            else:
                read: Callable[[int], bytes] = lambda size: os.read(fd, size)  # noqa: E731
                hint = st.st_size + 1
                if hint <= CHUNK:
                    # Most files are small: one read, one search, and no scanner unless it matches.
                    data = first if first is not None else os.read(fd, hint)
                    whole = len(data) < hint  # else it grew meanwhile: keep reading after it
                    if whole and (b"\x00" in data[:SNIFF] or self.matcher.find(data, 0) is None):
                        return
                    held = [data]
                    hint = len(data) + whole  # a short read of the next size marks the end

                    def read(size: int) -> bytes:
                        return held.pop() if held else os.read(fd, size)

                hits, count = self._scan(read, None, hint, want)
        except OSError:
            return
        finally:
            os.close(fd)
        self._found(path, hits, count)

    def _want(self) -> int | None:
        room = self.offset + self.limit + 1 - self.seen
        return 1 if self.mode == "files_with_matches" else (room if self.mode == "content" else None)

    def _scan(
        self, read: Callable[[int], bytes], data: bytes | None, hint: int, want: int | None = -1
    ) -> tuple[list[Hit], int]:
        """Scan one file's lines (``data`` when it is already read whole)."""
        if data is not None:
            held = [data]

            def read(size: int) -> bytes:
                return held.pop() if held else b""

        scan = FileScan(
            self.matcher,
            want=self._want() if want == -1 else want,
            before=self.before,
            after=self.after,
            max_line=self.max_line,
            cancelled=self.cancelled,
        )
        scan.run(read, hint)
        return scan.hits, scan.count

    def _found(self, path: str, hits: list[Hit], count: int) -> None:
        if not count:
            return
        if self.mode == "files_with_matches":
            self._emit(path)
        elif self.mode == "count":
            self._emit({"path": path, "count": count})
        else:
            for hit in hits:
                if self.full:
                    break
                entry: dict[str, Any] = {"path": path, "line": hit.line, "content": hit.content}
                if hit.before is not None:
                    entry["before"] = hit.before
                if hit.after is not None:
                    entry["after"] = hit.after
                self._emit(entry)


class Grep(FilesystemTool):
    definition = load_tool_definition(__package__, "grep")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        settings = fs.settings
        search = self._search(args, ctx)
        as_json = wants_json(args)
        file_filter = self._filter(args)
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="read", default=".")
        try:
            top = start(loc, inside=resolved.inside, root=fs.root, cache=fs.ignore_cache)
        except ToolError as exc:
            if exc.code != "not_directory":
                raise
            fd, _ = open_for_reading(fs, loc, resolved)
            search.file(fd, loc.display)
            del fd
            return self._fit(self._finish(search, None, None), ctx, search, as_json=as_json)
        walk = Walk(limit=settings.max_walk_entries, cache=fs.ignore_cache, cancelled=ctx.cancelled)
        gate = WalkGate(ctx, fs.root)
        cut = len(top.rel) + 1 if top.rel else 0
        try:
            for directory in walk.walk(top.fd, top.rel, top.stack, top.entropic):
                for entry in directory.files:
                    try:
                        if not entry.is_file(follow_symlinks=False):
                            continue
                    except OSError:
                        continue
                    rel = directory.join(entry.name)
                    if file_filter is not None and not file_filter(entry.name, rel[cut:]):
                        continue
                    if directory.file_ignored(entry.name):
                        continue
                    shown = top.display(rel)
                    if gate.refused(shown):
                        continue
                    opened = _open_at(directory.fd, entry.name)
                    if opened is not None:
                        search.add(opened, printable(shown))
                    if search.full:
                        break
                if search.full:
                    break
            search.flush()
        finally:
            os.close(top.fd)
        return self._fit(self._finish(search, walk, gate), ctx, search, as_json=as_json)

    def _search(self, args: dict[str, Any], ctx: CallContext) -> Search:
        settings = self.fs.settings
        mode = toolkit.choice(args, "output_mode", MODES, default="content")
        context = toolkit.integer(args, "context", default=0, minimum=0, maximum=MAX_CONTEXT)
        before = toolkit.integer(args, "before_context", default=context, minimum=0, maximum=MAX_CONTEXT)
        after = toolkit.integer(args, "after_context", default=context, minimum=0, maximum=MAX_CONTEXT)
        default_limit = settings.max_grep_matches if mode == "content" else settings.max_glob_results
        limit = toolkit.integer(args, "head_limit", default=default_limit, minimum=1, maximum=MAX_HEAD_LIMIT)
        offset = toolkit.integer(args, "offset", default=0, minimum=0)
        matcher = Matcher(
            toolkit.text(args, "pattern", required=True),
            toolkit.flag(args, "case_insensitive"),
            multiline=toolkit.flag(args, "multiline"),
        )
        if mode != "content" or matcher.multiline:
            before = after = 0
        return Search(
            matcher=matcher,
            mode=mode,
            before=before,
            after=after,
            offset=offset,
            limit=limit,
            max_line=settings.max_grep_line_bytes,
            max_multiline=settings.max_edit_bytes,
            cancelled=ctx.cancelled,
            allow_hard_links=settings.allow_hard_links,
        )

    def _fit(self, results: list[Any], ctx: CallContext, search: Search, *, as_json: bool) -> ToolResult:
        note = (
            "call again with offset=next_offset for the next ones, or narrow the search with a more specific "
            "pattern, 'glob', 'type' or 'path', or less context"
        )
        return fit_result(
            results,
            lambda items: grep_lines(items, search.mode),
            as_json=as_json,
            cap=toolkit.result_limit(ctx),
            note=note,
            empty="(no matches)",
            offset=search.offset,
        )

    def _filter(self, args: dict[str, Any]) -> Callable[[str, str], bool] | None:
        checks: list[Callable[[str, str], bool]] = []
        kind = args.get("type")
        if kind is not None and kind != "":
            name = toolkit.text(args, "type", required=True)
            suffixes = FILE_TYPES.get(name)
            if suffixes is None:
                raise ToolError(
                    "invalid_args",
                    f"'type' {name!r} is not a known file type; use one of {', '.join(sorted(FILE_TYPES))}, "
                    "or filter by name with 'glob'",
                )
            checks.append(lambda n, rel: n.endswith(suffixes))
        raw = args.get("glob")
        if raw is not None and raw != "":
            text = toolkit.text(args, "glob", required=True)
            named = (
                compile_glob("**/" + text.strip("/"), argument="glob").name_matcher
                if "/" not in text.strip("/")
                else None
            )
            if named is not None:
                match = named.match
                checks.append(lambda n, rel: match(n))
            else:
                path_match = compile_glob(text, argument="glob").matcher.match
                checks.append(lambda n, rel: path_match(rel))
        if not checks:
            return None
        if len(checks) == 1:
            return checks[0]
        return lambda n, rel: all(check(n, rel) for check in checks)

    def _finish(self, search: Search, walk: Walk | None, gate: WalkGate | None) -> list[Any]:
        results: list[Any] = search.entries[: search.limit]
        notes = _notes(search, gate)
        results.extend(notes)
        if search.full:
            what = {"content": "matching lines", "files_with_matches": "files", "count": "files"}[search.mode]
            next_offset = search.offset + search.limit
            note = truncation(
                f"more than {search.limit} {what} from offset {search.offset} (head_limit, by default "
                f"{'max_grep_matches' if search.mode == 'content' else 'max_glob_results'}); call again with "
                f"offset={next_offset} for the next ones, or narrow the search with a more specific "
                "pattern, 'glob', 'type' or 'path'"
            )
            note["next_offset"] = next_offset
            results.append(note)
        elif walk is not None and walk.truncated:
            results.append(truncation(walk_note(self.fs.settings.max_walk_entries, "the search")))
        elif walk is not None and walk.stopped:
            results.append(truncation("the call was cancelled before the search was complete"))
        elif walk is not None and walk.too_deep:
            results.append(truncation("directories nested deeper than 128 levels were not searched"))
        return results


def _notes(search: Search, gate: WalkGate | None) -> Iterator[dict[str, Any]]:
    skipped = gate.note() if gate is not None else None
    if skipped is not None:
        yield skipped
    if search.hard_links:
        yield {
            "skipped_hard_links": search.hard_links,
            "note": f"{search.hard_links} hard-linked files were not searched (allow_hard_links is false)",
        }
    if search.too_large:
        yield {
            "skipped_too_large": search.too_large,
            "note": f"{search.too_large} files larger than max_edit_bytes were not searched in multiline mode",
        }
