"""Issue 27: two workers (server managers) on one shared store answer read-before-write and
changed-since-read as one worker does: a read on one lets an edit on the other through, a change
between them is still refused. On a single-process store the tracker stays in each worker's memory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp.testing import MemoryStorage, fresh_plugins
from entropic_mcp_filesystem import FilesystemServer, _tracker
from entropic_mcp_filesystem._tracker import NAMESPACE, ReadTracker


def worker(root: Path, storage: dict[str, Any], store: Any = None) -> ServerManager:
    config = config_from_dict({"storage": storage, "permissions": {"default": "allow"}}, root=root)
    server = FilesystemServer(root=root)
    server.configure(config.server_table("filesystem"))
    return ServerManager(config, plugins=fresh_plugins(), servers=[server], storage=store)


def call(manager: ServerManager, tool: str, conversation: str = "c1", **args: Any) -> dict[str, Any]:
    outcome = anyio.run(manager.call, f"filesystem.{tool}", args, CallContext(conversation_id=conversation))
    try:
        data = orjson.loads(outcome.response.result)
    except orjson.JSONDecodeError:
        data = {"text": outcome.response.result}
    if not outcome.response.is_error:
        return {"error": None, **data} if isinstance(data, dict) else {"error": None, "result": data}
    return data


@pytest.fixture
def shared(root: Path) -> Iterator[tuple[ServerManager, ServerManager]]:
    """Two workers on one PostgreSQL schema, their state through it ("store")."""
    testing = pytest.importorskip("entropic_mcp_postgres.testing", reason="the postgres plugin is not installed")
    from entropic_mcp_postgres import PostgresBackend

    dsn = testing.test_dsn()  # skips without ENTROPIC_MCP_TEST_POSTGRES_DSN
    with testing.fresh_schema(dsn, "fs") as schema:
        stores = [PostgresBackend(dsn, schema=schema) for _ in range(2)]
        made = [worker(root, {"backend": "tinydb", "conversation_state": "store"}, store) for store in stores]
        yield made[0], made[1]
        for manager, store in zip(made, stores, strict=True):
            manager.close()
            store.close()


def test_a_read_on_one_worker_lets_an_edit_on_the_other_through(
    shared: tuple[ServerManager, ServerManager], root: Path
) -> None:
    first, second = shared
    (root / "a.txt").write_text("one\ntwo\n")
    assert not call(first, "read_file", path="a.txt")["error"]
    edited = call(second, "edit_file", path="a.txt", edits=[{"old_string": "one", "new_string": "uno"}])
    assert not edited["error"], edited
    # The edit recorded what it wrote, for both: the first worker edits again without a read.
    again = call(first, "edit_file", path="a.txt", edits=[{"old_string": "two", "new_string": "dos"}])
    assert not again["error"], again
    assert (root / "a.txt").read_text() == "uno\ndos\n"
    # Another conversation read nothing.
    assert call(second, "write_file", "c2", path="a.txt", content="x")["error"] == "read_before_write"


@pytest.mark.parametrize("racy_ns", [0, _tracker.RACY_NS], ids=["by identity", "by hash"])
def test_a_change_between_the_read_and_the_edit_is_refused_on_the_other_worker(
    shared: tuple[ServerManager, ServerManager], root: Path, monkeypatch: pytest.MonkeyPatch, racy_ns: int
) -> None:
    monkeypatch.setattr(_tracker, "RACY_NS", racy_ns)  # 0: the read trusts the stat identity, else hashes
    first, second = shared
    path = root / "a.txt"
    path.write_text("alpha beta\n")
    assert not call(first, "read_file", path="a.txt")["error"]
    # Same size, the mtime put back: only the ctime tells.
    st = path.stat()
    path.write_text("alpha BETA\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    refused = call(second, "edit_file", path="a.txt", edits=[{"old_string": "alpha", "new_string": "omega"}])
    assert refused["error"] == "file_changed", refused
    assert path.read_text() == "alpha BETA\n"
    # A fresh read on the second worker lets the first one write.
    assert not call(second, "read_file", path="a.txt")["error"]
    assert not call(first, "write_file", path="a.txt", content="new\n")["error"]


def test_a_status_shown_on_one_worker_lets_the_other_delete_and_the_end_clears_both(
    shared: tuple[ServerManager, ServerManager], root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tracker, "RACY_NS", 0)  # every status vouches (the files are younger than RACY_NS)
    first, second = shared
    for name in ("gone.txt", "kept.txt"):
        (root / name).write_text(name)
    assert not call(first, "list_directory", path=".")["error"]
    assert not call(second, "delete_file", path="gone.txt")["error"]
    assert not call(first, "read_file", path="kept.txt")["error"]
    assert not call(second, "move_file", source="kept.txt", destination="moved.txt")["error"]
    assert first.storage.load_state(NAMESPACE, "c1")[1] > 0
    second.end_conversation("c1")
    assert first.storage.load_state(NAMESPACE, "c1") == (None, 0)
    refused = call(first, "write_file", path="moved.txt", content="x")
    assert refused["error"] == "read_before_write", refused


def test_a_single_process_store_keeps_the_reads_in_memory(root: Path, tmp_path: Path) -> None:
    storage = {"backend": "tinydb", "path": str(tmp_path / "store")}
    first, second = worker(root, storage), worker(root, storage)
    try:
        (root / "a.txt").write_text("one\n")
        assert not call(first, "read_file", path="a.txt")["error"]
        refused = call(second, "write_file", path="a.txt", content="x")
        assert refused["error"] == "read_before_write", refused
        assert not call(first, "write_file", path="a.txt", content="y")["error"]
        assert first.storage.load_state(NAMESPACE, "c1") == (None, 0)
    finally:
        first.close()
        second.close()


def test_the_stored_document_is_bounded_and_survives_a_lost_race(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStorage()
    tracker = ReadTracker(max_files=50)
    for n in range(60):
        tracker.record("c", f"/p/{n}", size=n, mtime_ns=n, data_digest=bytes(16), store=store)
    assert tracker.files("c", store) == 50 and tracker.get("c", "/p/9", store) is None
    assert tracker.get("c", "/p/59", store) is not None
    monkeypatch.setattr(_tracker, "MAX_STORED_BYTES", 2048)
    tracker.record("c", "/p/last", size=1, mtime_ns=1, data_digest=bytes(16), store=store)
    value, _ = store.load_state(NAMESPACE, "c")
    assert len(orjson.dumps(value)) <= 2048
    kept = [row[0] for row in value["files"]]
    assert kept[-1] == "/p/last" and "/p/10" not in kept  # the oldest went first
    # Another worker saves between this one's load and save: the change is applied again on top.
    real = store.load_state

    def racing(namespace: str, key: str) -> tuple[Any, int]:
        value, version = real(namespace, key)
        monkeypatch.setattr(store, "load_state", real)
        store.save_state(
            namespace, key, {"files": [*value["files"], ["/p/theirs", 1, 1, None, [1, 2, 3, 4, 5], True]]}, version
        )
        return value, version

    monkeypatch.setattr(store, "load_state", racing)
    tracker.record("c", "/p/mine", size=1, mtime_ns=1, data_digest=bytes(16), store=store)
    assert tracker.get("c", "/p/theirs", store) is not None and tracker.get("c", "/p/mine", store) is not None
