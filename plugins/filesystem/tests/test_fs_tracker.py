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
