"""read_files, file_info, move_file, delete_file, create_directory through the real pipeline."""

from __future__ import annotations

import os

import pytest

# -- read_files ---------------------------------------------------------------------------------


def test_read_files_shows_each_file_under_a_header(fs, root):
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "b.txt").write_text("three\n")
    text = fs.ok("read_files", {"paths": ["a.txt", "b.txt"]})
    assert text == "==> a.txt <==\none\ntwo\n\n==> b.txt <==\nthree"
    numbered = fs.ok("read_files", {"paths": ["a.txt", "b.txt"], "line_numbers": True})
    assert numbered == "==> a.txt <==\n1\tone\n2\ttwo\n\n==> b.txt <==\n1\tthree"


def test_read_files_reports_errors_per_file_and_records_the_reads(fs, root):
    (root / "a.txt").write_text("one\n")
    (root / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(10))
    text = fs.ok("read_files", {"paths": ["a.txt", "missing.txt", "pic.png"]})
    sections = text.split("\n\n")
    assert sections[0] == "==> a.txt <==\none"
    assert sections[1].startswith("==> missing.txt <==\n[not_found: ")
    assert sections[2] == "==> pic.png <==\n[image/png file: read it alone with filesystem.read_file to see it]"
    fs.ok("write_file", {"path": "a.txt", "content": "changed\n"})  # the read was recorded


def test_read_files_limit_and_bad_arguments(fs, root):
    (root / "a.txt").write_text("1\n2\n3\n")
    assert fs.ok("read_files", {"paths": ["a.txt"], "limit": 2}).split("\n")[-1].startswith("[lines 1-2 of 3")
    for bad in (
        {"paths": []},
        {"paths": "a.txt"},
        {"paths": [""]},
        {"paths": ["a"] * 21},
        {"paths": ["a.txt"], "line_numbers": 1},
    ):
        response = fs.direct("read_files", bad)
        assert response.is_error and '"invalid_args"' in response.result


# -- file_info ----------------------------------------------------------------------------------


def test_file_info_for_files_and_directories(fs, root):
    (root / "d").mkdir()
    (root / "d" / "a.txt").write_text("hello\n")
    (root / "d" / "b.bin").write_bytes(b"\x00\x01")
    (root / "d" / "p.pdf").write_bytes(b"%PDF-1.4\n")
    os.chmod(root / "d" / "a.txt", 0o640)
    os.utime(root / "d" / "a.txt", (1_700_000_000, 1_700_000_000))
    info = fs.ok("file_info", {"path": "d/a.txt"})
    assert info == {
        "path": "d/a.txt",
        "type": "file",
        "size": 6,
        "modified": "2023-11-14T22:13:20+00:00",
        "mode": "0640",
        "hard_links": 1,
        "content": "text",
    }
    assert fs.ok("file_info", {"path": "d/b.bin"})["content"] == "binary"
    assert fs.ok("file_info", {"path": "d/p.pdf"})["mime_type"] == "application/pdf"
    folder = fs.ok("file_info", {"path": "d"})
    assert folder["type"] == "directory" and folder["entries"] == 3
    assert fs.ok("file_info", {"path": "."})["type"] == "directory"
    assert fs.error("file_info", {"path": "nope"})["error"] == "not_found"


# -- create_directory ---------------------------------------------------------------------------


def test_create_directory_with_parents_and_again(fs, root):
    assert fs.ok("create_directory", {"path": "a/b/c"}) == {"path": "a/b/c", "created": True}
    assert (root / "a" / "b" / "c").is_dir()
    assert fs.ok("create_directory", {"path": "a/b/c"}) == {"path": "a/b/c", "created": False}
    (root / "f").write_text("x")
    assert fs.error("create_directory", {"path": "f/sub"})["error"] in ("not_directory", "not_found")
    assert fs.error("create_directory", {"path": ".git/hooks"})["error"] == "ignored"


# -- delete_file --------------------------------------------------------------------------------


