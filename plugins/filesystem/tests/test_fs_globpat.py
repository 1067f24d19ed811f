"""The glob matcher: RE2, linear in the text whatever the pattern, with the semantics it had on Python's re."""

from __future__ import annotations

import re
import warnings

import pytest
from entropic_mcp import ToolError
from entropic_mcp_filesystem._globpat import MAX_PATTERN_CHARS, _class_end, compile_glob, expand_braces
from hypothesis import given, settings
from hypothesis import strategies as st


# The translation to Python's backtracking re that the matcher replaced, kept as the oracle
# (where a class ends did not change: _class_end is shared).
def _legacy_segment(segment: str) -> str:
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
                out.append(f"[^/{body}]" if negate else f"(?:(?!/)[{body}])")
                i = end
        elif ch == "\\" and i + 1 < len(segment):
            i += 1
            out.append(re.escape(segment[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _legacy_one(pattern: str) -> str:
    segments = pattern.split("/")
    out = []
    for index, segment in enumerate(segments):
        if segment == "**":
            out.append(".+" if index == len(segments) - 1 else "(?:[^/]+/)*")
        else:
            out.append(_legacy_segment(segment) + ("/" if index < len(segments) - 1 else ""))
    return "".join(out)


def legacy(pattern: str) -> re.Pattern[str]:
    while pattern.startswith("./"):
        pattern = pattern[2:]
    alternatives = expand_braces(pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "possible nested set" and the like: no change of meaning
        return re.compile("(?:" + "|".join(f"(?:{_legacy_one(a)})" for a in alternatives) + r")\Z")


def _legacy_bug(pattern: str) -> bool:
    """Negated classes the old translation got wrong: ``[!]x]`` and ``[!-x]`` (see test below)."""
    return bool(re.search(r"\[[!^][\]\-]", pattern))


PATTERN_CHARS = st.sampled_from([*"ab-/*?[]!^{},\\.", "**/", "[a-b]", "[!a]", "{a,b}"])
PATH_CHARS = st.sampled_from([*"ab-/]!^{},.*?[\\", "é"])


@settings(max_examples=600, deadline=None)
@given(st.lists(PATTERN_CHARS, min_size=1, max_size=10).map("".join), st.lists(PATH_CHARS, max_size=10).map("".join))
def test_the_matcher_agrees_with_the_old_backtracking_translation(pattern, path):
    if _legacy_bug(pattern) or path.startswith("/") or "//" in path:
        return
    try:
        compiled = compile_glob(pattern)
    except ToolError as exc:
        # Refused before matching, as before: absolute, empty, '..', or a range the old re refused too.
        assert exc.code == "invalid_args"
        if "character range" in exc.message:
            with pytest.raises(re.error):
                legacy(pattern)
        else:
            words = ("must be relative", "is empty", "'..' segments", "never closes it")
            assert any(w in exc.message for w in words), exc.message
        return
    assert compiled.match(path) is (legacy(pattern).match(path) is not None), (pattern, path)
    if compiled.name_matcher is not None and "/" not in path and path:
        assert compiled.name_matcher.match(path) is compiled.match(path), (pattern, path)


@pytest.mark.parametrize(
    ("pattern", "name"),
    [
        ("*a*a*a*a*a*a*b", "a" * 100),
        ("**/*a*a*a*a*a*a*a*a*a*a*b", "x/" + "a" * 250),
        ("*" + "?*" * 100 + "b", "a" * 250),
        ("{" + ",".join("*a" * (i + 2) + "*b" for i in range(20)) + "}", "a" * 250),
        ("**/" * 40 + "*a*b", "a/" * 100 + "a" * 100),
    ],
)
def test_patterns_that_backtrack_exponentially_answer_at_once(pattern, name):
    # On Python's re each of these ran for minutes (the first one froze the whole server).
    compiled = compile_glob(pattern)
    for _ in range(1000):
        assert compiled.match(name) is False
    if compiled.name_matcher is not None:
        assert compiled.name_matcher.match(name.rpartition("/")[2]) is False


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("[!]]x", "ax", True),  # ']' first in a negated class is literal (it closed the class before)
        ("[!]]x", "]x", False),
        ("[!-z]", "a", True),  # '-' first is literal, not the start of a range from '/'
        ("[!-z]", "-", False),
        ("[!-z]", "0", True),
        ("[--0]", "/", False),  # a range spanning '/' never matches it
        ("[--0]", ".", True),
        ("*", "line\nbreak", True),
        ("**", "a/line\nbreak", True),
        ("?", "\udcff", True),  # a name with an undecodable byte: still one character
        ("a?c", "a\udce9c", True),
        ("é?", "éé", True),
        ("[à-ÿ]", "é", True),
    ],
)
def test_classes_and_odd_names(pattern, path, expected):
    assert compile_glob(pattern).match(path) is expected


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("[z-a]", ("range", "[a-z]")),
        ("a\x00b", ("NUL",)),
        ("x" * (MAX_PATTERN_CHARS + 1), ("characters long", "shorter")),
        ("{a}" * 70, ("fewer",)),
        ("{a,b}" * 8 + "*a" * 1000, ("256 alternatives", "fewer")),
    ],
)
def test_patterns_that_cannot_be_matched_get_a_clear_error(pattern, words):
    with pytest.raises(ToolError) as raised:
        compile_glob(pattern, argument="glob")
    assert raised.value.code == "invalid_args"
    assert "'glob'" in raised.value.message and all(w in raised.value.message for w in words), raised.value.message


def test_an_unclosed_class_is_refused_with_how_to_write_a_literal_bracket():
    # It used to be a literal '[' (as in fnmatch), which silently matched nothing the model meant.
    for pattern in ("[abc", "src/[ab/x.py", "**/*[.py"):
        with pytest.raises(ToolError) as raised:
            compile_glob(pattern, argument="pattern")
        assert raised.value.code == "invalid_args"
        assert "never closes it" in raised.value.message and "\\[" in raised.value.message
    assert compile_glob("\\[abc").match("[abc") is True
    assert compile_glob("[[]abc").match("[abc") is True


NAME_CHARS = st.sampled_from([*"ab-]!.{},", "é", "\udcff", "\n"])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(PATTERN_CHARS, min_size=1, max_size=8).map("".join),
    st.lists(st.lists(NAME_CHARS, max_size=6).map("".join), max_size=12),
)
def test_selecting_from_many_texts_at_once_agrees_with_matching_each(pattern, texts):
    try:
        compiled = compile_glob(pattern)
    except ToolError:
        return
    for matcher in filter(None, (compiled.matcher, compiled.name_matcher)):
        assert matcher.select(texts) == [i for i, t in enumerate(texts) if matcher.match(t)], (pattern, texts)


def test_a_pattern_matching_the_empty_text_selects_only_texts_it_matches():
    # {,b} matches "" and "b": the gap between two texts that do not match is not a match.
    matcher = compile_glob("{,b}").matcher
    assert matcher.select(["a", "c", "b", "", "d"]) == [2, 3]
    assert matcher.select([]) == []
