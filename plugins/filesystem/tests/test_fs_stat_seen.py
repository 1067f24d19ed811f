"""move_file and delete_file after file_info or a listing: an unchanged status is enough, no read."""

from __future__ import annotations

import pytest
from entropic_mcp_filesystem import _tracker


@pytest.fixture
def settled(monkeypatch):
    """Every status vouches for later changes (files made by a test are younger than RACY_NS)."""
    monkeypatch.setattr(_tracker, "RACY_NS", 0)


def test_file_info_then_delete_needs_no_read(fs, root, settled):
    (root / "old.log").write_text("x" * 100_000)
    fs.ok("file_info", {"path": "old.log"})
    assert fs.ok("delete_file", {"path": "old.log"}) == {"path": "old.log", "deleted": "file"}
    assert not (root / "old.log").exists()


def test_a_listing_then_move_needs_no_read_and_the_status_does_not_follow_the_move(fs, root, settled):
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("a = 1\n")
    fs.ok("list_directory", {"path": "src"})
    assert fs.ok("move_file", {"source": "src/a.py", "destination": "src/b.py"}) == {
        "source": "src/a.py",
        "destination": "src/b.py",
    }
    # The move changed the file's status: what was seen says nothing about it any more.
    assert fs.error("delete_file", {"path": "src/b.py"})["error"] == "read_before_write"


def test_a_file_changed_since_its_status_was_seen_is_refused(fs, root, settled):
    (root / "data.txt").write_text("one\n")
    fs.ok("file_info", {"path": "data.txt"})
    with open(root / "data.txt", "a") as handle:
        handle.write("two\n")
    error = fs.error("delete_file", {"path": "data.txt"})
    assert error["error"] == "file_changed" and "delete it" in error["message"]
    assert (root / "data.txt").read_text() == "one\ntwo\n"
    error = fs.error("move_file", {"source": "data.txt", "destination": "moved.txt"})
    assert error["error"] == "file_changed" and (root / "data.txt").exists()


def test_a_status_is_not_a_read_for_writes_and_edits(fs, root, settled):
    (root / "a.py").write_text("a = 1\n")
    fs.ok("file_info", {"path": "a.py"})
    assert fs.error("edit_file", {"path": "a.py", "old_string": "1", "new_string": "2"})["error"] == "read_before_write"
    assert fs.error("write_file", {"path": "a.py", "content": "b\n"})["error"] == "read_before_write"
    assert (root / "a.py").read_text() == "a = 1\n"


def test_a_status_does_not_replace_a_read_that_still_stands(fs, root, settled):
    (root / "a.py").write_text("a = 1\n")
    fs.ok("read_file", {"path": "a.py"})
    fs.ok("file_info", {"path": "a.py"})
    fs.ok("edit_file", {"path": "a.py", "old_string": "a = 1", "new_string": "a = 2"})
    assert (root / "a.py").read_text() == "a = 2\n"


def test_a_status_too_recent_to_vouch_records_nothing(fs, root):
    (root / "new.txt").write_text("fresh\n")  # changed just now: within RACY_NS
    fs.ok("file_info", {"path": "new.txt"})
    assert fs.error("delete_file", {"path": "new.txt"})["error"] == "read_before_write"
    fs.ok("read_file", {"path": "new.txt"})  # a read (hashed whole) still lets it go
    assert fs.ok("delete_file", {"path": "new.txt"})["deleted"] == "file"


def test_never_seen_is_refused_with_how_to_look(fs, root, settled):
    (root / "x.txt").write_text("x\n")
    error = fs.error("delete_file", {"path": "x.txt"})
    assert error["error"] == "read_before_write" and "file_info" in error["message"]
