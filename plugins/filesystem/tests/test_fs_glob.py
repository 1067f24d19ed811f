"""filesystem.glob: glob semantics, sorting, truncation, ignore rules."""

from __future__ import annotations

import pytest
from entropic_mcp_filesystem._globpat import compile_glob, expand_braces


@pytest.fixture
def tree(root):
    for rel in (
        "a.py",
        "b.txt",
        "src/m.py",
        "src/pkg/n.py",
        "src/pkg/deep/o.py",
        "lib/x.ts",
        "lib/y.js",
        "docs/A.md",
        "docs/b.md",
    ):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    return root


def test_star_does_not_cross_slash(fs, tree):
    assert fs.ok("glob", {"pattern": "*.py"}) == ["a.py"]
    assert fs.ok("glob", {"pattern": "src/*.py"}) == ["src/m.py"]


def test_double_star_spans_directories_sorted(fs, tree):
    assert fs.ok("glob", {"pattern": "**/*.py"}) == ["a.py", "src/m.py", "src/pkg/deep/o.py", "src/pkg/n.py"]
    assert fs.ok("glob", {"pattern": "src/**/*.py"}) == ["src/m.py", "src/pkg/deep/o.py", "src/pkg/n.py"]
    assert fs.ok("glob", {"pattern": "src/**"}) == ["src/m.py", "src/pkg/deep/o.py", "src/pkg/n.py"]


def test_brace_alternatives(fs, tree):
    assert fs.ok("glob", {"pattern": "lib/*.{ts,js}"}) == ["lib/x.ts", "lib/y.js"]
    assert fs.ok("glob", {"pattern": "{lib,docs}/{x,b}.*"}) == ["docs/b.md", "lib/x.ts"]


def test_question_mark_and_classes(fs, tree):
    assert fs.ok("glob", {"pattern": "?.py"}) == ["a.py"]
    assert fs.ok("glob", {"pattern": "lib/[xz].*"}) == ["lib/x.ts"]
    assert fs.ok("glob", {"pattern": "lib/[!x].*"}) == ["lib/y.js"]


def test_case_sensitive(fs, tree):
    assert fs.ok("glob", {"pattern": "docs/a.md"}) == []
    assert fs.ok("glob", {"pattern": "docs/A.md"}) == ["docs/A.md"]


def test_path_argument_searches_below_it_and_results_stay_root_relative(fs, tree):
    assert fs.ok("glob", {"pattern": "*.py", "path": "src"}) == ["src/m.py"]
    assert fs.ok("glob", {"pattern": "**/*.py", "path": "src/pkg"}) == ["src/pkg/deep/o.py", "src/pkg/n.py"]


def test_truncation_is_announced_as_a_final_entry(make, tree):
    fs = make({"max_glob_results": 2})
    result = fs.ok("glob", {"pattern": "**/*.py"})
    assert result[:2] == ["a.py", "src/m.py"]
    assert result[2]["truncated"] is True and "narrow" in result[2]["note"]


def test_walk_limit_is_announced(make, tree):
    fs = make({"max_walk_entries": 3})
    result = fs.ok("glob", {"pattern": "**/*"})
    assert result[-1]["truncated"] is True and "max_walk_entries" in result[-1]["note"]


def test_missing_literal_prefix_is_an_empty_result(fs, tree):
    assert fs.ok("glob", {"pattern": "nowhere/**/*.py"}) == []


def test_absolute_and_parent_patterns_are_refused(fs, tree):
    assert fs.error("glob", {"pattern": "/etc/*"})["error"] == "invalid_args"
    assert fs.error("glob", {"pattern": "../*"})["error"] == "invalid_args"
    assert fs.error("glob", {"pattern": "{a,../b}"})["error"] == "invalid_args"


def test_glob_on_a_file_path_is_not_directory(fs, tree):
    assert fs.error("glob", {"pattern": "*", "path": "a.py"})["error"] == "not_directory"


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/a.py", True),
        ("x/**/y", "x/y", True),
        ("x/**/y", "x/q/r/y", True),
        ("a?c", "a/c", False),
        ("[a-c]*", "b1", True),
        ("\\*", "*", True),
        ("\\*", "a", False),
        ("{a,b{c,d}}", "bd", True),
        ("{a}", "{a}", True),
        ("a\\[", "a[", True),  # a literal bracket is escaped (an unclosed "[" is refused)
        ("**", "q/w", True),
    ],
)
def test_compile_glob_semantics(pattern, path, expected):
    assert compile_glob(pattern).match(path) is expected


def test_brace_expansion_is_bounded():
    from entropic_mcp import ToolError

    with pytest.raises(ToolError):
        expand_braces("{a,b}" * 12)
    assert expand_braces("x{1,2}y{3,4}") == ["x1y3", "x1y4", "x2y3", "x2y4"]


def test_results_fit_the_pipeline_result_cap_with_a_note(make, root):
    fs = make(result_cap=800)
    for i in range(100):
        (root / f"file_number_{i:03d}.txt").write_text("")
    outcome, result = fs.call("glob", {"pattern": "*.txt"})
    assert len(outcome.response.result.encode()) <= 800
    assert result[0] == "file_number_000.txt" and result[-1]["truncated"] is True
    assert "max_result_bytes" in result[-1]["note"]


def test_sort_by_mtime_lists_newest_first(fs, root):
    import os

    for age, name in enumerate(["new.py", "mid.py", "old.py", "sub/older.py"]):
        path = root / name
        path.parent.mkdir(exist_ok=True)
        path.write_text("x\n")
        stamp = 1_700_000_000 - age * 1000
        os.utime(path, (stamp, stamp))
    assert fs.ok("glob", {"pattern": "**/*.py", "sort": "mtime"}) == ["new.py", "mid.py", "old.py", "sub/older.py"]
    assert fs.ok("glob", {"pattern": "**/*.py"}) == ["mid.py", "new.py", "old.py", "sub/older.py"]
    assert fs.error("glob", {"pattern": "*", "sort": "size"})["error"] == "invalid_args"


def test_sort_by_mtime_keeps_the_newest_when_results_are_capped(make, root):
    import os

    fs = make({"max_glob_results": 2})
    for age in range(5):
        path = root / f"f{age}.txt"
        path.write_text("x")
        os.utime(path, (1_700_000_000 - age, 1_700_000_000 - age))
    result = fs.ok("glob", {"pattern": "*.txt", "sort": "mtime"})
    assert result[:2] == ["f0.txt", "f1.txt"] and result[2]["truncated"] is True
