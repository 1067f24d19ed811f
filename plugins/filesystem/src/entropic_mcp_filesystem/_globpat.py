"""Glob patterns matched in linear time: ``*`` ``?`` ``[...]`` ``**`` and ``{a,b}``.

A glob is translated to an RE2 expression (no lookaround, no backreferences), so matching a
name costs time proportional to its length whatever the pattern: ``*a*a*a*a*a*a*b`` against a
100-character name, which Python's backtracking ``re`` took minutes over while holding the
interpreter, answers at once. The text before translation is bounded too (length and brace
groups), so nothing a model sends makes compiling slow.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from entropic_mcp import ToolError

MAX_ALTERNATIVES = 256
#: Longest pattern accepted (a path is at most 4096 bytes on Linux).
MAX_PATTERN_CHARS = 4096
#: Most ``{`` in one pattern: each group with a comma at least doubles the alternatives.
MAX_BRACES = 64
#: Most characters the alternatives of one pattern add up to (translating and compiling cost this).
MAX_EXPANDED_CHARS = 65_536
SPECIAL = frozenset("*?[{\\")
#: One character of a name: never the separator, nor the NUL that ``Matcher.select`` puts between texts.
ANY = "[^/\\x00]"
REPLACEMENT = "\ufffd"


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
    """Index of the ``]`` closing the class opened at ``start``, or -1 (unclosed)."""
    i = start + 1
    if i < len(pattern) and pattern[i] in "!^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    # str.find, not a loop over characters: a pattern of many '[' stays cheap to parse.
    close = pattern.find("]", i)
    slash = pattern.find("/", i, close if close >= 0 else len(pattern))
    return -1 if close < 0 or slash >= 0 else close


def _char(ch: str) -> str:
    """``ch`` as an RE2 literal (inside or outside a class)."""
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        code = 0xFFFD  # a lone surrogate (an undecodable byte of a name): see Matcher
    return f"\\x{{{code:X}}}"


def _class(body: str, negate: bool, argument: str) -> str:
    """The RE2 class for the glob class ``[body]``: ``a-z`` ranges, everything else literal, never ``/``.

    A range may span ``/`` (``[!-0]``): it is split around it rather than checked with a
    lookahead, which RE2 does not have.
    """
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            lo, hi = ord(body[i]), ord(body[i + 2])
            if lo > hi:
                raise ToolError(
                    "invalid_args",
                    f"'{argument}' has the character range [{body[i : i + 3]}], whose ends are in the wrong "
                    f"order; write it as [{body[i + 2]}-{body[i]}]",
                )
            ranges.append((lo, hi))
            i += 3
        else:
            ranges.append((ord(body[i]), ord(body[i])))
            i += 1
    slash = ord("/")
    items = []
    for lo, hi in ranges:
        for a, b in ((lo, min(hi, slash - 1)), (max(lo, slash + 1), hi)):
            if a <= b:
                items.append(_char(chr(a)) if a == b else f"{_char(chr(a))}-{_char(chr(b))}")
    if negate:
        return "[^/\\x00" + "".join(items) + "]"
    return "[" + "".join(items) + "]" if items else "[^\\x00-\\x{10FFFF}]"


def _segment(segment: str, argument: str) -> str:
    out, i = [], 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1
            out.append(ANY + "*")
        elif ch == "?":
            out.append(ANY)
        elif ch == "[":
            end = _class_end(segment, i)
            if end < 0:
                # fnmatch reads it as a literal '[', which silently matches nothing the model meant.
                raise ToolError(
                    "invalid_args",
                    f"'{argument}' opens a character class with '[' in {segment!r} but never closes it with "
                    "']' (a class cannot span '/'); close it, e.g. [abc], or write a literal bracket as \\[ or [[]",
                )
            else:
                body = segment[i + 1 : end]
                negate = body[:1] in ("!", "^")
                out.append(_class(body[1:] if negate else body, negate, argument))
                i = end
        elif ch == "\\" and i + 1 < len(segment):
            i += 1
            out.append(_char(segment[i]))
        else:
            out.append(_char(ch))
        i += 1
    return "".join(out)


def _translate_one(pattern: str, argument: str) -> str:
    segments = pattern.split("/")
    out = []
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if segment == "**":
            out.append("[^\\x00]+" if index == last else f"(?:{ANY}+/)*")
        else:
            out.append(_segment(segment, argument) + ("/" if index < last else ""))
    return "".join(out)


class Matcher:
    """A compiled RE2 expression that must match a whole text.

    ``match(text) -> bool`` tests one text; ``select(texts) -> list[int]`` the indices of the
    matching ones, in one RE2 scan over them all (a walk's directory at a time: no Python work
    per text that does not match). Names that are not valid UTF-8 reach Python with lone
    surrogates (one per undecodable byte); they are matched with U+FFFD in their place, so
    ``?`` still matches one such byte.
    """

    __slots__ = ("key", "match", "select")

    def __init__(self, expression: str, argument: str) -> None:
        #: What the pattern means: equal keys match the same texts (a cache key).
        self.key = expression
        self.match = _whole(_compile(expression, argument))
        self.select = _selector(_compile(f"\\x00(?:{expression})\\x00", argument))


def _compile(expression: str, argument: str) -> Callable[[int, bytes, int, int], tuple[int, int]]:
    """``find(anchor, data, pos, end)`` of the expression: the first match's span, (-1, -1) for none."""
    import re2

    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    try:
        compiled = re2.compile(expression, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ToolError(
            "invalid_args",
            f"'{argument}' is too large or complex to match ({reason}); use a shorter pattern "
            "or fewer {a,b} alternatives",
        ) from None
    raw = getattr(compiled, "_regexp", None)
    anchors = getattr(getattr(getattr(re2, "_re2", None), "RE2", None), "Anchor", None)
    if raw is not None and hasattr(raw, "Match") and anchors is not None:
        # RE2's Match directly, without building match objects: it runs once per name of a walk.
        match, modes = raw.Match, (anchors.UNANCHORED, anchors.ANCHOR_BOTH)

        def find(anchor: int, data: bytes, pos: int, end: int) -> tuple[int, int]:
            return match(modes[anchor], data, pos, end)[0]  # type: ignore[no-any-return]

        return find
    modes_slow = (compiled.search, compiled.fullmatch)

    def find_slow(anchor: int, data: bytes, pos: int, end: int) -> tuple[int, int]:
        found = modes_slow[anchor](data, pos, end)
        return (-1, -1) if found is None else found.span()  # type: ignore[no-any-return]

    return find_slow


_UNANCHORED, _BOTH = 0, 1


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _replace_surrogates(text).encode()


def _whole(find: Callable[[int, bytes, int, int], tuple[int, int]]) -> Callable[[str], bool]:
    def match(text: str) -> bool:
        data = _utf8(text)
        return find(_BOTH, data, 0, len(data))[0] >= 0

    return match


def _selector(find: Callable[[int, bytes, int, int], tuple[int, int]]) -> Callable[[list[str]], list[int]]:
    def select(texts: list[str]) -> list[int]:
        # Each text between two NULs of its own: "\0t0\0\0t1\0...". A match never spans a NUL, so
        # each match is one text, found by counting the NULs before it.
        if not texts:
            return []
        data = _utf8("\x00" + "\x00\x00".join(texts) + "\x00")
        found: list[int] = []
        pos = nuls = 0
        end = len(data)
        count = data.count
        while True:
            start, stop = find(_UNANCHORED, data, pos, end)
            if start < 0:
                return found
            nuls += count(b"\x00", pos, start)
            if nuls % 2:
                # It began at the closing NUL of a text that did not match (an empty match between
                # two texts, for a pattern like {,x}): not a text; look again one byte on.
                pos, nuls = start + 1, nuls + 1
                continue
            found.append(nuls // 2)
            pos, nuls = stop, nuls + 2

    return select


def _replace_surrogates(text: str) -> str:
    return "".join(REPLACEMENT if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


@attrs.frozen(kw_only=True)
class GlobPattern:
    """A compiled glob: ``match(path)`` on paths relative to the search directory."""

    source: str
    matcher: Matcher
    #: Matches the file name alone when every alternative is ``**/<name pattern>``.
    name_matcher: Matcher | None
    #: When every alternative is ``**/*<literal>``: the literal suffixes (``str.endswith`` is enough).
    name_suffixes: tuple[str, ...] | None
    #: Literal leading directories: the walk starts there.
    prefix: str
    #: Deepest directory level a match can be at (None: unbounded, the pattern has ``**``).
    max_depth: int | None

    def match(self, path: str) -> bool:
        return self.matcher.match(path)


def _literal(segment: str) -> bool:
    return not any(ch in SPECIAL for ch in segment)


def compile_glob(pattern: str, *, argument: str = "pattern") -> GlobPattern:
    """Compile ``pattern``; absolute patterns and ``..`` segments are refused with ``invalid_args``."""
    source = pattern
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        raise ToolError("invalid_args", f"'{argument}' is empty; pass a glob such as \"**/*.py\"")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(
            "invalid_args",
            f"'{argument}' is {len(pattern)} characters long, more than {MAX_PATTERN_CHARS}; pass a shorter glob "
            "(several calls, or a sub-directory as 'path')",
        )
    if pattern.count("{") > MAX_BRACES:
        raise ToolError(
            "invalid_args",
            f"'{argument}' has more than {MAX_BRACES} '{{'; use fewer {{a,b}} groups (or escape as \\{{)",
        )
    if "\x00" in pattern:
        raise ToolError("invalid_args", f"'{argument}' contains a NUL character, which no path has; remove it")
    if pattern.startswith("/"):
        raise ToolError(
            "invalid_args",
            f"'{argument}' must be relative (it is matched below 'path'); "
            "to search another directory pass it as 'path'",
        )
    alternatives = expand_braces(pattern)
    expanded = sum(map(len, alternatives))
    if expanded > MAX_EXPANDED_CHARS:
        raise ToolError(
            "invalid_args",
            f"'{argument}' expands to {len(alternatives)} alternatives of {expanded} characters in all, more "
            f"than {MAX_EXPANDED_CHARS}; use fewer {{a,b}} groups or shorter alternatives",
        )
    for alternative in alternatives:
        if ".." in alternative.split("/"):
            raise ToolError(
                "invalid_args", f"'{argument}' must not contain '..' segments; pass the directory as 'path'"
            )
    matcher = Matcher("|".join(f"(?:{_translate_one(a, argument)})" for a in alternatives), argument)
    name_matcher = None
    if all(a.startswith("**/") and "/" not in a[3:] and a[3:] != "**" for a in alternatives):
        name_matcher = Matcher("|".join(f"(?:{_segment(a[3:], argument)})" for a in alternatives), argument)
    suffixes: tuple[str, ...] | None = None
    if name_matcher is not None and all(a[3:4] == "*" and a[4:] and _literal(a[4:]) for a in alternatives):
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
        matcher=matcher,
        name_matcher=name_matcher,
        name_suffixes=suffixes,
        prefix="/".join(prefix_parts),
        max_depth=depth,
    )
