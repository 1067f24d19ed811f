"""The tree-sitter front end and the analysis built on it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from entropic_mcp_bash._analyse import Invocation, Unclear, Write, analyse
from entropic_mcp_bash._parse import Command, parse
from hypothesis import given, settings
from hypothesis import strategies as st

SHELL_ALPHABET = st.sampled_from(
    [
        *list("abc rm ls;|&()<>{}$`'\"\\\n*?[]=-/~#!0123456789@:+%^,"),
        *["&&", "||", "$(", "<(", "eval ", "bash -c ", "$((", "$[", "${", "${!", "@P", "[[ ", " ]]", " -eq "],
        *["<<EOF\n", "\nEOF\n", "<<'E'\n", "~+/", "~-", "cd ", "export ", "declare -", "trap -- ", "env ", "xargs "],
        *[
            "sudo ",
            "flock f ",
            "su -c ",
            "script -qc ",
            "watch ",
            "find . -exec ",
            " \\;",
            "/dev/fd/",
            "PATH=",
            "BASH_ENV=",
        ],
        *["a[", "]=", "(( ", " ))", "let ", "read ", "printf -v ", "mapfile -C ", "sed ", "git -c ", "coproc "],
    ]
)


def commands(text: str) -> list[str]:
    return [" ".join(w.shown for w in item.words) for item in parse(text).items if isinstance(item, Command)]


def lines(text: str, cwd: Path = Path("/tmp")) -> list[str]:
    return [f.line for f in analyse(text, cwd) if isinstance(f, Invocation)]


def test_quotes_and_escapes_are_removed_from_literal_words() -> None:
    assert commands("'rm' \"-rf\" r\\m") == ["rm -rf rm"]


def test_words_with_expansions_are_not_literal() -> None:
    words = parse("echo $HOME ${x} $(date) *.py").items[0].words  # type: ignore[union-attr]
    assert [w.value for w in words] == ["echo", None, None, None, None]


def test_every_simple_command_is_found_in_order() -> None:
    assert commands("a && b || c; d | e |& f & g\nh") == list("abcdefgh")


def test_wrappers_are_stripped() -> None:
    assert lines("timeout -k 1 5 nice -n 3 nohup env -u X A=1 stdbuf -oL command rm x") == ["rm x"]
    assert lines("command -v rm") == ["command -v rm"]
    assert lines("env") == ["env"]


def test_nested_scripts_are_opened() -> None:
    assert lines("eval 'a; b'") == ["a", "b"]
    assert lines("bash -c 'sh -c \"eval c\"'") == ["c"]


def test_nesting_beyond_the_limit_is_unclear() -> None:
    assert lines("eval " * 5 + "x") == ["x"]
    assert any(isinstance(f, Unclear) for f in analyse("eval " * 12 + "x", Path("/tmp")))


def test_redirect_targets_resolve_against_the_directory_cd_reaches(tmp_path: Path) -> None:
    writes = [
        f.path
        for f in analyse("echo a > one; cd sub && echo b > two; cd /etc; echo c >> passwd 2>/dev/null", tmp_path)
        if isinstance(f, Write)
    ]
    # cd may fail, or run in a subshell or a branch: every directory it may be in is checked.
    assert writes[0] == tmp_path / "one"
    assert tmp_path / "sub" / "two" in writes
    assert Path("/etc/passwd") in writes
    assert tmp_path / "passwd" in writes


def test_descriptor_duplication_is_not_a_write() -> None:
    assert not [f for f in analyse("ls 2>&1 >&2 1>&-", Path("/tmp")) if isinstance(f, Write)]


def test_time_output_file_is_a_write() -> None:
    assert [f.path for f in analyse("time -o /etc/x ls", Path("/tmp")) if isinstance(f, Write)] == [Path("/etc/x")]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_never_raises_on_arbitrary_text(text: str) -> None:
    parse(text)
    analyse(text, Path("/tmp"))


@settings(max_examples=300, deadline=None)
@given(st.lists(SHELL_ALPHABET, max_size=40).map("".join))
def test_analysis_never_raises_on_shell_like_text(text: str) -> None:
    for finding in analyse(text, Path("/tmp")):
        assert isinstance(finding, (Invocation, Write, Unclear))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["ls", "echo hi", "true", "cat f"]),
    st.sampled_from(["&&", "||", ";", "|", "&", "\n"]),
    st.sampled_from(["", "FOO=1 ", "timeout 3 ", "nice ", "/bin/", "env A=b "]),
)
def test_a_chained_rm_is_always_found(first: str, joiner: str, prefix: str) -> None:
    assert "rm -rf x" in lines(f"{first} {joiner} {prefix}rm -rf x")


CRASHERS = [
    "{\U00031860",
    "%J#OEx{\U00108a41Qy\nV<3\nj$rc_hY\n",
    "Ûý\U00108a41{\U000ca15ar6ñî",
    "{ \U0001f600; }",
    "echo {a,\U0001f8c1}",
]


def test_inputs_that_crash_tree_sitter_bash_are_parsed_safely() -> None:
    # tree-sitter-bash#337: a 4-byte UTF-8 character after "{" can SIGSEGV the process, and
    # only some of the time; a child process repeats each input so a crash fails this test.
    code = f"import sys; from entropic_mcp_bash._parse import parse\nfor text in {CRASHERS!r} * 200:\n    parse(text)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-500:]


def test_four_byte_characters_keep_their_text() -> None:
    assert commands("echo \U0001f600 '{\U0001f600}'") == ["echo \U0001f600 {\U0001f600}"]


@pytest.mark.parametrize(
    "text",
    [
        "strace " * 3000 + "rm x",
        "sudo " * 3000 + "rm x",
        "uv run " * 2000 + "rm x",
        "npx " * 3000 + "rm x",
        "find . -exec " * 1000 + "rm x",
        "flock f " * 2000 + "rm x",
        "watch -x " * 2000 + "rm x",
        "xargs " * 3000 + "rm",
        "eval " * 3000 + "x",
        "nice " * 20000 + "rm x",
        "bash -c '" + "eval " * 200 + "x'",
        "(" * 3000 + "ls" + ")" * 3000,
        "$(" * 2000 + "ls" + ")" * 2000,
    ],
)
def test_deeply_nested_or_huge_commands_are_refused_not_crashed(text: str) -> None:
    # A hostile text must neither exhaust the recursion limit nor be understood.
    findings = analyse(text, Path("/tmp"))
    assert any(isinstance(f, Unclear) or (isinstance(f, Invocation) and not f.understood) for f in findings)
