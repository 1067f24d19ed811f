"""Issue 21: line continuations are removed exactly where bash removes them (``_continuations``)."""

from __future__ import annotations

import subprocess

import pytest
from entropic_mcp_bash._continuations import join
from entropic_mcp_bash._parse import Flag, parse
from hypothesis import assume, given, settings
from hypothesis import strategies as st

N = "\\\n"


def _bash(script: str) -> tuple[str, int]:
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
    )
    return done.stdout, done.returncode


@pytest.mark.parametrize(
    ("text", "joined"),
    [
        (f"r{N}m x", "rm x"),
        (f'echo "${N}(id)"', 'echo "$(id)"'),
        (f"echo 'a{N}b'", f"echo 'a{N}b'"),
        (f"echo $'a{N}b'", f"echo $'a{N}b'"),
        (f"echo a # c {N}echo b", f"echo a # c {N}echo b"),
        (f"cat <<EOF\na{N}b\nEOF", "cat <<EOF\nab\nEOF"),
        (f"cat <<'EOF'\na{N}b\nEOF\nr{N}m", f"cat <<'EOF'\na{N}b\nEOF\nrm"),
        (f"cat <<E{N}OF\nx\nEOF", "cat <<EOF\nx\nEOF"),
        (f"echo `echo 'a{N}b'`", "echo `echo 'ab'`"),
        (f"echo \"$(echo 'a{N}b')\"", f"echo \"$(echo 'a{N}b')\""),
        (f"echo ${{x:-'a{N}b'}}", f"echo ${{x:-'a{N}b'}}"),
        (f"echo \"${{x:-'a{N}b'}}\"", "echo \"${x:-'ab'}\""),
        (f"echo $((1<{N}<2))\nr{N}m", "echo $((1<<2))\nrm"),
        (f"echo a\\\\{N[1]}b", "echo a\\\\\nb"),
    ],
)
def test_join_removes_pairs_where_bash_does(text: str, joined: str) -> None:
    assert join(text).text == joined
    assert _bash(f"set -- x; {text}") == _bash(f"set -- x; {joined}")


_PIECES = ["a", "b", " ", "'", '"', N, "\\", "$", "(", ")", "#", "\n", "`", "{", "}", ";", "<<", "E", "-"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
def test_the_joined_text_does_what_the_original_does_in_bash(body: str) -> None:
    # ``printf`` shows every word bash split; commands named a/b/E do not exist (exit 127).
    text = f"printf '[%s]' {body}"
    joined = join(text)
    assume("$$" not in joined.text)  # the shell's own pid differs between the two runs
    assume(not joined.ambiguous_end)  # flagged: the parser refuses to vouch for it (test below)
    assert _bash(joined.text) == _bash(text)


@pytest.mark.parametrize("pairs", [1, 2, 3, 4])
def test_a_lone_backslash_at_the_end_after_continuations_is_not_understood(pairs: int) -> None:
    # bash 5.2 keeps that backslash after one or three pairs and drops it after two, so a rule
    # judging ``cat .env\\`` could be shown a different file than the one ``cat`` opens.
    text = "cat .env" + N * pairs + "\\"
    assert join(text).ambiguous_end
    reasons = [item.reason for item in parse(text).items if isinstance(item, Flag)]
    assert any("backslash at the very end" in reason for reason in reasons)
    assert not join("cat .env\\").ambiguous_end  # no pair removed: bash keeps it, always
    assert not join(f"cat a{N}b\\\\").ambiguous_end  # an escaped backslash is a character


def test_a_kept_pair_the_grammar_does_not_confirm_is_not_understood() -> None:
    # The word ``case`` keeps the reader in code at the ``)`` (a pattern may end there), so the
    # quote after it looks like a single-quoted string that keeps the pair; bash (and
    # tree-sitter) are back in the double-quoted string, where the pair is removed.
    text = f"echo \"$(echo case) ' {N} '\""
    assert N in join(text).text
    reasons = [item.reason for item in parse(text).items if isinstance(item, Flag)]
    assert "line continuation whose quoting the analysis could not confirm" in reasons


@pytest.mark.parametrize("prefix", ["", "echo é€😀; "])
def test_kept_pairs_are_placed_by_byte_offset_after_any_characters(prefix: str) -> None:
    confirmed = parse(f"{prefix}echo 'a{N}b' # c {N}")
    assert not [i for i in confirmed.items if isinstance(i, Flag)]
    unconfirmed = parse(f"{prefix}echo \"$(echo case) ' {N} '\"")
    assert [i for i in unconfirmed.items if isinstance(i, Flag)]


@pytest.mark.parametrize("text", [f"<<\\\\{N}\\", "# c \\", "cat <<'E'\nx\\", f"'{N}"])
def test_a_trailing_backslash_with_no_newline_is_not_a_kept_pair(text: str) -> None:
    joined = join(text)
    assert all(joined.text[k : k + 2] == N for k in joined.kept)
