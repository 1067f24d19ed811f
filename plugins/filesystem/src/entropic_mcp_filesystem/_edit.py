"""filesystem.edit_file: replace a unique string or insert after a line, keeping line endings."""

from __future__ import annotations

import functools
import re
import threading
import time
from typing import Any

import attrs
from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition, toolkit

from ._args import file_text
from ._base import FilesystemTool
from ._fsio import Existing, write_atomic
from ._read import SNIFF, binary_refusal
from ._tracker import digest, store_of
from ._write import in_style, line_style

MAX_DIFF_LINES = 120
MAX_REPORTED_LINES = 50
MAX_EDITS = 100
#: Lines of context around each change in the diff.
DIFF_CONTEXT = 2
#: The changed region (old and new lines together) that is compared line by line at most.
DIFF_MAX_LINES = 20_000
#: Time the comparison may take; difflib is quadratic on repetitive lines (a 237 kB file took 36 s).
DIFF_SECONDS = 1.0


def too_large(display: str, size: int, limit: int) -> ToolError:
    return ToolError(
        "too_large",
        f"the edit would make {display} {size} bytes or more, more than max_edit_bytes ({limit}) under "
        "[servers.filesystem]; nothing was written. Make a smaller change (fewer replacements or a "
        "shorter new_string), or ask the user to raise max_edit_bytes in the [servers.filesystem] "
        "table of entropic-mcp.toml",
        limit=limit,
    )


def stop_if_cancelled(cancelled: threading.Event | None, display: str) -> None:
    """Stop a call whose deadline passed (or that was cancelled) before it writes anything."""
    if cancelled is not None and cancelled.is_set():
        raise ToolError("cancelled", f"the edit of {display} was cancelled (or ran out of time); nothing was written")


def replace(body: str, old: str, new: str, *, replace_all: bool, display: str, limit: int) -> tuple[str, int]:
    count = body.count(old)
    if count == 0:
        raise ToolError(
            "not_found",
            f"old_string was not found in {display}; {not_found_hint(body, old)}",
        )
    if count > 1 and not replace_all:
        lines: list[int] = []
        start = 0
        while len(lines) < MAX_REPORTED_LINES:
            at = body.find(old, start)
            if at < 0:
                break
            lines.append(body.count("\n", 0, at) + 1)
            start = at + 1
        raise ToolError(
            "multiple_matches",
            f"old_string occurs {count} times in {display} (lines "
            f"{', '.join(map(str, lines))}); include more surrounding text to make it unique, "
            "or pass replace_all: true",
            count=count,
            lines=lines,
        )
    # Characters never outnumber UTF-8 bytes: a result this long is too large before it is built.
    size = len(body) + (count if replace_all else 1) * (len(new) - len(old))
    if size > limit:
        raise too_large(display, size, limit)
    return body.replace(old, new, -1 if replace_all else 1), count if replace_all else 1


#: read_file's text form: the right-aligned line number and a tab before each line.
NUMBERED = re.compile(r"^ *\d+\t", re.MULTILINE)
#: Files longer than this get no nearest-lines hint (it compares every line).
HINT_MAX_LINES = 20_000


def not_found_hint(body: str, old: str) -> str:
    """How to recover: drop read_file's line numbers, or look at the lines most like old_string."""
    lines = old.split("\n")
    if all(NUMBERED.match(line) for line in lines if line):
        stripped = NUMBERED.sub("", old)
        where = " (without them the text is in the file)" if stripped and stripped in body else ""
        return (
            "it carries read_file's line-number prefix (the number and the tab before each line)"
            f"{where}; drop the prefix from every line of old_string and try again"
        )
    advice = (
        "read the file again with filesystem.read_file and copy the exact text, including whitespace and indentation"
    )
    probe = next((line.strip() for line in lines if line.strip()), "")
    file_lines = body.split("\n")
    if not probe or len(file_lines) > HINT_MAX_LINES:
        return advice
    import difflib

    stripped_lines = [line.strip() for line in file_lines]
    close = difflib.get_close_matches(probe, stripped_lines, n=3, cutoff=0.6)
    if not close:
        return advice
    shown = []
    for candidate in close:
        number = stripped_lines.index(candidate) + 1
        shown.append(f"{number}: {file_lines[number - 1][:200]}")
    return f"the nearest lines are {'; '.join(shown)} — {advice}"


def insert(body: str, new: str, after: int) -> str:
    """``new`` as whole lines after line ``after`` (0 = at the top; past the end = appended)."""
    block = new if new.endswith("\n") or not new else new + "\n"
    if after == 0:
        return block + body
    at = -1
    for _ in range(after):
        at = body.find("\n", at + 1)
        if at < 0:
            break
    if at < 0 or at == len(body) - 1:
        separator = "\n" if body and not body.endswith("\n") else ""
        return body + separator + block
    return body[: at + 1] + block + body[at + 1 :]


class _TooSlow(Exception):
    """The comparison passed its time budget."""


