"""Killing the server mid-operation is a StorageError; once it is back, the same backend works."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from entropic_mcp.storage import StorageError
from entropic_mcp_postgres import PostgresBackend, PostgresUnavailable
from entropic_mcp_postgres.testing import no_server
from pg_cluster import Cluster, make_cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = make_cluster()
    if isinstance(made, str):
        no_server(f"the kill test needs a PostgreSQL cluster of its own: {made}")
    assert isinstance(made, Cluster)
    try:
        yield made
    finally:
        made.remove()


def _until_it_works(operation: Callable[[], Any], attempts: int = 150) -> Any:
    """Retry while the backend reconnects (bounded: the test ends either way)."""
    for _ in range(attempts):
        try:
            return operation()
        except StorageError:
            time.sleep(0.1)
    return operation()


def test_a_kill_mid_operation_is_a_storage_error_and_the_backend_reconnects(cluster: Cluster) -> None:
    backend = PostgresBackend(cluster.dsn, pool_min=2, pool_max=4, pool_timeout=2, connect_timeout=2)
    try:
        root = backend.create_conversation("before the crash")
        done, _ = backend.create_delegation(root, "lead", "coder", "survive the crash", 2, None)
        backend.complete_delegation(done, "completed", "crash survivor")

        # Hold the conversation's row from another session, so save_messages waits inside the
        # server — then kill the server while it waits.
        blocker = psycopg.connect(cluster.dsn)
        blocker.execute("SELECT 1 FROM entropic_mcp.conversations WHERE conversation_id = %s FOR UPDATE", (root,))
        failure: list[BaseException] = []

        def save() -> None:
            try:
                backend.save_messages(root, [{"role": "user", "content": "in flight"}])
            except BaseException as exc:
                failure.append(exc)

        saver = threading.Thread(target=save)
        saver.start()
        for _ in range(100):  # until the save is waiting for the row lock
            with psycopg.connect(cluster.dsn, autocommit=True) as watcher:
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%%messages%%'"
                ).fetchone()
            if waiting and waiting[0]:
                break
            time.sleep(0.05)
        cluster.kill()
        saver.join(timeout=30)
        assert not saver.is_alive()
        blocker.close()
        assert len(failure) == 1 and isinstance(failure[0], PostgresUnavailable), failure
        assert "reconnects by itself" in str(failure[0])

        # While the server is down every operation fails the same clear way.
        with pytest.raises(PostgresUnavailable, match="PostgreSQL at"):
            backend.search_delegations("crash")
        with pytest.raises(StorageError):
            backend.create_conversation("while down")

        cluster.start()
        # The same backend object, no restart of the host: it reconnects by itself.
        found = _until_it_works(lambda: backend.search_delegations("crash survivor"))
        assert [r["delegation_id"] for r in found] == [done]
        assert backend.load_conversation(root)["messages"] == []  # the in-flight save was not applied
        backend.save_messages(root, [{"role": "user", "content": "after the crash"}])
        assert backend.stats()["messages"] == 1
    finally:
        backend.close()


def test_writes_racing_a_kill_fail_only_with_storage_errors_and_resume(cluster: Cluster) -> None:
    backend = PostgresBackend(cluster.dsn, pool_min=1, pool_max=3, pool_timeout=1, connect_timeout=1)
    stop = threading.Event()
    surprises: list[BaseException] = []
    storage_errors: list[StorageError] = []
    completed: list[str] = []

    def work() -> None:
        root = _until_it_works(lambda: backend.create_conversation("racing"))
        while not stop.is_set():
            try:
                delegation_id, _ = backend.create_delegation(root, "lead", "coder", "racing the kill", 1, None)
                backend.complete_delegation(delegation_id, "completed", "raced")
                completed.append(delegation_id)
            except StorageError as exc:
                storage_errors.append(exc)
                time.sleep(0.02)
            except BaseException as exc:
                surprises.append(exc)
                return

    workers = [threading.Thread(target=work) for _ in range(2)]
    try:
        for worker in workers:
            worker.start()
        for _ in range(200):
            if len(completed) >= 10:
                break
            time.sleep(0.02)
        cluster.kill()
        time.sleep(0.3)
        cluster.start()
        before = len(completed)
        for _ in range(600):  # bounded (a minute): until work resumed after the restart
            if len(completed) >= before + 10:
                break
            time.sleep(0.1)
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
        try:
            assert surprises == []
            assert storage_errors, "the kill should have failed some operation"
            assert len(completed) >= before + 10
            stats = _until_it_works(backend.stats)
            # every delegation that returned is there, completed
            assert stats["completed_delegations"] >= len(completed)
            found = backend.list_delegations(limit=10_000)
            ids = [d["delegation_id"] for d in found]
            assert len(ids) == len(set(ids))
            assert set(completed) <= {d["delegation_id"] for d in found if d["status"] == "completed"}
        finally:
            backend.close()
