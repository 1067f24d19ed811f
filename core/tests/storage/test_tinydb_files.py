"""The tinydb backend's files: layout, compaction, torn and corrupt files, failed writes, options."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
from entropic_mcp import ConfigError, ServerManager, config_from_dict
from entropic_mcp._storage import _tinydb
from entropic_mcp._storage._tinydb import TinyDBBackend
from entropic_mcp.storage import CheckedStorage, StorageError
from tinydb import TinyDB


def _journals(store: Path) -> list[str]:
    return sorted(name for name in os.listdir(store) if name.startswith("journal-"))


def _fill(backend: TinyDBBackend, n: int = 3) -> tuple[str, list[str]]:
    root = backend.create_conversation("root")
    ids = []
    for i in range(n):
        delegation_id, child = backend.create_delegation(root, "lead", "coder", f"task {i}", 2, None)
        backend.save_messages(child, [{"role": "user", "content": f"message {i}"}])
        backend.complete_delegation(delegation_id, "completed", f"summary {i}")
        ids.append(delegation_id)
    return root, ids


def test_a_new_store_is_a_directory_with_one_journal(tmp_path: Path) -> None:
    backend = TinyDBBackend(tmp_path / "a" / "store")
    backend.create_conversation("x")
    assert _journals(tmp_path / "a" / "store") == ["journal-00000000.jsonl"]
    line = (tmp_path / "a" / "store" / "journal-00000000.jsonl").read_bytes()
    assert orjson.loads(line)["op"] == "create_conversation" and line.endswith(b"\n")
    backend.close()


def test_each_operation_appends_one_line_instead_of_rewriting_the_store(tmp_path: Path) -> None:
    backend = TinyDBBackend(tmp_path / "store")
    _fill(backend, 5)
    journal = tmp_path / "store" / "journal-00000000.jsonl"
    before = journal.read_bytes()
    backend.create_conversation("one more")
    after = journal.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    backend.close()


def test_compaction_writes_a_tinydb_readable_snapshot_and_a_fresh_journal(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store, compact_bytes=2_000)
    root, ids = _fill(backend, 10)
    assert (store / "snapshot.json").is_file()
    assert len(_journals(store)) == 1 and _journals(store) != ["journal-00000000.jsonl"]
    with TinyDB(store / "snapshot.json", access_mode="r") as db:
        assert {"conversations", "messages", "delegations", "snapshots"} <= db.tables()
        assert db.table("_meta").get(doc_id=1)["generation"] >= 1
    backend.close()
    reopened = TinyDBBackend(store)
    assert [r["delegation_id"] for r in reopened.search_delegations("summary", 10)] == ids[::-1]
    assert reopened.stats()["messages"] == 10
    reopened.close()


def test_state_documents_survive_compaction_and_stores_made_before_them_gain_them(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store, compact_bytes=2_000)
    backend.save_state("entropic.todo", "conversation-a", {"items": ["before"]}, 0)
    _fill(backend, 10)  # compacts
    assert (store / "snapshot.json").is_file()
    assert backend.save_state("entropic.todo", "conversation-a", {"items": ["before", "after"]}, 1) == 2
    backend.close()
    with TinyDB(store / "snapshot.json", access_mode="r") as db:
        assert [doc["key"] for doc in db.table("states").all()] == ["conversation-a"]
    reopened = TinyDBBackend(store)
    assert reopened.load_state("entropic.todo", "conversation-a") == ({"items": ["before", "after"]}, 2)
    reopened.close()
    # a snapshot written before state documents existed has no "states" table
    data = orjson.loads((store / "snapshot.json").read_bytes())
    del data["states"]
    data["_meta"]["1"]["next_ids"].pop("states", None)
    for name in _journals(store):
        (store / name).write_bytes(b"")
    (store / "snapshot.json").write_bytes(orjson.dumps(data))
    older = TinyDBBackend(store)
    assert older.load_state("entropic.todo", "conversation-a") == (None, 0)
    assert older.save_state("entropic.todo", "conversation-a", ["fresh"], 0) == 1
    assert older.stats()["delegations"] == len(data["delegations"]) > 0
    older.close()


def test_a_torn_last_line_is_ignored_then_cut_by_the_next_write(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root, ids = _fill(backend, 2)
    backend.close()
    journal = store / "journal-00000000.jsonl"
    with journal.open("ab") as fh:
        fh.write(b'{"op":"create_conversation","conversation_id":"torn')
    size = journal.stat().st_size
    reopened = TinyDBBackend(store)
    assert reopened.stats()["delegations"] == 2
    new_root = reopened.create_conversation("after the crash")
    assert all(orjson.loads(line) for line in journal.read_bytes().splitlines())
    reopened.close()
    again = TinyDBBackend(store)
    assert again.load_conversation(new_root)["conversation"]["title"] == "after the crash"
    again.close()
    # the cut bytes were kept aside, not dropped unseen
    torn = len(b'{"op":"create_conversation","conversation_id":"torn')
    aside = store / f"torn-{size - torn}-journal-00000000.jsonl"
    assert aside.read_bytes() == b'{"op":"create_conversation","conversation_id":"torn'


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda line: line, id="line-end-lost"),
        pytest.param(lambda line: line[:20] + b"#" + line[21:], id="byte-changed"),
        pytest.param(lambda line: line[:20] + b"\xff\xfe" + line[22:], id="not-utf8"),
        pytest.param(lambda line: line + b" trailing", id="text-appended"),
        pytest.param(lambda line: line[:-1] + b"]", id="bracket-swapped"),
        pytest.param(lambda line: line[:-2] + b'"]', id="end-cut-then-changed"),
        pytest.param(lambda line: b"\x00" * 5 + line[5:], id="zeros-then-the-rest"),
    ],
)
def test_a_damaged_last_line_without_its_end_is_reported_and_never_cut(tmp_path: Path, damage) -> None:
    """An acknowledged operation whose line lost its end is not a torn write: the store refuses
    to open (and to write) rather than cutting it off on the next append."""
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root, ids = _fill(backend, 2)
    backend.close()
    journal = store / "journal-00000000.jsonl"
    lines = journal.read_bytes().split(b"\n")[:-1]
    damaged = b"\n".join([*lines[:-1], damage(lines[-1])])
    journal.write_bytes(damaged)
    for _ in range(2):
        with pytest.raises(StorageError, match=r"journal-00000000\.jsonl: the last entry \(at byte \d+\)"):
            TinyDBBackend(store)
    assert journal.read_bytes() == damaged
    assert not list(store.glob("torn-*"))


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda line: line[: len(line) // 2], id="half"),
        pytest.param(lambda line: line[:1], id="first-byte"),
        pytest.param(lambda line: line[:-2], id="all-but-the-brace"),
        pytest.param(lambda line: b"\x00" * 40, id="zero-filled"),
    ],
)
def test_a_line_cut_short_by_a_crash_is_kept_aside_when_cut_off(tmp_path: Path, cut) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root, ids = _fill(backend, 1)
    backend.close()
    journal = store / "journal-00000000.jsonl"
    data = journal.read_bytes()
    # a write that had not returned: the start of one more entry (as the crash left it)
    pending = orjson.dumps(
        {"op": "create_conversation", "conversation_id": "c", "title": "ü≈", "metadata": {}, "at": "x"}
    )
    tail = cut(pending)
    journal.write_bytes(data + tail)
    reopened = TinyDBBackend(store)
    assert reopened.stats()["conversations"] == 2
    reopened.create_conversation("next")
    reopened.close()
    assert journal.read_bytes().startswith(data) and journal.read_bytes().count(b"\n") == data.count(b"\n") + 1
    assert (store / f"torn-{len(data)}-journal-00000000.jsonl").read_bytes() == tail


def test_a_line_cut_inside_a_character_is_a_torn_write(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    _fill(backend, 1)
    backend.close()
    journal = store / "journal-00000000.jsonl"
    data = journal.read_bytes()
    journal.write_bytes(data + '{"op":"create_conversation","title":"ü'.encode()[:-1])
    reopened = TinyDBBackend(store)
    assert reopened.stats()["conversations"] == 2
    reopened.close()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "not-a-store"])
def test_a_corrupt_snapshot_is_reported_by_name_and_left_untouched(tmp_path: Path, damage: str) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store, compact_bytes=1)
    _fill(backend, 2)
    backend.close()
    snapshot = store / "snapshot.json"
    data = snapshot.read_bytes()
    damaged = {"truncate": data[: len(data) // 2], "garbage": b"\x00\xff not json", "not-a-store": b'{"a": 1}'}[damage]
    snapshot.write_bytes(damaged)
    listing = sorted(os.listdir(store))
    with pytest.raises(StorageError, match="snapshot.json"):
        TinyDBBackend(store)
    assert snapshot.read_bytes() == damaged
    assert sorted(os.listdir(store)) == listing


def test_a_corrupt_journal_line_is_reported_by_name_and_left_untouched(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    _fill(backend, 2)
    backend.close()
    journal = store / "journal-00000000.jsonl"
    lines = journal.read_bytes().split(b"\n")
    lines[2] = lines[2][:10] + b"#corrupt#" + lines[2][10:]
    damaged = b"\n".join(lines)
    journal.write_bytes(damaged)
    with pytest.raises(StorageError, match=r"journal-00000000\.jsonl: corrupt entry at byte"):
        TinyDBBackend(store)
    assert journal.read_bytes() == damaged


def test_an_open_handle_stops_at_corruption_written_under_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root, _ = _fill(backend, 1)
    journal = store / "journal-00000000.jsonl"
    with journal.open("ab") as fh:
        fh.write(b"this is not json\n")
    damaged = journal.read_bytes()
    with pytest.raises(StorageError, match="corrupt entry"):
        backend.create_conversation("refused")
    with pytest.raises(StorageError, match="corrupt entry"):
        backend.load_conversation(root)
    assert journal.read_bytes() == damaged
    backend.close()


def test_a_missing_snapshot_after_compaction_is_an_error_not_an_empty_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store, compact_bytes=1)
    _fill(backend, 2)
    backend.close()
    (store / "snapshot.json").unlink()
    with pytest.raises(StorageError, match="snapshot.json: missing"):
        TinyDBBackend(store)


def test_a_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "store").write_text("I am a file")
    with pytest.raises(StorageError, match="not a directory"):
        TinyDBBackend(tmp_path / "store")


def test_a_failed_fsync_raises_and_the_operation_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root, _ = _fill(backend, 1)
    journal = store / "journal-00000000.jsonl"
    before = journal.read_bytes()

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_tinydb.os, "fsync", failing_fsync)
    with pytest.raises(StorageError, match="write failed.*nothing was changed"):
        backend.save_messages(root, [{"role": "user", "content": "lost"}])
    monkeypatch.undo()
    assert journal.read_bytes() == before
    assert backend.load_conversation(root)["messages"] == []
    backend.save_messages(root, [{"role": "user", "content": "kept"}])
    backend.close()
    reopened = TinyDBBackend(store)
    assert reopened.load_conversation(root)["messages"] == [{"role": "user", "content": "kept"}]
    reopened.close()


def test_a_write_beyond_the_file_size_limit_raises_and_keeps_the_previous_data(tmp_path: Path) -> None:
    # A real failed write (EFBIG from RLIMIT_FSIZE) in a child process, since root ignores
    # read-only permissions: the store must raise, stay readable and keep everything before.
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root, ids = _fill(backend, 3)
    backend.close()
    script = textwrap.dedent(
        f"""
        import resource, signal, os
        from entropic_mcp import StorageError
        from entropic_mcp._storage._tinydb import TinyDBBackend
        backend = TinyDBBackend({str(store)!r})
        size = os.path.getsize({str(store / "journal-00000000.jsonl")!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4096, resource.RLIM_INFINITY))
        try:
            backend.save_messages({root!r}, [{{"role": "user", "content": "x" * 100_000}}])
        except StorageError as exc:
            print("RAISED", exc)
        backend.save_messages({root!r}, [{{"role": "user", "content": "small"}}])
        print("SMALL OK")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "RAISED" in result.stdout and "write failed" in result.stdout, result.stdout + result.stderr
    assert "SMALL OK" in result.stdout, result.stderr
    reopened = TinyDBBackend(store)
    assert reopened.load_conversation(root)["messages"] == [{"role": "user", "content": "small"}]
    assert [r["delegation_id"] for r in reopened.search_delegations("summary", 5)] == ids[::-1]
    reopened.close()


