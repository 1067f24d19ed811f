"""filesystem.edit_file: replace a unique string or insert after a line, keeping line endings."""

from __future__ import annotations

from typing import Any

import attrs
from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition, toolkit

from ._args import file_text
from ._base import FilesystemTool
from ._fsio import Existing, write_atomic
from ._read import SNIFF, binary_refusal
from ._tracker import digest
from ._write import in_style, line_style

MAX_DIFF_LINES = 120
MAX_REPORTED_LINES = 50
MAX_EDITS = 100


def replace(body: str, old: str, new: str, *, replace_all: bool, display: str) -> tuple[str, int]:
    count = body.count(old)
    if count == 0:
        raise ToolError(
            "not_found",
            f"old_string was not found in {display}; read the file again with "
            "filesystem.read_file and copy the exact text, including whitespace and indentation",
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
    return body.replace(old, new, -1 if replace_all else 1), count if replace_all else 1


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


def unified(before: str, after: str, display: str) -> str:
    import difflib  # only edits pay for it, not start-up

    lines = list(
        difflib.unified_diff(before.splitlines(), after.splitlines(), f"a/{display}", f"b/{display}", n=2, lineterm="")
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... ({len(lines) - MAX_DIFF_LINES} more diff lines)"]
    return "\n".join(lines)


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


def apply_edits(body: str, edits: list[Edit], style: str, display: str) -> tuple[str, int]:
    """All edits in order on ``body`` (each sees the result of the ones before); all or nothing."""
    total = 0
    for index, edit in enumerate(edits):
        try:
            if edit.old is not None:
                body, count = replace(
                    body,
                    in_style(edit.old, style),
                    in_style(edit.new, style),
                    replace_all=edit.replace_all,
                    display=display,
                )
            else:
                assert edit.after is not None
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
        outcome: dict[str, Any] = {}

        def render(existing: Existing | None) -> bytes:
            if existing is None:
                raise ToolError("not_found", f"{loc.display} does not exist; create it with filesystem.write_file")
            fs.tracker.check(ctx.conversation_id, key, loc.display, existing.data)
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
            changed, count = apply_edits(body, edits, model_style, loc.display)
            outcome["replacements"] = count
            outcome["diff"] = unified(body, changed, loc.display)
            result = in_style(changed, "crlf") if style == "crlf" else changed
            outcome["data"] = result.encode("utf-8")
            if dry_run:
                raise _DryRun
            return outcome["data"]

        try:
            written = write_atomic(loc, render, inspect=fs.inspect_existing(loc.display))
        except _DryRun:
            return ToolResult.json(
                {"path": loc.display, "replacements": outcome["replacements"], "diff": outcome["diff"], "dry_run": True}
            )
        fs.tracker.record(
            ctx.conversation_id, key, size=written.size, mtime_ns=written.mtime_ns, data_digest=digest(outcome["data"])
        )
        return ToolResult.json({"path": loc.display, "replacements": outcome["replacements"], "diff": outcome["diff"]})
