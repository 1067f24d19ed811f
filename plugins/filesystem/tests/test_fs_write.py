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


#: Arguments naming a target inside .git, for every tool that writes; a new writing tool must be added.
GIT_TARGETS = {
    "write_file": [{"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}],
    "edit_file": [{"path": ".git/config", "old_string": "[core]", "new_string": "[x]"}],
    "create_directory": [{"path": ".git/hooks/new"}],
    "delete_file": [{"path": ".git/config"}],
    "move_file": [
        {"source": ".git/config", "destination": "config-copy"},
        {"source": "plain.txt", "destination": ".git/hooks/pre-commit"},
    ],
}


def test_every_writing_tool_refuses_targets_inside_git(fs, root):
    from entropic_mcp import AccessLevel

    writing = {name for name, tool in fs.server._tools.items() if tool.required_access_level >= AccessLevel.WRITE}
    assert writing == set(GIT_TARGETS), "a writing tool is missing from GIT_TARGETS"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / "plain.txt").write_text("x\n")
    fs.ok("read_file", {"path": "plain.txt"})
    fs.ok("read_file", {"path": ".git/config"})
    for tool, calls in GIT_TARGETS.items():
        for args in calls:
            for spelling in ("", "./", "sub/../"):
                spelled = {
                    k: (spelling + v if k in ("path", "source", "destination") and ".git" in v else v)
                    for k, v in args.items()
                }
                assert fs.error(tool, spelled)["error"] == "ignored", (tool, spelled)
    assert (root / ".git" / "config").read_text() == "[core]\n"
    assert sorted(p.name for p in (root / ".git" / "hooks").iterdir()) == []
    assert (root / "plain.txt").read_text() == "x\n"
