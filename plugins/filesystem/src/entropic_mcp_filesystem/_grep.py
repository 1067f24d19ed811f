"""filesystem.grep: regex search over file contents, gitignore-aware, binaries skipped, bounded.

Speed matters (P9 of performance.md): each file is read whole with one or two ``read`` calls,
searched with one regex over bytes (pure-ASCII files with an ASCII pattern) or text, and line
numbers are counted only for files that match.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition

from . import _args
from ._base import FilesystemTool, fit_list, result_cap, truncation, walk_note
from ._fsio import FILE_FLAGS, printable
from ._globpat import compile_glob
from ._read import SNIFF
from ._rules import WalkGate
from ._walk import Walk, start

READ_CHUNK = 1 << 18
MAX_CONTENT_CHARS = 1000
MAX_CONTEXT = 20


class Matcher:
    """A compiled search: bytes regex for ASCII data when possible, text regex otherwise."""

    def __init__(self, pattern: str, case_insensitive: bool) -> None:
        flags = re.MULTILINE | (re.IGNORECASE if case_insensitive else 0)
        try:
            self.text = re.compile(pattern, flags)
        except (re.error, OverflowError, RecursionError, ValueError) as exc:
            raise ToolError(
                "invalid_regex",
                f"'pattern' is not a valid regular expression ({exc}); fix it, "
                "or escape special characters such as ( [ . * with a backslash",
            ) from None
        self.data: re.Pattern[bytes] | None = None
        if pattern.isascii():
            try:
                self.data = re.compile(pattern.encode("ascii"), flags)
            except (re.error, OverflowError, RecursionError, ValueError):
                self.data = None


def _cut(line: str) -> str:
    line = line[:-1] if line.endswith("\r") else line
    return line if len(line) <= MAX_CONTENT_CHARS else line[:MAX_CONTENT_CHARS] + "…"


def _text(chunk: bytes | str) -> str:
    return chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else chunk


def search(buf: bytes | str, regex: re.Pattern[Any], path: str, limit: int, context: int) -> list[dict[str, Any]]:
    """Matching lines of ``buf`` (one entry per line), at most ``limit``."""
    nl: Any = b"\n" if isinstance(buf, bytes) else "\n"
    end = len(buf)
    out: list[dict[str, Any]] = []
    line_no, counted, pos = 1, 0, 0
    trailing_nl = end > 0 and buf[end - 1 :] == nl
    while len(out) < limit:
        found = regex.search(buf, pos)
        if found is None:
            break
        at = found.start()
        if at >= end and (trailing_nl or end == 0):
            break
        line_no += buf.count(nl, counted, at)
        counted = at
        first = buf.rfind(nl, 0, at) + 1
        last = buf.find(nl, at)
        if last < 0:
            last = end
        entry: dict[str, Any] = {"path": path, "line": line_no, "content": _cut(_text(buf[first:last]))}
        if context:
            before, cursor = [], first
            for _ in range(context):
                if cursor == 0:
                    break
                previous = buf.rfind(nl, 0, cursor - 1) + 1
                before.append(_cut(_text(buf[previous : cursor - 1])))
                cursor = previous
            after, cursor = [], last
            for _ in range(context):
                if cursor >= end - 1:
                    break
                following = buf.find(nl, cursor + 1)
                following = end if following < 0 else following
                after.append(_cut(_text(buf[cursor + 1 : following])))
                cursor = following
            entry["before"] = before[::-1]
            entry["after"] = after
        out.append(entry)
        pos = last + 1
        if pos > end:
            break
    return out


def read_file_at(dir_fd: int, name: str) -> bytes | None:
    """The whole file ``name`` (never through a link); None if it cannot be opened."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        data = os.read(fd, READ_CHUNK)
        if len(data) == READ_CHUNK:
            chunks = [data]
            while True:
                more = os.read(fd, 1 << 22)
                if not more:
                    break
                chunks.append(more)
            data = b"".join(chunks)
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def grep_bytes(data: bytes, matcher: Matcher, path: str, limit: int, context: int) -> list[dict[str, Any]]:
    if b"\x00" in data[:SNIFF]:
        return []
    if matcher.data is not None and data.isascii():
        if matcher.data.search(data) is None:
            return []
        return search(data, matcher.data, path, limit, context)
    text = data.decode("utf-8", "replace")
    if matcher.text.search(text) is None:
        return []
    return search(text, matcher.text, path, limit, context)


class Grep(FilesystemTool):
    definition = load_tool_definition(__package__, "grep")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        matcher = Matcher(_args.text(args, "pattern"), _args.flag(args, "case_insensitive"))
        context = _args.integer(args, "context", default=0, minimum=0, maximum=MAX_CONTEXT) or 0
        file_filter = self._filter(args)
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="read", default=".")
        settings = fs.settings
        want = settings.max_grep_matches + 1  # one more than shown tells us to announce truncation
        found: list[dict[str, Any]] = []
        try:
            top = start(loc, inside=resolved.inside, root=fs.root, cache=fs.ignore_cache)
        except ToolError as exc:
            if exc.code != "not_directory":
                raise
            return self._fit(self._one_file(resolved, loc, matcher, context, want), ctx)
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
                    if gate.refused(top.display(rel)):
                        continue
                    data = read_file_at(directory.fd, entry.name)
                    if data is None:
                        continue
                    found.extend(grep_bytes(data, matcher, printable(top.display(rel)), want - len(found), context))
                    if len(found) >= want:
                        break
                if len(found) >= want:
                    break
        finally:
            os.close(top.fd)
        return self._fit(self._finish(found, walk, gate), ctx)

    def _fit(self, results: list[Any], ctx: CallContext) -> ToolResult:
        note = "narrow the search with a more specific pattern, 'glob' or 'path', or less context"
        return ToolResult.json(fit_list(results, result_cap(ctx), note))

    def _filter(self, args: dict[str, Any]) -> Callable[[str, str], bool] | None:
        raw = args.get("glob")
        if raw is None or raw == "":
            return None
        text = _args.text(args, "glob")
        if "/" not in text.strip("/"):
            named = compile_glob("**/" + text.strip("/"), argument="glob").name_regex
            if named is not None:
                match = named.match
                return lambda name, rel: match(name) is not None
        pattern = compile_glob(text, argument="glob")
        return lambda name, rel: pattern.regex.match(rel) is not None

    def _one_file(self, resolved: Any, loc: Any, matcher: Matcher, context: int, want: int) -> list[Any]:
        from ._fsio import open_regular, read_all

        self.fs.refuse_ignored(resolved, loc)
        fd, _ = open_regular(loc)
        found = grep_bytes(read_all(fd), matcher, loc.display, want, context)
        return self._finish(found, None)

    def _finish(self, found: list[dict[str, Any]], walk: Walk | None, gate: WalkGate | None = None) -> list[Any]:
        limit = self.fs.settings.max_grep_matches
        results: list[Any] = found[:limit]
        skipped = gate.note() if gate is not None else None
        if skipped is not None:
            results.append(skipped)
        if len(found) > limit:
            results.append(
                truncation(
                    f"more than {limit} matching lines (max_grep_matches); narrow the search "
                    "with a more specific pattern, 'glob' or 'path'"
                )
            )
        elif walk is not None and walk.truncated:
            results.append(truncation(walk_note(self.fs.settings.max_walk_entries, "the search")))
        elif walk is not None and walk.stopped:
            results.append(truncation("the call was cancelled before the search was complete"))
        elif walk is not None and walk.too_deep:
            results.append(truncation("directories nested deeper than 128 levels were not searched"))
        return results