def test_delete_needs_a_read_and_removes_the_file(fs, root):
    (root / "a.txt").write_text("x\n")
    assert fs.error("delete_file", {"path": "a.txt"})["error"] == "read_before_write"
    fs.ok("read_file", {"path": "a.txt"})
    (root / "a.txt").write_text("changed behind our back\n")
    assert fs.error("delete_file", {"path": "a.txt"})["error"] == "file_changed"
    fs.ok("read_file", {"path": "a.txt"})
    assert fs.ok("delete_file", {"path": "a.txt"}) == {"path": "a.txt", "deleted": "file"}
    assert not (root / "a.txt").exists()
    assert fs.error("delete_file", {"path": "a.txt"})["error"] == "not_found"


def test_delete_removes_empty_directories_only(fs, root):
    (root / "empty").mkdir()
    (root / "full").mkdir()
    (root / "full" / "x").write_text("x")
    assert fs.ok("delete_file", {"path": "empty"}) == {"path": "empty", "deleted": "directory"}
    assert fs.error("delete_file", {"path": "full"})["error"] == "not_empty"
    assert (root / "full" / "x").exists()
    assert fs.error("delete_file", {"path": "."})["error"] == "invalid_args"


# -- move_file ----------------------------------------------------------------------------------


def test_move_a_read_file_keeps_its_tracking(fs, root):
    (root / "a.txt").write_text("x\n")
    assert fs.error("move_file", {"source": "a.txt", "destination": "b.txt"})["error"] == "read_before_write"
    fs.ok("read_file", {"path": "a.txt"})
    assert fs.ok("move_file", {"source": "a.txt", "destination": "new/dir/b.txt"}) == {
        "source": "a.txt",
        "destination": "new/dir/b.txt",
    }
    assert (root / "new" / "dir" / "b.txt").read_text() == "x\n" and not (root / "a.txt").exists()
    fs.ok("edit_file", {"path": "new/dir/b.txt", "old_string": "x", "new_string": "y"})


def test_move_never_replaces(fs, root):
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    fs.ok("read_file", {"path": "a.txt"})
    assert fs.error("move_file", {"source": "a.txt", "destination": "b.txt"})["error"] == "exists"
    assert (root / "b.txt").read_text() == "b\n" and (root / "a.txt").exists()


def test_move_a_directory(fs, root):
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "sub" / "m.py").write_text("x\n")
    fs.ok("move_file", {"source": "pkg", "destination": "lib/pkg"})
    assert (root / "lib" / "pkg" / "sub" / "m.py").read_text() == "x\n"
    assert fs.error("move_file", {"source": "lib", "destination": "lib/inner"})["error"] == "invalid_args"


@pytest.mark.parametrize(
    ("setup", "permissions"),
    [
        (lambda r: (r / "box" / ".entropicignore").write_text(""), None),
        (lambda r: (r / "box" / "entropic-mcp.toml").write_text(""), None),
        (lambda r: (r / "box" / "secret.key").write_text("k"), {"default": "allow", "deny": ["filesystem.read:*.key"]}),
        (lambda r: (r / "box" / "w.txt").write_text("w"), {"default": "allow", "deny": ["filesystem.write:box/w.txt"]}),
    ],
)
def test_a_directory_holding_protected_files_is_not_moved(make, root, setup, permissions):
    (root / "box").mkdir()
    setup(root)
    fs = make(permissions=permissions)
    assert fs.error("move_file", {"source": "box", "destination": "elsewhere"})["error"] == "protected_contents"
    assert (root / "box").is_dir() and not (root / "elsewhere").exists()


def test_a_directory_with_entropicignored_contents_is_not_moved(fs, root):
    (root / ".entropicignore").write_text("box/private/\n")
    (root / "box" / "private").mkdir(parents=True)
    (root / "box" / "private" / "k").write_text("k")
    assert fs.error("move_file", {"source": "box", "destination": "out"})["error"] == "protected_contents"


def test_nothing_moves_into_or_out_of_git(fs, root):
    (root / ".git").mkdir()
    (root / "hook").write_text("#!/bin/sh\n")
    fs.ok("read_file", {"path": "hook"})
    assert fs.error("move_file", {"source": "hook", "destination": ".git/hooks/pre-commit"})["error"] == "ignored"
    assert not (root / ".git" / "hooks").exists()