@functools.cache
def _bounded_matcher() -> type:
    import difflib  # only edits pay for it, not start-up

    class Bounded(difflib.SequenceMatcher):  # type: ignore[type-arg]
        """A SequenceMatcher that gives up at a deadline or when the call is cancelled.

        ``find_longest_match`` is where the quadratic time goes; each call is short once the
        compared region is bounded, so checking before each one keeps the whole bounded.
        """

        def __init__(self, a: list[str], b: list[str], deadline: float, cancelled: threading.Event | None) -> None:
            self.deadline = deadline
            self.cancelled = cancelled
            super().__init__(None, a, b)

        def find_longest_match(self, alo: int = 0, ahi: Any = None, blo: int = 0, bhi: Any = None) -> Any:
            if time.monotonic() > self.deadline or (self.cancelled is not None and self.cancelled.is_set()):
                raise _TooSlow
            return super().find_longest_match(alo, ahi, blo, bhi)

    return Bounded


def _range(start: int, stop: int) -> str:
    """A hunk's line range as unified diffs write it (``3``, ``3,4``, or ``2,0`` for none)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if not length else start + 1},{length}"


@attrs.frozen(kw_only=True)
class Diff:
    """The diff an edit reports: ``text``, and why it is only a summary (``omitted``, else None)."""

    text: str
    omitted: str | None = None


def unified(before: str, after: str, display: str, *, cancelled: threading.Event | None = None) -> Diff:
    """A unified diff of the change, in bounded time: the common head and tail are skipped in
    linear time and the rest compared line by line within ``DIFF_MAX_LINES`` and ``DIFF_SECONDS``;
    past either the diff is a summary naming the changed lines."""
    a, b = before.splitlines(), after.splitlines()
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if head == len(a) == len(b):
        return Diff(text="")
    lo = max(0, head - DIFF_CONTEXT)
    keep = max(0, tail - DIFF_CONTEXT)
    sub_a, sub_b = a[lo : len(a) - keep], b[lo : len(b) - keep]
    reason = None
    if len(sub_a) + len(sub_b) > DIFF_MAX_LINES:
        reason = f"the changed part has more than {DIFF_MAX_LINES} lines"
    else:
        matcher = _bounded_matcher()(sub_a, sub_b, time.monotonic() + DIFF_SECONDS, cancelled)
        try:
            groups = list(matcher.get_grouped_opcodes(DIFF_CONTEXT))
        except _TooSlow:
            stop_if_cancelled(cancelled, display)
            reason = f"comparing the changed lines took longer than {DIFF_SECONDS:g} s"
    if reason is not None:
        last_old, last_new = len(a) - tail, len(b) - tail
        return Diff(
            text=f"(diff not shown: {reason}; the change lies within lines {head + 1}-{last_old} of the old "
            f"file and {head + 1}-{last_new} of the new one; read them with filesystem.read_file "
            f"offset={head + 1})",
            omitted=reason,
        )
    lines = [f"--- a/{display}", f"+++ b/{display}"]
    for group in groups:
        first, last = group[0], group[-1]
        lines.append(f"@@ -{_range(first[1] + lo, last[2] + lo)} +{_range(first[3] + lo, last[4] + lo)} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(" " + line for line in sub_a[i1:i2])
                continue
            lines.extend("-" + line for line in sub_a[i1:i2])
            lines.extend("+" + line for line in sub_b[j1:j2])
        if len(lines) > MAX_DIFF_LINES:
            break
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], "... (more diff lines)"]
    return Diff(text="\n".join(lines))


@attrs.frozen(kw_only=True)
class Edit:
    """One change: replace ``old`` (``replace_all``: every occurrence) or insert after line ``after``."""

    new: str
    old: str | None = None
    replace_all: bool = False
    after: int | None = None


def parse_edit(item: Any, where: str | None) -> Edit:
    if not isinstance(item, dict):
        raise ToolError("invalid_args", f"{where or 'an edit'} must be an object with old_string and new_string")
    unknown = sorted(set(item) - {"old_string", "new_string", "replace_all", "insert_line"})
    if unknown:
        raise ToolError("invalid_args", f"{where or 'the edit'} has unknown keys {', '.join(unknown)}")
    try:
        new = file_text(item, "new_string")
        has_old = item.get("old_string") is not None
        has_insert = item.get("insert_line") is not None
        if has_old == has_insert:
            raise ToolError(
                "invalid_args",
                "pass either old_string (text to replace) or insert_line "
                "(line to insert after), not both and not neither",
            )
        old = file_text(item, "old_string") if has_old else None
        if has_old and old == new:
            raise ToolError(
                "invalid_args",
                "old_string and new_string are the same, so the edit would change nothing; "
                "put the text you want in new_string",
            )
        if has_old and not old:
            raise ToolError(
                "invalid_args",
                "old_string is empty; pass the exact text to replace, or use insert_line to add text at a line",
            )
        return Edit(
            new=new,
            old=old,
            replace_all=toolkit.flag(item, "replace_all"),
            after=toolkit.integer(item, "insert_line", minimum=0),
        )
    except ToolError as exc:
        if where is None:
            raise
        raise ToolError(exc.code, f"{where}: {exc.message}", **exc.extra) from None


def parse_edits(args: dict[str, Any]) -> list[Edit]:
    edits = args.get("edits")
    if edits is None:
        return [parse_edit(args_of(args), None)]
    if any(args.get(k) is not None for k in ("old_string", "new_string", "insert_line", "replace_all")):
        raise ToolError("invalid_args", "pass either 'edits' (a list) or one old_string/new_string edit, not both")
    if not isinstance(edits, list) or not edits:
        raise ToolError("invalid_args", "'edits' must be a non-empty list of {old_string, new_string, replace_all}")
    if len(edits) > MAX_EDITS:
        raise ToolError("invalid_args", f"at most {MAX_EDITS} edits per call; split the change in several calls")
    return [parse_edit(item, f"edit {i + 1} of {len(edits)}") for i, item in enumerate(edits)]


def args_of(args: dict[str, Any]) -> dict[str, Any]:
    return {k: args[k] for k in ("old_string", "new_string", "replace_all", "insert_line") if k in args}


def apply_edits(
    body: str,
    edits: list[Edit],
    style: str,
    display: str,
    *,
    limit: int,
    cancelled: threading.Event | None = None,
) -> tuple[str, int]:
    """All edits in order on ``body`` (each sees the result of the ones before); all or nothing.

    No intermediate result grows past ``limit`` characters (``max_edit_bytes``).
    """
    total = 0
    for index, edit in enumerate(edits):
        stop_if_cancelled(cancelled, display)
        try:
            if edit.old is not None:
                body, count = replace(
                    body,
                    in_style(edit.old, style),
                    in_style(edit.new, style),
                    replace_all=edit.replace_all,
                    display=display,
                    limit=limit,
                )
            else:
                assert edit.after is not None
                if len(body) + len(edit.new) + 1 > limit:
                    raise too_large(display, len(body) + len(edit.new), limit)
                body, count = insert(body, in_style(edit.new, style), edit.after), 1
        except ToolError as exc:
            if len(edits) == 1:
                raise
            raise ToolError(
                exc.code,
                f"edit {index + 1} of {len(edits)}: {exc.message} No edit was applied (edits are all or nothing).",
                edit=index + 1,
                **exc.extra,
            ) from None
        total += count
    return body, total


class _DryRun(Exception):
    """Raised from inside the write to stop it once the diff is known."""


class EditFile(FilesystemTool):
    definition = load_tool_definition(__package__, "edit_file")
    required_access_level = AccessLevel.WRITE
    destructive = True
    idempotent = False

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="write")
        edits = parse_edits(args)
        dry_run = toolkit.flag(args, "dry_run")
        key = str(resolved.path)
        store = store_of(ctx)
        cancelled = ctx.cancelled
        outcome: dict[str, Any] = {}

        def render(existing: Existing | None) -> bytes:
            if existing is None:
                raise ToolError("not_found", f"{loc.display} does not exist; create it with filesystem.write_file")
            fs.tracker.check(ctx.conversation_id, key, loc.display, existing.data, existing.stat, store)
            if b"\x00" in existing.data[:SNIFF]:
                raise binary_refusal(loc.display)
            try:
                text = existing.data.decode("utf-8")
            except UnicodeDecodeError:
                raise ToolError(
                    "not_utf8",
                    f"{loc.display} is not UTF-8 text, so it cannot be edited safely; "
                    "leave it unchanged or rewrite it whole with filesystem.write_file",
                ) from None
            style = line_style(text)
            body = text.replace("\r\n", "\n") if style == "crlf" else text
            model_style = "lf" if style == "crlf" else style
            limit = fs.settings.max_edit_bytes
            changed, count = apply_edits(body, edits, model_style, loc.display, limit=limit, cancelled=cancelled)
            result = in_style(changed, "crlf") if style == "crlf" else changed
            data = result.encode("utf-8")
            if len(data) > limit:
                raise too_large(loc.display, len(data), limit)
            outcome["replacements"] = count
            diff = unified(body, changed, loc.display, cancelled=cancelled)
            outcome["diff"] = diff.text
            if diff.omitted is not None:
                outcome["diff_omitted"] = diff.omitted
            outcome["data"] = data
            if dry_run:
                raise _DryRun
            stop_if_cancelled(cancelled, loc.display)
            return data

        try:
            written = write_atomic(loc, render, inspect=fs.inspect_existing(loc.display))
        except _DryRun:
            return ToolResult.json({"path": loc.display, **_shown(outcome), "dry_run": True})
        fs.tracker.record(
            ctx.conversation_id,
            key,
            size=written.size,
            mtime_ns=written.mtime_ns,
            data_digest=digest(outcome["data"]),
            store=store,
        )
        return ToolResult.json({"path": loc.display, **_shown(outcome)})


def _shown(outcome: dict[str, Any]) -> dict[str, Any]:
    return {k: outcome[k] for k in ("replacements", "diff", "diff_omitted") if k in outcome}
