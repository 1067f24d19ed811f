"""The read tracker: per conversation, released at the end, bounded."""

from __future__ import annotations

from entropic_mcp_filesystem._tracker import ReadTracker, digest


def test_a_read_in_one_conversation_does_not_allow_a_write_in_another(fs, root):
    (root / "a.txt").write_text("x\n")
    fs.ok("read_file", {"path": "a.txt"}, conversation="one")
    assert fs.error("write_file", {"path": "a.txt", "content": "y"}, conversation="two")["error"] == "read_before_write"
    fs.ok("write_file", {"path": "a.txt", "content": "y"}, conversation="one")


def test_end_conversation_releases_the_reads(fs, root):
    (root / "a.txt").write_text("x\n")
    fs.ok("read_file", {"path": "a.txt"}, conversation="one")
    fs.manager.end_conversation("one")
    assert fs.server.tracker.files("one") == 0
    assert fs.error("write_file", {"path": "a.txt", "content": "y"}, conversation="one")["error"] == "read_before_write"


def test_a_read_through_another_spelling_counts(fs, root):
    (root / "d").mkdir()
    (root / "d" / "a.txt").write_text("x\n")
    (root / "alias").symlink_to(root / "d")
    fs.ok("read_file", {"path": "alias/a.txt"})
    fs.ok("write_file", {"path": "./d/../d/a.txt", "content": "y\n"})
    assert (root / "d" / "a.txt").read_text() == "y\n"


def test_tracker_is_bounded_per_conversation_and_in_conversations():
    tracker = ReadTracker(max_conversations=3, max_files=2)
    for c in range(5):
        for f in range(4):
            tracker.record(f"c{c}", f"/f{f}", size=1, mtime_ns=1, data_digest=digest(b"x"))
    assert len(tracker) == 3
    assert tracker.files("c4") == 2
    assert tracker.get("c4", "/f3") is not None and tracker.get("c4", "/f0") is None
    assert tracker.get("c0", "/f3") is None


def test_recently_used_conversation_survives_eviction():
    tracker = ReadTracker(max_conversations=2, max_files=4)
    tracker.record("old", "/a", size=1, mtime_ns=1, data_digest=b"")
    tracker.record("mid", "/a", size=1, mtime_ns=1, data_digest=b"")
    tracker.record("old", "/b", size=1, mtime_ns=1, data_digest=b"")
    tracker.record("new", "/a", size=1, mtime_ns=1, data_digest=b"")
    assert tracker.get("old", "/a") is not None and tracker.get("mid", "/a") is None


def test_many_concurrent_conversations_never_share_state(make, root):
    import anyio
    from entropic_mcp import CallContext

    fs = make()
    for i in range(20):
        (root / f"f{i}.txt").write_text(f"{i}\n")

    async def conversation(i: int, results: dict[int, tuple[bool, bool]]) -> None:
        manager = fs.manager
        mine, other = f"f{i}.txt", f"f{(i + 1) % 20}.txt"
        ctx = lambda: CallContext(conversation_id=f"conv{i}")  # noqa: E731
        await manager.call("filesystem.read_file", {"path": mine}, ctx())
        own = await manager.call("filesystem.write_file", {"path": mine, "content": f"{i}!\n"}, ctx())
        foreign = await manager.call("filesystem.write_file", {"path": other, "content": "stolen\n"}, ctx())
        results[i] = (own.response.is_error, foreign.response.is_error)

    async def main() -> dict[int, tuple[bool, bool]]:
        results: dict[int, tuple[bool, bool]] = {}
        async with anyio.create_task_group() as group:
            for i in range(20):
                group.start_soon(conversation, i, results)
        return results

    results = anyio.run(main)
    assert all(own is False and foreign is True for own, foreign in results.values())
    assert all((root / f"f{i}.txt").read_text() == f"{i}!\n" for i in range(20))


# -- changed since read: what a page read records, and every edit it must still catch ------------


