"""Whole glob answers kept with their trace: used only while every directory and ignore file is as seen.

The clock runs 10 s ahead and the tree is aged (as in test_fs_dirstore.py), so what a walk reads
is old enough to keep; the reference is always a server that keeps nothing (``listing_cache =
false`` and a new server per call).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import test_fs_dirstore
from entropic_mcp_filesystem import _answers, _walk
from entropic_mcp_filesystem._answers import Answers, Trace, still_valid
from entropic_mcp_filesystem._walk import Walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fs_dirstore import age, count_calls, edit_in_place, glob, populate, store_of

server = test_fs_dirstore.server  # a new server whose caches' clock runs 10 s ahead
fresh = test_fs_dirstore.fresh  # the glob of a server that keeps nothing


@pytest.fixture
def tree(root: Path) -> Path:
    populate(
        root,
        {
            ".gitignore": "*.log\nbuild/\n",
            ".entropicignore": "secret/\n",
            "a.py": "x",
            "notes.log": "x",
            "secret/s.py": "x",
            "src/m.py": "x",
            "src/.gitignore": "*.tmp\n",
            "src/t.tmp": "x",
            "src/pkg/n.py": "x",
            "src/pkg/deep/d.py": "x",
            "build/gen.py": "x",
            "docs/readme.md": "x",
        },
    )
    age(root)
    return root


def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    return count_calls(monkeypatch, Walk, "walk_names")


def test_a_repeated_glob_is_answered_without_a_walk(tree, server, fresh, monkeypatch):
    harness = server(tree)
    first = glob(harness, "**/*.py")
    assert first == fresh(tree, "**/*.py") == ["a.py", "src/m.py", "src/pkg/deep/d.py", "src/pkg/n.py"]
    counted = walks(monkeypatch)
    assert harness.ok("glob", {"pattern": "**/*.py"}, conversation="c2") == first
    assert counted[0] == 0
    assert harness.ok("glob", {"pattern": "src/**/*.md"}, conversation="c3") == []
    assert counted[0] == 1  # an answer is per pattern, and one below the root is walked
    # any pattern from the root is the root's whole answer filtered
    assert harness.ok("glob", {"pattern": "**/*.md"}, conversation="c4") == ["docs/readme.md"]
    assert counted[0] == 1


def test_a_new_servers_first_glob_is_answered_from_the_store(tree, server, fresh, monkeypatch):
    expected = glob(server(tree), "**/*.py")
    stored = store_of(tree).read_answers()
    assert stored is not None and sorted(key[0] for key, _, _ in stored[1]) == ["glob", "tree"]
    counted = walks(monkeypatch)
    harness = server(tree)
    assert glob(harness, "**/*.py") == expected == fresh(tree, "**/*.py") != []
    assert counted[0] == 1  # the reference's walk alone
    assert harness.server.ignore_cache.listings._pending is not None  # no listing was even built


def test_offsets_sorting_and_json_come_from_the_same_answer(tree, server, fresh):
    harness = server(tree)
    glob(harness, "**/*")
    page = harness.ok("glob", {"pattern": "**/*", "offset": 2}, conversation="c2")
    assert page == fresh(tree, "**/*")[2:]
    by_mtime = harness.ok("glob", {"pattern": "**/*", "sort": "mtime"}, conversation="c3")
    assert sorted(by_mtime) == fresh(tree, "**/*")


def _edit_root_gitignore(tree: Path) -> None:
    edit_in_place(tree / ".gitignore", "*.md\n*.log\n\n\n")  # the same size: build/ no longer ignored


def _edit_entropicignore(tree: Path) -> None:
    edit_in_place(tree / ".entropicignore", "docs/\n\n\n")


def _add_deep_file(tree: Path) -> None:
    (tree / "src" / "pkg" / "deep" / "new.py").write_text("x")


def _remove_file(tree: Path) -> None:
    (tree / "src" / "m.py").unlink()


def _rename_directory(tree: Path) -> None:
    (tree / "src" / "pkg").rename(tree / "src" / "pkg2")


def _add_nested_gitignore(tree: Path) -> None:
    (tree / "src" / "pkg" / ".gitignore").write_text("n.py\n")


def _link_for_a_directory(tree: Path) -> None:
    outside = tree.parent / "outside"
    populate(outside, {"evil.py": "x"})
    shutil.rmtree(tree / "src" / "pkg" / "deep")
    (tree / "src" / "pkg" / "deep").symlink_to(outside, target_is_directory=True)


def _new_directory(tree: Path) -> None:
    populate(tree, {"docs/api/x.py": "x"})


def _file_becomes_directory(tree: Path) -> None:
    (tree / "a.py").unlink()
    populate(tree, {"a.py/inner.py": "x"})


CHANGES = [
    _edit_root_gitignore,
    _edit_entropicignore,
    _add_deep_file,
    _remove_file,
    _rename_directory,
    _add_nested_gitignore,
    _link_for_a_directory,
    _new_directory,
    _file_becomes_directory,
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("pattern", ["**/*", "**/*.py", "src/**/*"])
def test_any_change_is_seen_by_the_same_server_and_by_a_new_one(tree, server, fresh, change, pattern):
    harness = server(tree)
    before = glob(harness, pattern)
    assert before == fresh(tree, pattern)
    change(tree)
    after = fresh(tree, pattern)
    if pattern == "**/*":
        assert after != before  # every change shows in the whole tree's answer
    assert harness.ok("glob", {"pattern": pattern}, conversation="c2") == after
    assert glob(server(tree), pattern) == after
    assert "evil.py" not in " ".join(after)


def test_the_real_clock_keeps_no_answer_for_a_tree_just_written(root, make):
    populate(root, {"a.py": "x", "d/b.py": "x"})  # not aged: every directory is racy
    harness = make(None, at=root)
    assert glob(harness, "**/*.py") == ["a.py", "d/b.py"]
    assert len(harness.server.ignore_cache.answers) == 0
    (root / "d" / "c.py").write_text("x")
    assert harness.ok("glob", {"pattern": "**/*.py"}, conversation="c2") == ["a.py", "d/b.py", "d/c.py"]


def test_a_walk_cut_short_keeps_no_answer(tree, server):
    harness = server(tree, {"max_walk_entries": 3})
    result = glob(harness, "**/*")
    assert result[-1]["truncated"] is True
    assert len(harness.server.ignore_cache.answers) == 0


def test_a_directory_the_walk_could_not_open_keeps_no_answer(tree, server, monkeypatch):
    real_open = os.open

    def refusing(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "deep" and kwargs.get("dir_fd") is not None:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(_walk.os, "open", refusing)
    harness = server(tree)
    assert "src/pkg/deep/d.py" not in glob(harness, "**/*.py")
    assert len(harness.server.ignore_cache.answers) == 0
    monkeypatch.setattr(_walk.os, "open", real_open)  # readable again (a chmod moves no listing above it)
    assert "src/pkg/deep/d.py" in harness.ok("glob", {"pattern": "**/*.py"}, conversation="c2")


def test_answers_are_bounded_in_number_and_names(tree, server, monkeypatch):
    harness = server(tree)
    for n in range(_answers.MAX_ANSWERS + 3):
        harness.ok("glob", {"pattern": f"src/**/*{n}*"}, conversation=f"c{n}")  # below the root: walked
    assert len(harness.server.ignore_cache.answers) == _answers.MAX_ANSWERS
    small = Answers(max_answers=8, max_names=10)
    trace = Trace(started=10**19, margin_ns=0, trusted=lambda dev: True)
    small.put("k", trace, [f"p{i}" for i in range(6)])  # more than half the budget: not kept
    assert len(small) == 0
    small.put("k", trace, ["a", "b"])
    assert len(small) == 1 and small.records() == [("k", [], "a\0b")]


def glob_answer_in_the_store(tree: Path) -> tuple[Any, int, Any, list[Any], str]:
    """The store of ``tree``, when its answers were written, and the one answer of a pattern it holds."""
    store = store_of(tree)
    stored = store.read_answers()
    assert stored is not None
    written_ns, records = stored
    ((key, trace, answer),) = [record for record in records if record[0][0] == "glob"]
    return store, written_ns, key, trace, answer


def test_malformed_answers_in_the_store_are_ignored(tree, server, fresh):
    glob(server(tree), "**/*.py")
    store, written_ns, key, trace, answer = glob_answer_in_the_store(tree)
    newest = written_ns - 1  # within the racy margin of the write time
    bad = [
        (key, trace, ["a list"]),
        (key, "not a list", answer),
        ([1], trace, answer),  # unhashable key
        (key, [(0, "", 1, 2, 3)], answer),  # short record
        (key, [(0, "", 1, 2, newest, newest, None)], answer),  # racy against the write time
        (key, [(1, "../x", 1, 2, 3, 4, None)], answer),  # a name that is not one component
        (key, [(0, "", 1, 2, 3, 4, ("a", 2, 3, 4, 5))], answer),
        "not a record",
    ]
    store.write_answers(written_ns, bad)
    harness = server(tree)
    harness.server.ignore_cache.prepare()
    assert len(harness.server.ignore_cache.answers) == 0
    assert glob(harness, "**/*.py") == fresh(tree, "**/*.py")


@pytest.mark.parametrize(
    "damage",
    [lambda data: data[:-3] + bytes(3), lambda data: b"", lambda data: data.replace(b"answers", b"listings", 1)],
    ids=["corrupt", "empty", "another-kind-of-file"],
)
def test_an_unusable_answers_file_is_ignored(tree, server, fresh, damage):
    glob(server(tree), "**/*.py")
    path = store_of(tree).answers_path
    path.write_bytes(damage(path.read_bytes()))
    harness = server(tree)
    harness.server.ignore_cache.prepare()
    assert len(harness.server.ignore_cache.answers) == 0
    assert glob(harness, "**/*.py") == fresh(tree, "**/*.py")


def test_an_answer_whose_directories_were_forged_is_not_used(tree, server, fresh):
    glob(server(tree), "**/*.py")
    store, written_ns, key, trace, _ = glob_answer_in_the_store(tree)
    inode_moved = [(d, n, dev, ino + 1, m, c, i) for d, n, dev, ino, m, c, i in trace]
    store.write_answers(written_ns, [(key, trace, "forged.py"), (("glob", "x"), inode_moved, "x")])
    # the trace is the real one, so the forged paths are served: the store is the user's own file
    assert glob(server(tree), "**/*.py") == ["forged.py"]
    store.write_answers(written_ns, [(key, inode_moved, "forged.py")])
    assert glob(server(tree), "**/*.py") == fresh(tree, "**/*.py")  # one inode off: walked


def test_a_trace_that_skips_a_depth_is_not_valid(root):
    populate(root, {"d/e/f.py": "x"})
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        st = os.fstat(fd)
        top = (0, "", st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, None)
        assert still_valid([top], fd)
        assert not still_valid([top, (2, "e", 0, 0, 0, 0, None)], fd)
        assert not still_valid([top, top], fd)
        assert not still_valid([top, (1, "missing", 0, 0, 0, 0, None)], fd)
    finally:
        os.close(fd)


PATTERNS = [
    "**/*",
    "**/*.py",
    "**/*.{py,md}",
    "*",
    "*.py",
    "*/*.py",
    "src/*.py",
    "**/m.py",
    "**/[mn].py",
    "**/?.py",
    "src/**",
    "**/pkg/**/*.py",
    "**/deep/*",
    "{src,docs}/**/*",
    "**/*.log",
    "**/t.tmp",
]


@pytest.mark.parametrize("first", ["**/*.py", "*.md"], ids=["whole-tree-first", "depth-limited-first"])
def test_every_pattern_from_the_roots_whole_answer_equals_its_walk(tree, server, fresh, monkeypatch, first):
    from entropic_mcp_filesystem._globpat import compile_glob

    harness = server(tree)
    glob(harness, first)
    counted = walks(monkeypatch)
    for n, pattern in enumerate(PATTERNS):
        expected = fresh(tree, pattern)
        before = counted[0]
        assert harness.ok("glob", {"pattern": pattern}, conversation=f"p{n}") == expected, pattern
        if first == "**/*.py" and not compile_glob(pattern).prefix:
            assert counted[0] == before, pattern  # from the root's whole answer, no walk
    # a depth-limited glob sees part of the tree: the whole answer came from the first unlimited one
    assert [key[0] for key in harness.server.ignore_cache.answers._entries].count("tree") == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(
        st.tuples(
            st.sampled_from(["", "d", "d/e", "f", "f/g/h"]), st.sampled_from(["a.py", "b.log", "c.md", ".x", "m"])
        ),
        min_size=1,
        max_size=12,
    ),
    ignores=st.lists(
        st.tuples(st.sampled_from(["", "d", "f"]), st.sampled_from(["*.log\n", "e/\n", "!b.log\n", "/c.md\n", "g\n"])),
        max_size=3,
    ),
    patterns=st.lists(st.sampled_from([*PATTERNS, "d/**/*.py", "**/e/*", "f/*/*/*", "**/.x", "**/*.m"]), max_size=6),
)
def test_any_pattern_filtered_from_the_whole_answer_equals_a_fresh_walk(files, ignores, patterns, server, fresh):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp)) / "root"
        root.mkdir()
        populate(root, {f"{d}/{n}".lstrip("/"): "x" for d, n in files})
        populate(root, {f"{d}/.gitignore".lstrip("/"): text for d, text in ignores})
        age(root)
        harness = server(root)
        assert glob(harness, "**/*") == fresh(root, "**/*")
        again = server(root)  # from the store, as a new server
        for n, pattern in enumerate(patterns):
            expected = fresh(root, pattern)
            assert harness.ok("glob", {"pattern": pattern}, conversation=f"p{n}") == expected, pattern
            assert again.ok("glob", {"pattern": pattern}, conversation=f"p{n}") == expected, pattern
