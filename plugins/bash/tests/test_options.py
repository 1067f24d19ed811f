"""Issue 21: the option tables (``_options``) — every option that writes or runs, per program."""

from __future__ import annotations

import pytest
from entropic_mcp_bash._options import (
    GIT_TABLES,
    TABLES,
    OptionTable,
    awk_problem,
    effects,
    git_subcommand,
    sed_in_place,
)

ALL = {**TABLES, **{f"git {name}": table for name, table in GIT_TABLES.items()}}
ENTRIES = [
    (program, kind, option)
    for program, table in ALL.items()
    for kind in ("writes", "runs")
    for option in sorted(getattr(table, kind))
]


def _forms(option: str) -> list[list[str]]:
    """The spellings getopt and git accept: separate value, ``=value`` / attached value."""
    if option.startswith("--"):
        return [[f"{option}=target"], [option, "target"]]
    return [[f"{option}target"], [option, "target"]]


@pytest.mark.parametrize(("program", "kind", "option"), ENTRIES, ids=[f"{p} {o}" for p, _, o in ENTRIES])
def test_every_write_and_run_option_is_reported_in_every_spelling(program: str, kind: str, option: str) -> None:
    table = ALL[program]
    for form in _forms(option):
        found = effects(table, ["operand", *form])
        expected = "write" if kind == "writes" else "run"
        assert any(e.kind == expected and e.option == option for e in found), (program, form, found)
        if kind == "writes":
            assert [e.value for e in found if e.kind == "write"] == ["target"]


def test_the_tables_name_the_options_issue_21_found() -> None:
    assert "--output" in GIT_TABLES["log"].writes
    assert {"-O", "--open-files-in-pager"} <= GIT_TABLES["grep"].runs
    assert {"-o", "--output"} <= TABLES["sort"].writes
    assert {"--eval", "-f", "-C"} <= TABLES["make"].runs
    assert {"--ext-diff", "--textconv"} <= GIT_TABLES["diff"].runs


@pytest.mark.parametrize("program", sorted(p for p, t in ALL.items() if t.closed))
def test_an_option_a_closed_table_does_not_know_is_unknown(program: str) -> None:
    found = effects(ALL[program], ["--no-such-option-anywhere"])
    assert [e.kind for e in found] == ["unknown"]
    assert [e.kind for e in effects(ALL[program], [None])] == ["unknown"]


@pytest.mark.parametrize("program", sorted(p for p, t in ALL.items() if t.closed))
def test_a_closed_table_accepts_its_own_harmless_options(program: str) -> None:
    table = ALL[program]
    for option in sorted(table.flags):
        assert effects(table, [option]) == [], option
    for option in sorted(table.valued):
        assert effects(table, [option, "value"]) == [], option


def test_an_abbreviated_long_option_is_the_dangerous_option_it_starts() -> None:
    assert [e.option for e in effects(TABLES["sort"], ["--out=x"])] == ["--output"]
    assert [e.kind for e in effects(TABLES["make"], ["--ev=x"])] == ["run"]
    assert [e.option for e in effects(GIT_TABLES["grep"], ["--open-files=x"])] == ["--open-files-in-pager"]


def test_a_short_cluster_finds_the_valued_option_inside_it() -> None:
    assert [(e.kind, e.value) for e in effects(TABLES["sort"], ["-ro", "victim"])] == [("write", "victim")]
    assert [(e.kind, e.value) for e in effects(TABLES["sort"], ["-rovictim"])] == [("write", "victim")]
    assert effects(TABLES["sort"], ["-k", "-o"]) == []  # -o is the key's value, not an option


def test_options_after_the_operands_still_count_and_after_double_dash_do_not() -> None:
    assert [e.kind for e in effects(TABLES["sort"], ["s.sh", "-o", "x"])] == ["write"]
    assert effects(TABLES["sort"], ["--", "-o", "x"]) == []


def test_tee_writes_every_operand_and_make_variable_overrides_run() -> None:
    assert [e.value for e in effects(TABLES["tee"], ["-a", "a", "--", "-b"])] == ["a", "-b"]
    assert [e.kind for e in effects(TABLES["make"], ["test", "CC=rm"])] == ["run"]


def test_a_count_is_an_option_of_git_log() -> None:
    assert effects(GIT_TABLES["log"], ["-5", "--oneline"]) == []
    assert [e.kind for e in effects(OptionTable(closed=True), ["-5"])] == ["unknown"]


@pytest.mark.parametrize(
    ("values", "index"),
    [(["log"], 0), (["-C", "x", "log"], 2), (["-c", "a=b", "--no-pager", "diff"], 3), (["--version"], None)],
)
def test_git_subcommand_skips_global_options(values: list[str], index: int | None) -> None:
    assert git_subcommand(values) == index


@pytest.mark.parametrize(
    ("values", "files"),
    [
        (["s/a/b/", "f"], None),
        (["-i", "s/a/b/", "f", "g"], ["f", "g"]),
        (["-i.bak", "s/a/b/", "f"], ["f"]),
        (["-ni", "p", "f"], ["f"]),
        (["-e", "s/a/b/", "-i", "f"], ["f"]),
        (["--in-place=.o", "-e", "p", "f"], ["f"]),
        (["--in-pl", "p", "f"], ["f"]),
        (["s/a/b/", "-i", "f"], ["f"]),
        (["-n", "-l", "5", "p", "f"], None),
    ],
)
def test_sed_in_place_names_the_files_it_rewrites(values: list[str], files: list[str] | None) -> None:
    assert sed_in_place(values) == files


@pytest.mark.parametrize(
    "values",
    [
        ['BEGIN{system("x")}'],
        ['{print > "f"}'],
        ['{print | "sh"}'],
        ['BEGIN{"x" | getline}'],
        ["-f", "prog.awk"],
        ["-fprog.awk"],
        ["--load=ext"],
        ["-e", 'BEGIN{system("x")}'],
        [None],
        ["-v"],
    ],
)
def test_awk_programs_that_run_or_write_are_reported(values: list[str | None]) -> None:
    assert awk_problem(values) is not None


@pytest.mark.parametrize(
    "values", [["{print $1}", "f"], ["-F:", "{print $2}"], ["-v", "x=1", "{print x}"], ["--sandbox", '{system("x")}']]
)
def test_awk_programs_that_only_read_are_fine(values: list[str]) -> None:
    assert awk_problem(values) is None


@pytest.mark.parametrize(
    ("values", "kinds"),
    [
        (["-n", "-E", "s/a/b/p", "f"], []),
        (["-i.bak", "-e", "p", "f"], []),
        (["--in-place=.o", "p", "f"], []),
        (["-nE", "p"], []),
        (["--frobnicate", "p"], ["unknown"]),
        (["-Q", "p"], ["unknown"]),
    ],
)
def test_seds_table_is_closed(values: list[str], kinds: list[str]) -> None:
    assert [e.kind for e in effects(TABLES["sed"], values)] == kinds