def test_a_failed_compaction_keeps_the_operation_and_the_old_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store, compact_bytes=1)
    root = backend.create_conversation("root")

    def refuse(*args: object, **kwargs: object) -> None:
        raise StorageError("disk full")

    monkeypatch.setattr(_tinydb, "atomic_write", refuse)
    backend.save_messages(root, [{"role": "user", "content": "durable anyway"}])
    monkeypatch.undo()
    backend.close()
    reopened = TinyDBBackend(store)
    assert reopened.load_conversation(root)["messages"] == [{"role": "user", "content": "durable anyway"}]
    reopened.close()


def test_options_come_from_the_storage_table(tmp_path: Path) -> None:
    config = config_from_dict(
        {"storage": {"path": "s", "options": {"compact_bytes": 1000, "lock_timeout": 5}}}, root=tmp_path
    )
    backend = TinyDBBackend.from_config(config)
    assert backend.path == tmp_path / "s"
    backend.close()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"compact": 1}, "unknown option"),
        ({"compact_bytes": "big"}, "positive int"),
        ({"lock_timeout": 0}, "positive float"),
        ({"audit_batch": 1.5}, "positive int"),
    ],
)
def test_bad_options_are_config_errors_naming_the_key(tmp_path: Path, options: dict, message: str) -> None:
    config = config_from_dict({"storage": {"options": options}}, root=tmp_path)
    with pytest.raises(ConfigError, match=rf"\[storage\] options\.{next(iter(options))}.*{message}"):
        TinyDBBackend.from_config(config)


