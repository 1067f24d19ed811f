"""Ignore rules in walks: nested .gitignore with negation, .entropicignore, .git, matcher fidelity."""

from __future__ import annotations

import pytest
from entropic_mcp_filesystem._ignore import IgnoreFile, NameRules
from hypothesis import given, settings
from hypothesis import strategies as st


def write(root, rel, text="x\n"):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def tree(root):
    write(root, ".gitignore", "*.log\nbuild/\n")
    write(root, "keep.py")
    write(root, "debug.log")
    write(root, "build/out.py")
    write(root, "sub/.gitignore", "!important.log\n*.tmp\n/local.py\n")
    write(root, "sub/important.log")
    write(root, "sub/other.log")
    write(root, "sub/x.tmp")
    write(root, "sub/local.py")
    write(root, "sub/deeper/local.py")
    write(root, "sub/deeper/y.tmp")
    return root


def test_glob_honours_nested_gitignore_with_negation(fs, tree):
    assert fs.ok("glob", {"pattern": "**/*"}) == [
        ".gitignore",
        "keep.py",
        "sub/.gitignore",
        "sub/deeper/local.py",
        "sub/important.log",
    ]


def test_grep_and_listing_honour_the_same_rules(fs, tree):
    paths = {m["path"] for m in fs.ok("grep", {"pattern": "x"})}
    assert paths == {"keep.py", "sub/deeper/local.py", "sub/important.log"}
    listed = {e["path"] for e in fs.ok("list_directory", {"recursive": True})}
    assert listed == {
        ".gitignore",
        "keep.py",
        "sub",
        "sub/.gitignore",
        "sub/deeper",
        "sub/deeper/local.py",
        "sub/important.log",
    }


def test_git_directory_is_always_skipped(fs, root):
    write(root, ".git/config", "[core]\n")
    write(root, "a.txt")
    assert fs.ok("glob", {"pattern": "**/*"}) == ["a.txt"]
    assert fs.ok("grep", {"pattern": "core"}) == []


def test_ignored_directory_asked_for_by_name_is_walked(fs, tree):
    assert fs.ok("glob", {"pattern": "*", "path": "build"}) == ["build/out.py"]


def test_entropicignore_hides_from_walks_and_refuses_file_tools(fs, root):
    write(root, ".entropicignore", "secrets/\n*.key\n")
    write(root, "secrets/token.txt", "s3cret\n")
    write(root, "id.key", "k\n")
    write(root, "ok.txt", "fine\n")
    assert fs.ok("glob", {"pattern": "**/*.txt"}) == ["ok.txt"]
    assert fs.ok("grep", {"pattern": "s3cret"}) == []
    assert fs.error("read_file", {"path": "secrets/token.txt"})["error"] == "ignored"
    assert fs.error("read_file", {"path": "id.key"})["error"] == "ignored"
    assert fs.error("write_file", {"path": "secrets/new.txt", "content": "x"})["error"] == "ignored"
    assert not (root / "secrets" / "new.txt").exists()
    assert fs.error("list_directory", {"path": "secrets"})["error"] == "ignored"


def test_entropicignore_negation_re_includes_a_gitignored_file(fs, root):
    write(root, ".gitignore", "*.log\n")
    write(root, ".entropicignore", "!wanted.log\n")
    write(root, "wanted.log")
    write(root, "other.log")
    assert fs.ok("glob", {"pattern": "*.log"}) == ["wanted.log"]


def test_gitignored_file_is_still_readable_by_name(fs, tree):
    assert fs.ok("read_file", {"format": "json", "path": "debug.log"})["lines"] == ["x"]


def test_edited_gitignore_is_picked_up(fs, root):
    write(root, ".gitignore", "*.a\n")
    write(root, "f.a")
    write(root, "f.b")
    assert fs.ok("glob", {"pattern": "f.*"}) == ["f.b"]
    write(root, ".gitignore", "*.b\n")
    assert fs.ok("glob", {"pattern": "f.*", "path": "."}) == ["f.a"]


def test_git_info_exclude_applies(fs, root):
    write(root, ".git/info/exclude", "*.secret\n")
    write(root, "a.secret")
    write(root, "a.txt")
    assert fs.ok("glob", {"pattern": "a.*"}) == ["a.txt"]


def test_set_working_dir_reroots_and_reloads_rules(fs, root, tmp_path):
    other = tmp_path / "other"
    write(other, ".gitignore", "*.py\n")
    write(other, "a.py")
    write(other, "b.txt")
    assert fs.server.set_working_dir(other) is True
    assert fs.ok("glob", {"pattern": "*"}) == [".gitignore", "b.txt"]
    assert fs.server.set_working_dir(other / "b.txt") is False
    assert fs.server.root == other.resolve()


