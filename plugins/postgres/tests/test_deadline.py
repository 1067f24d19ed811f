"""A network partition to the server: store calls fail at their deadline, then at once, and
work again when the network comes back (``[storage] options.deadline``; see ``_deadline.py``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from entropic_mcp.storage import StorageError
from entropic_mcp_postgres import PostgresBackend, PostgresUnavailable
from entropic_mcp_postgres.testing import PartitionProxy

#: Far above every deadline here: a call still running then is a hang, not a slow answer.
HANG = 60.0


def answers_again(load: Callable[[], object], expected: object) -> None:
    """Poll ``load`` until it gives ``expected``: the store recovers after a partition, within HANG."""
    deadline = time.monotonic() + HANG
    while True:
        try:
            assert load() == expected
            return
        except StorageError:
            assert time.monotonic() < deadline, "the store did not recover after the partition"
            time.sleep(0.1)


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[PartitionProxy]:
    with PartitionProxy(pg_dsn) as made:
        yield made


@pytest.fixture
def behind_proxy(proxy: PartitionProxy, pg_schema: str) -> Iterator[PostgresBackend]:
    backend = PostgresBackend(proxy.dsn, schema=pg_schema, deadline=3.0, pool_min=2, pool_max=4, connect_timeout=3)
    try:
        yield backend
    finally:
        proxy.thaw()
        backend.close()


def _in_thread(operation: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``operation`` in a thread; the list gets ("ok", value) or ("error", exception)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("ok", operation()))
        except BaseException as exc:
            outcome.append(("error", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_call_into_a_partition_fails_at_its_deadline_with_what_to_do(
    behind_proxy: PostgresBackend, proxy: PartitionProxy
) -> None:
    backend = behind_proxy
    assert backend.save_state("t", "k", {"n": 1}, 0) == 1
    proxy.freeze()
    thread, outcome = _in_thread(lambda: backend.load_state("t", "k"))
    thread.join(HANG)
    assert not thread.is_alive(), "load_state hung in the partition"
    kind, error = outcome[0]
    assert kind == "error" and isinstance(error, PostgresUnavailable)
    assert "did not answer within the 3 s deadline" in str(error)
    assert "options.deadline" in str(error)


def test_while_stalled_calls_fail_at_once_and_work_again_after_the_partition(
    behind_proxy: PostgresBackend, proxy: PartitionProxy
) -> None:
    backend = behind_proxy
    backend.save_state("t", "k", "before", 0)
    proxy.freeze()
    first, _ = _in_thread(lambda: backend.load_state("t", "k"))
    first.join(HANG)
    assert not first.is_alive()
    # The store is known stalled: the next calls fail without waiting for the network.
    for operation in (lambda: backend.load_state("t", "k"), lambda: backend.create_conversation("during")):
        thread, outcome = _in_thread(operation)
        thread.join(HANG)
        assert not thread.is_alive()
        assert outcome[0][0] == "error"
        assert "has not answered for" in str(outcome[0][1]) and "nothing was sent" in str(outcome[0][1])
    proxy.thaw()
    deadline = time.monotonic() + HANG
    while True:
        try:
            assert backend.load_state("t", "k") == ("before", 1)
            break
        except StorageError:
            assert time.monotonic() < deadline, "the store did not recover after the partition"
            time.sleep(0.1)


def test_operations_in_flight_when_the_store_stalls_fail_with_it(
    behind_proxy: PostgresBackend, proxy: PartitionProxy
) -> None:
    """The second operation started later than the first: it fails when the first passes its deadline."""
    backend = behind_proxy
    backend.save_state("t", "k", 1, 0)
    proxy.freeze()
    first, first_outcome = _in_thread(lambda: backend.load_state("t", "k"))
    time.sleep(0.5)
    second, second_outcome = _in_thread(lambda: backend.load_state("t", "k"))
    first.join(HANG)
    second.join(HANG)
    assert not first.is_alive() and not second.is_alive()
    assert first_outcome[0][0] == second_outcome[0][0] == "error"


def test_the_deadline_is_a_storage_option(tmp_path: Path) -> None:
    from entropic_mcp import Config, ConfigError
    from entropic_mcp.storage import StorageConfig

    def config(**options: Any) -> Config:
        return Config(
            root=tmp_path,
            storage=StorageConfig(backend="postgres", options={"dsn": "postgresql://x@127.0.0.1:1/x", **options}),
        )

    with pytest.raises(ConfigError, match="options.deadline: expected a positive float"):
        PostgresBackend.from_config(config(deadline=0))
    with pytest.raises(StorageError, match="cannot reach"):
        PostgresBackend.from_config(config(deadline=2.5, connect_timeout=1))


def test_no_connection_within_the_deadline_stalls_the_store_as_a_cut_does(
    proxy: PartitionProxy, pg_schema: str
) -> None:
    """The partition meets the pool opening a connection, not a statement in flight."""
    backend = PostgresBackend(proxy.dsn, schema=pg_schema, deadline=2.0, pool_min=1, pool_max=2, connect_timeout=30)
    held: list[Any] = []
    try:
        backend.save_state("t", "k", "before", 0)
        # Leave the backend no open connection to reuse: the next operation must open one.
        backend._lender.return_all()
        held = [backend._pool.getconn(timeout=HANG) for _ in range(backend._pool.get_stats()["pool_size"])]
        dropped = held.pop()
        dropped.close()
        backend._pool.putconn(dropped)  # discarded: the pool is one below its size limit
        assert backend._pool.get_stats().get("pool_available", 0) == 0
        proxy.freeze()  # the new connection now waits for an answer that never comes
        first, outcome = _in_thread(lambda: backend.load_state("t", "k"))
        first.join(HANG)
        assert not first.is_alive()
        assert outcome[0][0] == "error" and "no connection to PostgreSQL" in str(outcome[0][1]), outcome
        # Marked stalled: the next call fails at once instead of waiting for a connection again.
        second, outcome = _in_thread(lambda: backend.load_state("t", "k"))
        second.join(HANG)
        assert not second.is_alive() and outcome[0][0] == "error"
        assert "has not answered for" in str(outcome[0][1]), outcome[0][1]
        proxy.thaw()
        for conn in held:
            backend._pool.putconn(conn)
        held = []
        answers_again(lambda: backend.load_state("t", "k"), ("before", 1))
    finally:
        proxy.thaw()
        for conn in held:
            backend._pool.putconn(conn)
        backend.close()


def test_the_store_is_marked_stalled_before_the_late_operation_is_woken() -> None:
    """An operation cut at its deadline whose caller retries at once finds the store stalled: the
    watchdog says so before it cuts (the other order let the retry wait out a deadline of its own)."""
    from entropic_mcp_postgres._deadline import Watchdog

    class Conn:
        class pgconn:
            socket = -1  # not a socket: the cut's shutdown fails quietly, as on a closed connection

    seen: list[bool] = []
    called = threading.Event()
    watchdog = Watchdog(lambda: (seen.append(entry[2]), called.set()))
    entry = watchdog.enter(Conn(), 0.0)  # type: ignore[arg-type]
    try:
        assert called.wait(HANG)
        deadline = time.monotonic() + HANG
        while not entry[2]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        watchdog.stop()
    assert seen == [False]  # not yet cut when the store was marked stalled
