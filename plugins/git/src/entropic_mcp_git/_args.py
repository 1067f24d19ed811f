"""Reading tool arguments: revision-like values and paths confined to the work tree.

Types and bounds (flags, integers, choices, strings) are the core toolkit's readers, so the git
tools follow the one rule every plugin does (``3.0`` is the integer 3; booleans are not numbers).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, overload

from entropic_mcp import ToolError, toolkit
from entropic_mcp.toolkit.paths import (
    PathPolicy,
    ResolvedPath,
    confine,
    is_within,
    printable,
    relative_display,
    shown_entry,
)

#: git has no approval path: a path outside the work tree is simply refused.
POLICY = PathPolicy(allow_outside_root=False, approvable=False)


@overload
def text(args: Mapping[str, Any], name: str, *, required: Literal[True]) -> str: ...
@overload
def text(args: Mapping[str, Any], name: str, *, required: bool = False) -> str | None: ...
def text(args: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    """The toolkit's string (no NUL byte, valid Unicode), and not blank either: a message, path
    or revision of spaces only is a mistake git would answer with a confusing failure."""
    value = toolkit.text(args, name, required=required)
    if value is not None and not value.strip():
        raise ToolError("invalid_args", f"'{name}' must not be blank; pass a non-empty value")
    return value


@overload
def revision(args: Mapping[str, Any], name: str, *, required: Literal[True]) -> str: ...
@overload
def revision(args: Mapping[str, Any], name: str, *, required: bool = False) -> str | None: ...
def revision(args: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    """A revision-like value (revision, target, base, branch name, date) that git must not read as an option.

    A leading ``-`` is refused outright (option injection: ``--output=/tmp/x``, ``--exec=...``,
    ``-f``, ``--orphan``), even when a ref of that name exists on disk; so are control
    characters, which no ref or date contains.
    """
    value = text(args, name, required=required)
    if value is None:
        return None
    if value.lstrip().startswith("-"):
        raise ToolError(
            "invalid_argument",
            f"'{name}' {value!r} starts with '-', which git would read as an option; pass a branch, tag, "
            'commit or date (e.g. "main", "HEAD~1", "2 weeks ago")',
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ToolError("invalid_argument", f"'{name}' {value!r} contains control characters; pass a plain revision")
    return value


_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_WEEKDAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_UNITS = ("second", "minute", "hour", "day", "week", "month", "year")
#: The words git's approxidate reads (date.c); anything else it drops silently, so that
#: ``since="not a date"`` meant "now" and the log came back empty without a word.
_DATE_WORDS = frozenset(
    {
        *_UNITS,
        *(unit + "s" for unit in _UNITS),
        "now", "today", "yesterday", "noon", "midnight", "tea", "never", "ago", "last", "am", "pm", "at",
        "utc", "gmt", "z", "t", "st", "nd", "rd", "th",
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    }
)  # fmt: skip


def _date_word(word: str) -> bool:
    return word in _DATE_WORDS or (len(word) >= 3 and any(name.startswith(word) for name in (*_MONTHS, *_WEEKDAYS)))


def date(args: Mapping[str, Any], name: str) -> str | None:
    """A date git understands (``2024-01-31``, ``2 weeks ago``, ``yesterday``), or None.

    git reads any text as a date, dropping the words it does not know: ``"not a date"`` became
    "now" and the log answered nothing, silently. Every word must be one git reads.
    """
    import re

    value = revision(args, name)
    if value is None:
        return None
    unknown = [word for word in re.findall(r"[a-z]+", value.lower()) if not _date_word(word)]
    if unknown or not re.search(r"[0-9a-z]", value.lower()):
        what = f"git does not read {', '.join(repr(w) for w in unknown)} as part of a date" if unknown else "no date"
        raise ToolError(
            "invalid_args",
            f"'{name}' {value!r} is not a date: {what} (it would drop it silently and mean something else); "
            'pass e.g. "2024-01-31", "2024-01-31 14:00", "2 weeks ago" or "yesterday"',
        )
    return value


def raw_paths(args: Mapping[str, Any], name: str, *, required: bool = False) -> list[str] | None:
    value = args.get(name)
    if value is None:
        if required:
            raise ToolError("invalid_args", f'Missing required argument: {name} (a list of paths, e.g. ["."])')
        return None
    if not isinstance(value, list) or not value:
        raise ToolError(
            "invalid_args", f"'{name}' must be a non-empty list of paths, e.g. [\"src/app.py\"]; got {value!r}"
        )
    return value


def pathspecs(raws: list[Any], *, root: Path, top: Path, tool: str, access: str, name: str = "paths") -> list[str]:
    """Confine each path to the work tree ``top`` and return it relative to ``top`` for after ``--``.

    Relative paths are taken from the project ``root`` (which may sit below ``top``). git acts
    on a symbolic link itself, so a link whose target is inside is named as the link, not its
    target; a link (or a chain) leading outside is refused like any outside path.
    """
    out: list[str] = []
    for raw in raws:
        if not isinstance(raw, str) or not raw:
            raise ToolError("invalid_args", f"'{name}' must list non-empty string paths; got {raw!r}")
        candidate = raw if root == top or os.path.isabs(raw) else os.path.join(root, raw)
        resolved = confine(candidate, root=top, policy=POLICY, tool=tool, access=access, argument=name)  # type: ignore[arg-type]
        lexical = Path(candidate if os.path.isabs(candidate) else os.path.join(top, candidate))
        if "\ufffd" in raw and not os.path.lexists(lexical):
            lexical = _on_disk(lexical, resolved.display, top)
            real = Path(os.path.realpath(lexical))  # confine refuses the surrogates the name holds now
            if not is_within(real, top):
                raise ToolError("outside_root", f"{raw!r} is a link outside the work tree {top}; use a path inside it")
            resolved = ResolvedPath(path=real, inside=True, display=relative_display(real, top))
        if lexical.name in ("", ".", "..") or not os.path.islink(lexical):
            out.append(resolved.display)
            continue
        link = Path(os.path.realpath(lexical.parent)) / lexical.name
        if link == top or not is_within(link, top):
            raise ToolError("outside_root", f"{raw!r} is a link outside the work tree {top}; use a path inside it")
        out.append(link.relative_to(top).as_posix())
    return out


def _on_disk(lexical: Path, display: str, top: Path) -> Path:
    """``lexical`` with each missing component holding U+FFFD replaced by the one entry of its
    directory that shows so (a name git printed for a file not UTF-8 on disk: status, diff and
    log print such bytes as U+FFFD), links kept as links; unchanged when nothing matches."""
    current = Path(lexical.anchor)
    for part in lexical.parts[1:]:
        nxt = current / part
        if "\ufffd" in part and not os.path.lexists(nxt):
            entry = shown_entry(current, part, display=printable(display))
            if entry is None:
                return lexical
            nxt = current / entry
        current = nxt
    return current