def _edit_in_place(path, old: bytes, new: bytes) -> None:
    """Overwrite bytes in place (same size), then put the mtime back as it was."""
    import os

    st = path.stat()
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    with open(path, "r+b") as handle:
        handle.seek(data.index(old))
        handle.write(new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def _settle(path) -> None:
    """Wait (polling the filesystem's own clock, no sleep) until a change now gets a later ctime
    than ``path``'s last one: the case where the stat identity alone must vouch for the file."""
    import os

    probe = path.with_name(".clock-probe")
    probe.write_bytes(b"")
    last = path.stat().st_ctime_ns
    while probe.stat().st_ctime_ns <= last:
        os.utime(probe)
    probe.unlink()


def _long_file(root):
    path = root / "long.txt"
    path.write_bytes(b"".join(b"line %05d of the file\n" % n for n in range(1, 3001)))
    return path


def test_a_same_size_same_mtime_edit_just_after_a_change_is_refused(fs, root):
    # Changed within the racy window: the page read hashes the whole file, as before.
    path = _long_file(root)
    fs.ok("read_file", {"path": "long.txt", "limit": 10})
    _edit_in_place(path, b"line 02999", b"LINE 02999")
    assert fs.error("edit_file", {"path": "long.txt", "old_string": "line 00001", "new_string": "x"})["error"] == (
        "file_changed"
    )


def test_a_page_read_of_a_settled_file_records_its_identity_not_a_hash(fs, root, monkeypatch):
    from entropic_mcp_filesystem import _tracker

    monkeypatch.setattr(_tracker, "RACY_NS", 0)
    path = _long_file(root)
    _settle(path)
    fs.ok("read_file", {"path": "long.txt", "limit": 10})
    seen = fs.server.tracker.get("c1", str(path))
    assert seen is not None and seen.digest is None and seen.identity is not None


def test_an_in_place_edit_of_a_region_never_returned_is_refused_by_the_stat_identity(fs, root, monkeypatch):
    from entropic_mcp_filesystem import _tracker

    monkeypatch.setattr(_tracker, "RACY_NS", 0)
    path = _long_file(root)
    _settle(path)
    fs.ok("read_file", {"path": "long.txt", "limit": 10})
    _edit_in_place(path, b"line 02999", b"LINE 02999")  # same size, mtime put back; ctime moves
    for tool, args in (
        ("edit_file", {"path": "long.txt", "old_string": "line 00001", "new_string": "x"}),
        ("write_file", {"path": "long.txt", "content": "replaced\n"}),
        ("delete_file", {"path": "long.txt"}),
        ("move_file", {"source": "long.txt", "destination": "moved.txt"}),
    ):
        assert fs.error(tool, args)["error"] == "file_changed", tool
    assert b"LINE 02999" in path.read_bytes()


def test_a_settled_file_read_one_page_at_a_time_stays_writable(fs, root, monkeypatch):
    from entropic_mcp_filesystem import _tracker

    monkeypatch.setattr(_tracker, "RACY_NS", 0)
    path = _long_file(root)
    _settle(path)
    fs.ok("read_file", {"path": "long.txt", "offset": 2000, "limit": 5})
    fs.ok("edit_file", {"path": "long.txt", "old_string": "line 00001 ", "new_string": "LINE 00001 "})
    fs.ok("edit_file", {"path": "long.txt", "old_string": "line 00002 ", "new_string": "LINE 00002 "})
    assert path.read_bytes().startswith(b"LINE 00001 of the file\nLINE 00002 ")


def test_a_moved_file_read_by_page_stays_writable_under_its_new_name(fs, root, monkeypatch):
    from entropic_mcp_filesystem import _tracker

    monkeypatch.setattr(_tracker, "RACY_NS", 0)
    path = _long_file(root)
    _settle(path)
    fs.ok("read_file", {"path": "long.txt", "limit": 5})
    fs.ok("move_file", {"source": "long.txt", "destination": "moved.txt"})
    fs.ok("write_file", {"path": "moved.txt", "content": "new\n"})
    assert (root / "moved.txt").read_text() == "new\n"


def test_a_touch_after_a_page_read_asks_for_a_fresh_read(fs, root, monkeypatch):
    # A metadata change cannot be told from an edit without hashing: refused, and a re-read heals it.
    import os

    from entropic_mcp_filesystem import _tracker

    monkeypatch.setattr(_tracker, "RACY_NS", 0)
    path = _long_file(root)
    _settle(path)
    fs.ok("read_file", {"path": "long.txt", "limit": 5})
    os.chmod(path, 0o640)
    assert fs.error("write_file", {"path": "long.txt", "content": "y\n"})["error"] == "file_changed"
    _settle(path)
    fs.ok("read_file", {"path": "long.txt", "limit": 5})
    fs.ok("write_file", {"path": "long.txt", "content": "y\n"})
