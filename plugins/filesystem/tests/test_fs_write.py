"""filesystem.write_file: the read gate, atomicity, modes, line endings."""

from __future__ import annotations

import os
import stat


def test_write_creates_file_and_parents(fs, root):
    data = fs.ok("write_file", {"path": "new/deep/f.txt", "content": "hi\n"})
    assert data == {"path": "new/deep/f.txt", "bytes_written": 3, "created": True}
    assert (root / "new" / "deep" / "f.txt").read_text() == "hi\n"


def test_write_of_existing_unread_file_is_refused(fs, root):
    (root / "a.txt").write_text("old\n")
    error = fs.error("write_file", {"path": "a.txt", "content": "new\n"})
    assert error["error"] == "read_before_write" and "filesystem.read_file" in error["message"]
    assert (root / "a.txt").read_text() == "old\n"


def test_read_then_external_change_then_write_is_refused(fs, root):
    (root / "a.txt").write_text("old\n")
    fs.ok("read_file", {"path": "a.txt"})
    (root / "a.txt").write_text("changed by someone else\n")
    error = fs.error("write_file", {"path": "a.txt", "content": "mine\n"})
    assert error["error"] == "file_changed" and "read it again" in error["message"]
    assert (root / "a.txt").read_text() == "changed by someone else\n"


def test_same_size_change_within_one_timestamp_tick_is_still_detected(fs, root):
    path = root / "a.txt"
    path.write_text("aaaa\n")
    fs.ok("read_file", {"path": "a.txt"})
    before = path.stat()
    path.write_text("bbbb\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert fs.error("write_file", {"path": "a.txt", "content": "c\n"})["error"] == "file_changed"


def test_read_then_write_then_write_again_needs_no_reread(fs, root):
    (root / "a.txt").write_text("v0\n")
    fs.ok("read_file", {"path": "a.txt"})
    assert fs.ok("write_file", {"path": "a.txt", "content": "v1\n"})["created"] is False
    fs.ok("write_file", {"path": "a.txt", "content": "v2\n"})
    assert (root / "a.txt").read_text() == "v2\n"


def test_created_file_can_be_written_again(fs, root):
    fs.ok("write_file", {"path": "n.txt", "content": "1\n"})
    fs.ok("write_file", {"path": "n.txt", "content": "2\n"})
    assert (root / "n.txt").read_text() == "2\n"


def test_write_keeps_the_mode(fs, root):
    path = root / "run.sh"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o751)
    fs.ok("read_file", {"path": "run.sh"})
    fs.ok("write_file", {"path": "run.sh", "content": "#!/bin/sh\necho hi\n"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o751


def test_write_is_atomic_a_rename_not_an_in_place_rewrite(fs, root):
    path = root / "a.txt"
    path.write_text("old\n")
    inode = path.stat().st_ino
    with path.open() as reader:  # a reader holding the old file sees the old content whole
        fs.ok("read_file", {"path": "a.txt"})
        fs.ok("write_file", {"path": "a.txt", "content": "new\n"})
        assert reader.read() == "old\n"
    assert path.stat().st_ino != inode and path.read_text() == "new\n"
    assert [p.name for p in root.iterdir()] == ["a.txt"]  # no temporary file left behind


def test_failed_write_leaves_no_temporary_file(fs, root):
    (root / "ro").mkdir()
    (root / "ro").chmod(0o555)
    try:
        if os.geteuid() == 0:
            return  # root ignores directory permissions; covered by the refusal tests instead
        assert fs.error("write_file", {"path": "ro/f.txt", "content": "x"})["error"] == "io_error"
        assert list((root / "ro").iterdir()) == []
    finally:
        (root / "ro").chmod(0o755)


def test_write_onto_directory_is_refused(fs, root):
    (root / "d").mkdir()
    assert fs.error("write_file", {"path": "d", "content": "x"})["error"] == "is_directory"


def test_crlf_file_stays_crlf_when_rewritten_with_lf_text(fs, root):
    (root / "w.txt").write_bytes(b"a\r\nb\r\n")
    fs.ok("read_file", {"path": "w.txt"})
    fs.ok("write_file", {"path": "w.txt", "content": "x\ny\n"})
    assert (root / "w.txt").read_bytes() == b"x\r\ny\r\n"


def test_empty_content_is_allowed(fs, root):
    fs.ok("write_file", {"path": "empty.txt", "content": ""})
    assert (root / "empty.txt").read_bytes() == b""


def test_unicode_content_round_trips(fs, root):
    fs.ok("write_file", {"path": "u.txt", "content": "héllo ✓\n"})
    assert fs.ok("read_file", {"format": "json", "path": "u.txt"})["lines"] == ["héllo ✓"]


def test_bytes_written_counts_utf8_bytes(fs):
    assert fs.ok("write_file", {"path": "u.txt", "content": "é"})["bytes_written"] == 2


def test_writes_into_git_internals_are_refused_reads_are_not(fs, root):
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    error = fs.error("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\nrm -rf ~\n"})
    assert error["error"] == "ignored" and "git tools" in error["message"]
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    assert fs.ok("read_file", {"format": "json", "path": ".git/config"})["lines"] == ["[core]"]
    error = fs.error("edit_file", {"path": ".git/config", "old_string": "[core]", "new_string": "[x]"})
    assert error["error"] == "ignored"
