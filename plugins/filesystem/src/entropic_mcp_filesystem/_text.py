"""List results as lines, the forms models know from ripgrep and ls; ``format: "json"`` keeps the list.

JSON cost grep's content 1.8x ripgrep's ``path:line:text`` in tokens, ``files_with_matches``
2.3x and ``list_directory`` 3.5x the reference MCP server's listing. The lines carry the same
entries; a note (a truncation, skipped files) is one bracketed line at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from entropic_mcp import ToolResult, toolkit

from ._base import fit_list, truncation

FORMATS = ("text", "json")


def wants_json(args: Mapping[str, Any]) -> bool:
    """True when the call passed ``format: "json"`` (the default is ``"text"``)."""
    return toolkit.choice(args, "format", FORMATS, default="text") == "json"


def is_note(item: Any) -> bool:
    """A note entry (truncation, skipped files), not a result entry."""
    return isinstance(item, Mapping) and "path" not in item


def note_line(item: Mapping[str, Any]) -> str:
    if item.get("truncated"):
        offset = item.get("next_offset")
        lead = "truncated" if offset is None else f"truncated, next_offset={offset}"
        return f"[{lead}: {item.get('note', '')}]"
    return f"[note: {item.get('note', '')}]"


def grep_lines(items: Sequence[Any], mode: str) -> list[str]:
    """grep's entries as ripgrep prints them: ``path:line:text``, context ``path-line-text``,
    ``--`` between separate groups of one file; ``path`` or ``path:count`` in the other modes."""
    if mode == "files_with_matches":
        return [item if isinstance(item, str) else note_line(item) for item in items]
    if mode == "count":
        return [note_line(item) if is_note(item) else f"{item['path']}:{item['count']}" for item in items]
    entries = [item for item in items if not is_note(item)]
    context = any(item.get("before") or item.get("after") for item in entries)
    # One file's lines by number: a match wins over the same line as another match's context,
    # and context lines shared by neighbouring matches are printed once.
    files: dict[str, dict[int, tuple[bool, str]]] = {}
    for item in entries:
        numbered = files.setdefault(item["path"], {})
        line = item["line"]
        before = item.get("before") or ()
        for i, text in enumerate(before):
            numbered.setdefault(line - len(before) + i, (False, text))
        content = item["content"].split("\n")  # a multiline match spans lines
        for i, text in enumerate(content):
            numbered[line + i] = (True, text)
        for i, text in enumerate(item.get("after") or ()):
            numbered.setdefault(line + len(content) + i, (False, text))
    lines: list[str] = []
    for path, numbered in files.items():
        previous = None
        for number in sorted(numbered):
            matched, text = numbered[number]
            if context and lines and (previous is None or number != previous + 1):
                lines.append("--")
            sep = ":" if matched else "-"
            lines.append(f"{path}{sep}{number}{sep}{text}")
            previous = number
    lines.extend(note_line(item) for item in items if is_note(item))
    return lines


def listing_lines(items: Sequence[Any], *, recursive: bool) -> list[str]:
    """list_directory's entries as ``ls -p`` prints them: directories end in ``/``, symlinks in
    ``@``; names for one directory, root-relative paths when recursive. Sizes stay in the JSON
    form and file_info: after a tab they cost a listing of 40 entries 1.33x ``ls -p``."""
    lines = []
    for item in items:
        if is_note(item):
            lines.append(note_line(item))
            continue
        shown = item["path"] if recursive else item["name"]
        kind = item["type"]
        if kind == "directory":
            lines.append(f"{shown}/")
        elif kind == "symlink":
            lines.append(f"{shown}@")
        else:
            lines.append(shown)
    return lines


def path_lines(items: Sequence[Any]) -> list[str]:
    """glob's paths, one a line."""
    return [item if isinstance(item, str) else note_line(item) for item in items]


def fit_result(
    items: list[Any],
    render: Callable[[list[Any]], list[str]],
    *,
    as_json: bool,
    cap: int,
    note: str,
    empty: str,
    offset: int | None = None,
) -> ToolResult:
    """``items`` as JSON or as lines, cut from the end to fit ``cap`` bytes with a final note.

    ``offset``: where this page started; a cut then says which entry comes next (``next_offset``).
    """
    if as_json:
        return ToolResult.json(fit_list(items, cap, note, offset=offset))
    text = "\n".join(render(items)) if items else empty
    if not cap or len(text.encode()) <= cap:
        return ToolResult(text=text)
    body = items[:-1] if items and isinstance(items[-1], Mapping) and items[-1].get("truncated") else items

    def marker(kept: int) -> dict[str, Any]:
        entry = truncation(f"the result was cut to fit max_result_bytes ({cap} bytes); {note}")
        if offset is not None:
            entry["next_offset"] = offset + sum(1 for item in body[:kept] if not is_note(item))
        return entry

    low, high = 0, len(body)
    while low < high:
        middle = (low + high + 1) // 2
        if len("\n".join(render([*body[:middle], marker(middle)])).encode()) <= cap:
            low = middle
        else:
            high = middle - 1
    return ToolResult(text="\n".join(render([*body[:low], marker(low)])))
