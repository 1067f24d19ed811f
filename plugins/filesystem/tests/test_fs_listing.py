"""filesystem.list_directory: entries, types, sizes, recursion, errors."""

from __future__ import annotations


def test_entries_sorted_by_name_with_types_and_sizes(fs, root):
    (root / "b.txt").write_text("12345")
    (root / "a").mkdir()
    (root / "link").symlink_to("b.txt")
    result = fs.ok("list_directory", {})
    assert [e["name"] for e in result] == ["a", "b.txt", "link"]
    assert result[0] == {"name": "a", "path": "a", "type": "directory", "size": None}
    assert result[1] == {"name": "b.txt", "path": "b.txt", "type": "file", "size": 5}
    assert result[2]["type"] == "symlink"


def test_subdirectory_paths_are_root_relative(fs, root):
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("")
    assert [e["path"] for e in fs.ok("list_directory", {"path": "d"})] == ["d/e", "d/f.txt"]


def test_recursive_listing_honours_max_depth(fs, root):
    (root / "1" / "2" / "3" / "4").mkdir(parents=True)
    (root / "1" / "2" / "3" / "4" / "deep.txt").write_text("")
    paths = [e["path"] for e in fs.ok("list_directory", {"recursive": True, "max_depth": 2})]
    assert paths == ["1", "1/2"]
    everything = [e["path"] for e in fs.ok("list_directory", {"recursive": True, "max_depth": 10})]
    assert everything[-1] == "1/2/3/4/deep.txt"


def test_not_a_directory(fs, root):
    (root / "f.txt").write_text("")
    error = fs.error("list_directory", {"path": "f.txt"})
    assert error["error"] == "not_directory" and "filesystem.read_file" in error["message"]


def test_missing_directory_is_not_found(fs):
    assert fs.error("list_directory", {"path": "nope"})["error"] == "not_found"


def test_git_is_never_listed(fs, root):
    (root / ".git" / "objects").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git file
    assert [e["name"] for e in fs.ok("list_directory", {"recursive": True})] == ["sub"]
    assert fs.error("list_directory", {"path": ".git"})["error"] == "ignored"


def test_empty_directory(fs, root):
    (root / "empty").mkdir()
    assert fs.ok("list_directory", {"path": "empty"}) == []


def test_names_that_are_not_utf8_on_disk_are_shown_with_replacement_characters(fs, root):
    import os

    os.close(os.open(os.path.join(os.fsencode(root), b"bad\xffname.txt"), os.O_CREAT | os.O_WRONLY, 0o644))
    with open(os.path.join(os.fsencode(root), b"bad\xffname.txt"), "w") as handle:
        handle.write("needle\n")
    assert fs.ok("list_directory", {})[0]["name"] == "bad\ufffdname.txt"
    assert fs.ok("glob", {"pattern": "*.txt"}) == ["bad\ufffdname.txt"]
    assert fs.ok("grep", {"pattern": "needle"})[0]["path"] == "bad\ufffdname.txt"
