"""Large message batches live in segment files; the journal and memory hold where they are."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from entropic_mcp._storage._tinydb import TinyDBBackend
from entropic_mcp.storage import StorageError

BIG = [{"role": "tool", "content": "x" * 5000, "tool_call_id": "t1"}, {"role": "assistant", "content": "done"}]


def _segments(store: Path) -> list[str]:
    return sorted(name for name in os.listdir(store) if name.startswith("messages-"))


def test_a_large_batch_is_kept_in_a_segment_not_in_the_journal(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root = backend.create_conversation("root")
    backend.save_messages(root, [{"role": "user", "content": "small stays inline"}])
    backend.save_messages(root, BIG)
    assert _segments(store) == ["messages-00000001.jsonl"]
    journal = (store / "journal-00000000.jsonl").read_bytes()
    assert b"x" * 5000 not in journal and b"small stays inline" in journal
    expected = [{"role": "user", "content": "small stays inline"}, *BIG]
    assert backend.load_conversation(root)["messages"] == expected
    assert backend.load_conversation(root)["conversation"]["message_count"] == 3
    backend.close()
    reopened = TinyDBBackend(store)
    assert reopened.load_conversation(root)["messages"] == expected
    reopened.close()


def test_compaction_keeps_references_not_bodies(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store, compact_bytes=1)
    root = backend.create_conversation("root")
    for _ in range(5):
        backend.save_messages(root, BIG)
    snapshot_id = backend.save_snapshot(root, BIG * 3)
    backend.close()
    assert b"x" * 5000 not in (store / "snapshot.json").read_bytes()
    reopened = TinyDBBackend(store)
    assert reopened.load_conversation(root)["messages"] == BIG * 5
    assert reopened.stats()["messages"] == 10 and snapshot_id
    reopened.close()


def test_segments_rotate_at_their_size_limit(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store, segment_bytes=5000)
    root = backend.create_conversation("root")
    for _ in range(4):
        backend.save_messages(root, BIG)
    assert len(_segments(store)) == 4
    assert backend.load_conversation(root)["messages"] == BIG * 4
    backend.close()


def test_a_corrupt_segment_is_reported_by_name_and_left_untouched(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    damaged_root = backend.create_conversation("damaged")
    backend.save_messages(damaged_root, BIG)
    intact_root = backend.create_conversation("intact")
    backend.save_messages(intact_root, [{"role": "user", "content": "fine"}])
    segment = store / "messages-00000001.jsonl"
    data = bytearray(segment.read_bytes())
    data[10:20] = b"##########"
    segment.write_bytes(bytes(data))
    with pytest.raises(StorageError, match=r"messages-00000001\.jsonl: stored messages at byte 0 are unreadable"):
        backend.load_conversation(damaged_root)
    assert segment.read_bytes() == bytes(data)
    assert backend.load_conversation(intact_root)["messages"] == [{"role": "user", "content": "fine"}]
    backend.close()


def test_a_missing_segment_is_reported_by_name(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root = backend.create_conversation("root")
    backend.save_messages(root, BIG)
    backend.close()
    (store / "messages-00000001.jsonl").unlink()
    reopened = TinyDBBackend(store)
    with pytest.raises(StorageError, match=r"messages-00000001\.jsonl: cannot read stored messages"):
        reopened.load_conversation(root)
    assert reopened.stats()["messages"] == 2
    reopened.close()


def test_bytes_of_a_batch_whose_journal_entry_never_landed_are_ignored(tmp_path: Path) -> None:
    # A crash between the segment append and the journal append leaves orphan bytes.
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root = backend.create_conversation("root")
    backend.save_messages(root, BIG)
    with (store / "messages-00000001.jsonl").open("ab") as fh:
        fh.write(orjson.dumps([{"role": "orphan"}])[:7])
    backend.save_messages(root, BIG)
    assert backend.load_conversation(root)["messages"] == BIG * 2
    backend.close()
