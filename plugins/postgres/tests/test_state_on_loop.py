"""``load_state_async``/``save_state_async``: the state operations awaited on the event loop (the
guard state of every call, P17) answer, fail and recover as the threads' ``load_state``/``save_state``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from entropic_mcp.storage import HEURISTIC_NAMESPACES, AsyncStateStore, StateConflict, StorageError
from entropic_mcp_postgres import PostgresBackend, PostgresUnavailable
from entropic_mcp_postgres.testing import PartitionProxy
from test_deadline import answers_again

#: Far above every deadline here: a call still running then is a hang, not a slow answer.
HANG = 60.0

#: (operation, arguments) in order: insert, update, a lost race, delete, delete nothing, the rules.
STEPS: list[tuple[str, tuple[Any, ...]]] = [
    ("load", ("t", "k")),
    ("save", ("t", "k", {"n": 1}, 0)),
    ("save", ("t", "k", {"n": 2}, 1)),
    ("save", ("t", "k", {"n": 3}, 1)),
    ("load", ("t", "k")),
    ("save", ("t", "k", None, 2)),
    ("save", ("t", "k", None, 0)),
    ("save", ("t", "k", {"again": True}, 0)),
    ("load", ("t", "k")),
    ("save", ("t", "", {}, 0)),
    ("load", ("t", "x" * 2000)),
]


def _answer(run: Any) -> Any:
    try:
        return run()
    except StateConflict as exc:
        return ("conflict", str(exc).split(":")[0])
    except StorageError as exc:
        return ("error", type(exc).__name__)


async def _awaited(backend: PostgresBackend) -> list[Any]:
    out = []
    for operation, args in STEPS:
        method = backend.load_state_async if operation == "load" else backend.save_state_async
        try:
            out.append(await method(*args))
        except StateConflict as exc:
            out.append(("conflict", str(exc).split(":")[0]))
        except StorageError as exc:
            out.append(("error", type(exc).__name__))
    return out


def test_on_the_loop_every_answer_and_error_is_the_threads_one(open_empty_pg) -> None:
    threads, loop = open_empty_pg(), open_empty_pg()
    assert isinstance(loop, AsyncStateStore)
    expected = [
        _answer(lambda o=operation, a=args: (threads.load_state if o == "load" else threads.save_state)(*a))
        for operation, args in STEPS
    ]
    assert ("conflict", "state t/k is at version 2, not 1") in expected and ("error", "StorageError") in expected
    threads.save_state("t", "k", None, 1)
    assert asyncio.run(_awaited(loop)) == expected
    # What one side saved, the other reads: the same rows, the same versions.
    assert threads.load_state("t", "k") == ({"again": True}, 1)
    assert asyncio.run(loop.save_state_async("t", "k", {"n": 9}, 1)) == 2
    assert threads.load_state("t", "k") == ({"n": 9}, 2)


def _backend_pids(dsn: str) -> set[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'entropic-mcp'").fetchall()
    return {row[0] for row in rows}


def test_one_connection_serves_loop_after_loop_and_close_leaves_none_open(pg_dsn: str, pg_schema: str) -> None:
    before = _backend_pids(pg_dsn)
    backend = PostgresBackend(pg_dsn, schema=pg_schema, pool_min=1, pool_max=4)

    async def pid() -> int:
        async with backend._on_loop("pid") as conn:
            return int((await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0])

    first = asyncio.run(pid())
    assert asyncio.run(pid()) == first  # a second event loop borrows the same connection
    assert asyncio.run(backend.save_state_async("t", "k", 1, 0)) == 1
    backend.close()
    deadline = time.monotonic() + 10
    while _backend_pids(pg_dsn) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _backend_pids(pg_dsn) - before == set()
    with pytest.raises(StorageError, match="closed"):
        asyncio.run(backend.load_state_async("t", "k"))


def test_concurrent_changes_on_the_loop_lose_nothing_on_few_connections(open_empty_pg) -> None:
    """40 tasks incrementing one document through the guarded save: every increment lands once,
    on no more connections than the limit."""
    backend = open_empty_pg(pool_max=3)

    async def increment() -> None:
        while True:
            value, version = await backend.load_state_async("t", "count")
            try:
                await backend.save_state_async("t", "count", (value or 0) + 1, version)
                return
            except StateConflict:
                await asyncio.sleep(0)

    async def run() -> None:
        await asyncio.gather(*(increment() for _ in range(40)))

    asyncio.run(run())
    assert backend.load_state("t", "count") == (40, 40)
    assert backend._loop_conns._open <= 3


def test_a_heuristic_namespace_commits_lax_on_the_loop_too(open_empty_pg, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = open_empty_pg()
    (namespace,) = HEURISTIC_NAMESPACES
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    def spy(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    async def run() -> None:
        await backend.save_state_async(namespace, "e", {}, 0)
        await backend.save_state_async("entropic.todo", "e", {}, 0)

    asyncio.run(backend.load_state_async("t", "warm"))  # the connection and its session settings
    monkeypatch.setattr(psycopg.AsyncConnection, "execute", spy)
    asyncio.run(run())
    monkeypatch.undo()
    assert ["synchronous_commit" in text for text in sent] == [True, False]


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[PartitionProxy]:
    with PartitionProxy(pg_dsn) as made:
        yield made


def test_a_partition_fails_the_loop_at_its_deadline_stalls_the_store_and_it_recovers(
    proxy: PartitionProxy, pg_schema: str
) -> None:
    backend = PostgresBackend(proxy.dsn, schema=pg_schema, deadline=2.0, pool_min=1, pool_max=2, connect_timeout=2)
    try:
        assert asyncio.run(backend.save_state_async("t", "k", "before", 0)) == 1
        proxy.freeze()
        started = time.monotonic()
        with pytest.raises(PostgresUnavailable, match="did not answer within the 2 s deadline"):
            asyncio.run(asyncio.wait_for(backend.load_state_async("t", "k"), HANG))
        # Cancelling the task instead had psycopg wait ~10 s more for the server to confirm the cancel.
        assert time.monotonic() - started < 2.0 + 4.0
        # Stalled now, for the threads' operations as for the loop's: they fail without waiting.
        with pytest.raises(PostgresUnavailable, match="has not answered for"):
            backend.load_state("t", "k")
        with pytest.raises(PostgresUnavailable, match="has not answered for"):
            asyncio.run(backend.load_state_async("t", "k"))
        proxy.thaw()
        answers_again(lambda: asyncio.run(backend.load_state_async("t", "k")), ("before", 1))
    finally:
        proxy.thaw()
        backend.close()


def test_a_killed_connection_fails_one_operation_and_the_next_reconnects(pg_dsn: str, open_empty_pg) -> None:
    backend = open_empty_pg()
    assert asyncio.run(backend.save_state_async("t", "k", 1, 0)) == 1

    async def pid() -> int:
        async with backend._on_loop("pid") as conn:
            return int((await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0])

    killed = asyncio.run(pid())
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (killed,))
    with pytest.raises(PostgresUnavailable, match="the connection to PostgreSQL"):
        asyncio.run(backend.load_state_async("t", "k"))
    assert asyncio.run(backend.load_state_async("t", "k")) == (1, 1)
    assert asyncio.run(pid()) != killed