PATTERN_PIECES = st.sampled_from(
    [
        "*.log",
        "build/",
        "!keep.log",
        "/top",
        "a/**/b",
        "*.tmp",
        "!*.tmp",
        "x?",
        "[ab].c",
        "**/gen",
        "doc/*.md",
        "!doc/",
        "name",
        "sub/name",
        "\\#lit",
        "dir/",
    ]
)
PATH_PIECES = st.sampled_from(
    [
        "a",
        "b",
        "build",
        "keep.log",
        "x.log",
        "top",
        "gen",
        "doc",
        "r.md",
        "x1",
        "a.c",
        "name",
        "sub",
        "y.tmp",
        "#lit",
        "dir",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(PATTERN_PIECES, max_size=6),
    parts=st.lists(PATH_PIECES, min_size=1, max_size=4),
    is_dir=st.booleans(),
)
def test_combined_matcher_agrees_with_pathspec(lines, parts, is_dir):
    from pathspec import GitIgnoreSpec

    path = "/".join(parts) + ("/" if is_dir else "")
    expected = GitIgnoreSpec.from_lines(lines).check_file(path).include
    assert IgnoreFile(lines).verdict(path) == expected


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from(
            ["*.log", "!keep.log", "*.tmp", "!*.tmp", "x?", "[ab].c", "**/gen", "name", "\\#lit", "build/"]
        ),
        max_size=6,
    ),
    name=PATH_PIECES,
)
def test_name_rules_agree_with_pathspec_for_files(lines, name):
    from pathspec import GitIgnoreSpec

    rules = NameRules.for_stack(None, [(0, IgnoreFile(lines))])
    assert rules is not None
    expected = GitIgnoreSpec.from_lines([line for line in lines if not line.endswith("/")]).check_file(name).include
    assert rules.ignored(name) is bool(expected)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from(
            ["*.log", "!keep.log", "*.tmp", "!*.tmp", "x?", "[ab].c", "**/gen", "name", "\\#lit", "build/", "!build/"]
        ),
        max_size=6,
    ),
    name=PATH_PIECES,
)
def test_name_rules_agree_with_pathspec_for_directories(lines, name):
    from pathspec import GitIgnoreSpec

    rules = NameRules.for_stack(None, [(0, IgnoreFile(lines))])
    assert rules is not None
    expected = bool(GitIgnoreSpec.from_lines(lines).check_file(name + "/").include)
    assert rules.dir_ignored(name) is expected
    assert rules.dirs_kept([name]) == ([] if expected else [name])


def test_directories_pruned_by_name_and_by_path_agree_in_a_walk(fs, root):
    # Name-only rules (pruned by the remembered name verdicts) beside a path rule (matched in full).
    write(root, ".gitignore", "build/\n**/gen\n")
    write(root, "a/.gitignore", "!build/\n")
    write(root, "b/.gitignore", "sub/deep/\n")
    for rel in ["build/x.py", "a/build/y.py", "a/gen/z.py", "b/sub/deep/w.py", "b/sub/v.py", "c/build/u.py"]:
        write(root, rel, "x\n")
    found = fs.ok("glob", {"pattern": "**/*.py"})
    paths = found.splitlines() if isinstance(found, str) else found  # text or JSON results
    assert sorted(paths) == ["a/build/y.py", "b/sub/v.py"]


@pytest.mark.parametrize(
    ("line", "hidden", "shown"),
    [
        ("**/node_modules/**", ["node_modules/a.js", "web/node_modules/pkg/b.js"], ["web/app.js"]),
        ("src/**", ["src/a.py", "src/deep/b.py"], ["lib/c.py"]),
        ("gen/**/*.py", ["gen/x/a.py", "gen/a.py"], ["gen/keep.txt"]),
        ("**/cache/**\n!**/cache/keep.txt", ["cache/a.txt"], ["lib/c.py"]),
    ],
)
def test_lines_ending_in_double_star_work_in_every_walk(fs, root, line, hidden, shown):
    # These lines carry no directory-marker group in pathspec's regexes; a matcher built on its
    # private group names failed every walk with "no such group".
    write(root, ".gitignore", line + "\n")
    for rel in hidden + shown:
        write(root, rel, "needle\n")
    globbed = fs.ok("glob", {"pattern": "**/*"})
    grepped = {m["path"] for m in fs.ok("grep", {"pattern": "needle"})}
    listed = {e["path"] for e in fs.ok("list_directory", {"recursive": True, "max_depth": 8}) if e["type"] == "file"}
    for found in (set(globbed), grepped, listed):
        assert set(shown) <= found, (line, found)
        assert not set(hidden) & found, (line, found)


@pytest.mark.parametrize("line", ["**/node_modules/**", "src/**", "a/**/b/**", "**/**", "/**"])
def test_double_star_lines_agree_with_pathspec(line):
    from pathspec import GitIgnoreSpec

    for path in ["src/a", "src/", "x/node_modules/y", "node_modules/", "a/q/b/c", "top", "a/b/"]:
        assert IgnoreFile([line]).verdict(path) == GitIgnoreSpec.from_lines([line]).check_file(path).include


def test_a_backtracking_ignore_line_written_into_the_project_does_not_stall_walks(fs, root):
    # An ignore file is project content a model can write; on pathspec's pure-Python backend this
    # line against one 100-character name runs for minutes (issue 21).
    (root / ".gitignore").write_text("*a*a*a*a*a*a*a*b\n")
    (root / ("a" * 100)).write_text("a\n")
    rules = IgnoreFile(["*a*a*a*a*a*a*a*b"])
    assert all(rules.verdict("a" * 100) is None for _ in range(1000))
    assert fs.ok("glob", {"pattern": "a*"}) == ["a" * 100]
    assert fs.ok("grep", {"pattern": "^a$", "output_mode": "count"}) == [{"path": "a" * 100, "count": 1}]


def test_ignore_files_with_the_same_text_share_one_matcher_and_an_edit_splits_them(tmp_path):
    import os

    from entropic_mcp_filesystem._ignore import IgnoreCache

    cache = IgnoreCache()
    fds = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / ".gitignore").write_text("*.tmp\n!keep.tmp\n")
        fds.append(os.open(tmp_path / name, os.O_RDONLY | os.O_DIRECTORY))
    try:
        first, second = (cache.load(fd, ".gitignore") for fd in fds)
        assert first is second and first.verdict("x.tmp") is True
        (tmp_path / "b" / ".gitignore").write_text("*.log\n")
        edited = cache.load(fds[1], ".gitignore")
        assert edited is not first and edited.verdict("x.tmp") is None and edited.verdict("x.log") is True
        assert cache.load(fds[0], ".gitignore").verdict("x.tmp") is True
    finally:
        for fd in fds:
            os.close(fd)
