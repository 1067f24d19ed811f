"""Glob patterns as regular expressions: ``*`` ``?`` ``[...]`` ``**`` and ``{a,b}``."""

from __future__ import annotations

import re

import attrs
from entropic_mcp import ToolError

MAX_ALTERNATIVES = 256
SPECIAL = frozenset("*?[{\\")


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c{d,e}}`` -> ``[ab, acd, ace]``; a ``{`` without a top-level ``,`` is literal."""
    depth, start = 0, -1
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            end = _class_end(pattern, i)
            if end > 0:
                i = end + 1
                continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                options = _split_top(pattern[start + 1 : i])
                if len(options) > 1:
                    head, tail = pattern[:start], pattern[i + 1 :]
                    out: list[str] = []
                    for option in options:
                        for rest in expand_braces(option + tail):
                            out.append(head + rest)
                            if len(out) > MAX_ALTERNATIVES:
                                raise ToolError(
                                    "invalid_args",
                                    f"the pattern expands to more than {MAX_ALTERNATIVES} "
                                    "alternatives; use fewer {a,b} groups",
                                )
                    return out
        i += 1
    return [pattern]


def _split_top(body: str) -> list[str]:
    parts, depth, current = [], 0, []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            current.append(body[i : i + 2])
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _class_end(pattern: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start``, or -1 (then ``[`` is literal)."""
    i = start + 1
    if i < len(pattern) and pattern[i] in "!^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "]":
            return i
        if pattern[i] == "/":
            return -1
        i += 1
    return -1


def _segment(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = _class_end(segment, i)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = segment[i + 1 : end]
                negate = body[:1] in ("!", "^")
                if negate:
                    body = body[1:]
                body = body.replace("\\", "\\\\").replace("^", "\\^")
                # '-' ranges keep their meaning; a class never matches '/'.
                out.append(f"[^/{body}]" if negate else f"(?:(?!/)[{body}])")
                i = end
        elif ch == "\\" and i + 1 < len(segment):
            i += 1
            out.append(re.escape(segment[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _translate_one(pattern: str) -> str:
    segments = pattern.split("/")
    out = []
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if segment == "**":
            out.append(".+" if index == last else "(?:[^/]+/)*")
        else:
            out.append(_segment(segment) + ("/" if index < last else ""))
    return "".join(out)


@attrs.frozen(kw_only=True)
class GlobPattern:
    """A compiled glob: ``match(path)`` on paths relative to the search directory."""

    source: str
    regex: re.Pattern[str]
    #: Matches the file name alone when every alternative is ``**/<name pattern>``.
    name_regex: re.Pattern[str] | None
    #: When every alternative is ``**/*<literal>``: the literal suffixes (``str.endswith`` is enough).
    name_suffixes: tuple[str, ...] | None
    #: Literal leading directories: the walk starts there.
    prefix: str
    #: Deepest directory level a match can be at (None: unbounded, the pattern has ``**``).
    max_depth: int | None

    def match(self, path: str) -> bool:
        return self.regex.match(path) is not None


def _literal(segment: str) -> bool:
    return not any(ch in SPECIAL for ch in segment)


def compile_glob(pattern: str, *, argument: str = "pattern") -> GlobPattern:
    """Compile ``pattern``; absolute patterns and ``..`` segments are refused with ``invalid_args``."""
    source = pattern
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        raise ToolError("invalid_args", f"'{argument}' is empty; pass a glob such as \"**/*.py\"")
    if pattern.startswith("/"):
        raise ToolError(
            "invalid_args",
            f"'{argument}' must be relative (it is matched below 'path'); "
            "to search another directory pass it as 'path'",
        )
    alternatives = expand_braces(pattern)
    for alternative in alternatives:
        if ".." in alternative.split("/"):
            raise ToolError(
                "invalid_args", f"'{argument}' must not contain '..' segments; pass the directory as 'path'"
            )
    try:
        regex = re.compile("(?:" + "|".join(f"(?:{_translate_one(a)})" for a in alternatives) + r")\Z")
    except re.error as exc:
        raise ToolError("invalid_args", f"'{argument}' is not a valid glob ({exc}); check its [...] classes") from None
    name_regex = None
    if all(a.startswith("**/") and "/" not in a[3:] and a[3:] != "**" for a in alternatives):
        name_regex = re.compile("(?:" + "|".join(f"(?:{_segment(a[3:])})" for a in alternatives) + r")\Z")
    suffixes: tuple[str, ...] | None = None
    if name_regex is not None and all(a[3:4] == "*" and a[4:] and _literal(a[4:]) for a in alternatives):
        suffixes = tuple(a[4:] for a in alternatives)
    prefix_parts: list[str] = []
    segments = pattern.split("/")
    for segment in segments[:-1]:
        if not _literal(segment) or segment in ("", "."):
            break
        prefix_parts.append(segment)
    if "{" in "/".join(prefix_parts):
        prefix_parts = []
    depth: int | None = None
    if not any("**" in a for a in alternatives):
        depth = max(len(a.split("/")) for a in alternatives)
    return GlobPattern(
        source=source,
        regex=regex,
        name_regex=name_regex,
        name_suffixes=suffixes,
        prefix="/".join(prefix_parts),
        max_depth=depth,
    )