def test_the_manager_opens_tinydb_by_default_and_audits_calls(tmp_path: Path, user_data_dir: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    try:
        from demo_server import DemoServer  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    config = config_from_dict({"permissions": {"default": "allow"}}, root=tmp_path)
    manager = ServerManager(config, servers=[DemoServer(root=tmp_path)])
    storage = manager.storage
    [store] = user_data_dir.glob("projects/*/store")  # outside the project: no tool may read it
    assert isinstance(storage, CheckedStorage) and isinstance(storage.backend, TinyDBBackend)
    assert storage.path == store
    manager.call_sync("demo.echo", {"text": "hi"})
    manager.close()
    assert list(tmp_path.iterdir()) == []
    lines = (store / "tool_calls.jsonl").read_bytes().splitlines()
    record = orjson.loads(lines[-1])
    assert record["tool"] == "demo.echo" and record["args"] == {"text": "hi"}


def test_leftovers_of_an_interrupted_compaction_are_harmless_and_cleaned(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store, compact_bytes=1)
    root, ids = _fill(backend, 2)
    backend.close()
    (generation,) = [int(name[8:16]) for name in _journals(store)]
    # A compaction that died before its rename: a temp snapshot and the next journal, both unused.
    (store / ".snapshot.json.99999.tmp").write_bytes(b'{"half": ')
    (store / f"journal-{generation + 1:08d}.jsonl").write_bytes(b"")
    reopened = TinyDBBackend(store, compact_bytes=1)
    assert reopened.latest_delegation_for_target("coder") == ids[-1]
    for _ in range(20):  # until the journal outgrows the snapshot and compaction runs
        reopened.create_conversation("more")
        if f"journal-{generation:08d}.jsonl" not in _journals(store):
            break
    assert _journals(store) == [f"journal-{generation + 1:08d}.jsonl"]
    assert not (store / ".snapshot.json.99999.tmp").exists()
    count = reopened.stats()["conversations"]
    reopened.close()
    again = TinyDBBackend(store)
    assert again.stats()["conversations"] == count
    assert again.latest_delegation_for_target("coder") == ids[-1]
    again.close()


def test_an_operation_that_fails_to_apply_is_reloaded_from_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = TinyDBBackend(tmp_path / "store")
    root = backend.create_conversation("root")

    def broken(op: dict) -> None:
        raise KeyError("simulated bug")

    monkeypatch.setattr(backend._state, "apply", broken)
    with pytest.raises(StorageError, match="the store will reload"):
        backend.save_messages(root, [{"role": "user", "content": "durable"}])
    # The next operation reloads everything from the files, including the durable operation.
    assert backend.load_conversation(root)["messages"] == [{"role": "user", "content": "durable"}]
    backend.close()


def test_a_journal_removed_under_an_open_store_stops_it_instead_of_writing_into_the_void(tmp_path: Path) -> None:
    store = tmp_path / "store"
    backend = TinyDBBackend(store)
    root = backend.create_conversation("root")
    backend.load_conversation(root)
    (store / "journal-00000000.jsonl").unlink()
    with pytest.raises(StorageError, match="removed or replaced"):
        backend.save_messages(root, [{"role": "user", "content": "would be lost"}])
    backend.close()


def test_a_journal_that_cannot_be_opened_for_writing_raises_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    first = TinyDBBackend(store)
    root = first.create_conversation("root")
    first.close()
    backend = TinyDBBackend(store)
    real_open = _tinydb.os.open

    def refusing_open(path: object, flags: int, *args: object) -> int:
        if flags & os.O_WRONLY:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(_tinydb.os, "open", refusing_open)
    with pytest.raises(StorageError, match=r"cannot open for writing \(Permission denied\); nothing was changed"):
        backend.save_messages(root, [{"role": "user", "content": "refused"}])
    monkeypatch.undo()
    assert backend.load_conversation(root)["messages"] == []
    backend.save_messages(root, [{"role": "user", "content": "accepted"}])
    backend.close()
    assert TinyDBBackend(store).load_conversation(root)["messages"] == [{"role": "user", "content": "accepted"}]


def test_the_store_directory_keeps_itself_out_of_git(tmp_path):
    import subprocess

    from entropic_mcp._storage._tinydb import TinyDBBackend

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    backend = TinyDBBackend(tmp_path / ".entropic-mcp" / "store")
    backend.create_conversation("t")
    backend.close()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == ""


def test_a_prune_is_journalled_and_replayed_by_other_handles(tmp_path: Path) -> None:
    import time

    store = tmp_path / "store"
    first, second = TinyDBBackend(store), TinyDBBackend(store)
    first.save_state("entropic.todo", "gone", {"items": []}, 0)
    first.save_state("entropic.todo", "also-gone", {"items": []}, 0)
    time.sleep(0.02)
    assert second.prune_states("entropic.todo", 0) == 2
    assert first.load_state("entropic.todo", "gone") == (None, 0)
    first.save_state("entropic.todo", "fresh", {"items": []}, 0)
    first.close()
    second.close()
    reopened = TinyDBBackend(store)
    assert [reopened.load_state("entropic.todo", key)[1] for key in ("gone", "also-gone", "fresh")] == [0, 0, 1]
    reopened.close()
