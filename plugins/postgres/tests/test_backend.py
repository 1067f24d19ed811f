"""Opening the store: configuration, migrations, and the errors a user can act on."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from pathlib import Path

import orjson
import psycopg
import pytest
from entropic_mcp import ConfigError, config_from_dict
from entropic_mcp._plugins import Plugins
from entropic_mcp._storage import open_storage
from entropic_mcp.storage import CheckedStorage, StorageError
from entropic_mcp_postgres import PostgresAuthError, PostgresBackend, PostgresSchemaTooNew, PostgresUnavailable
from entropic_mcp_postgres._migrations import LATEST, MIGRATIONS
from entropic_mcp_postgres.testing import drop_schema
from psycopg import sql


def _config(tmp_path: Path, **options: object):
    return config_from_dict({"storage": {"backend": "postgres", "options": options}}, root=tmp_path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _with(dsn: str, **parts: str) -> str:
    conninfo = psycopg.conninfo.conninfo_to_dict(dsn)
    conninfo.update(parts)
    return psycopg.conninfo.make_conninfo(**conninfo)


# -- migrations ------------------------------------------------------------------------------------


def test_migrations_are_applied_once_and_recorded(pg_dsn: str, open_pg) -> None:
    first = open_pg()
    assert first.version == LATEST
    second = open_pg()  # a second process starting: nothing left to apply
    assert second.version == LATEST
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT version, name FROM {}.schema_migrations ORDER BY version").format(
                sql.Identifier(first.schema)
            )
        ).fetchall()
    assert rows == [(version, name) for version, name, _ in MIGRATIONS]


def test_workers_starting_together_migrate_once(pg_dsn: str, pg_schema: str) -> None:
    import threading

    opened: list[PostgresBackend] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(PostgresBackend(pg_dsn, schema=pg_schema))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == [] and len(opened) == 4
        opened[0].create_conversation("works")
        assert opened[3].stats()["conversations"] == 1
    finally:
        for backend in opened:
            backend.close()


def test_a_schema_from_a_newer_version_is_refused_and_left_alone(pg_dsn: str, open_pg, pg_schema: str) -> None:
    store = open_pg()
    root = store.create_conversation("keep me")
    store.close()
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.schema_migrations (version, name) VALUES (%s, 'from the future')").format(
                sql.Identifier(pg_schema)
            ),
            (LATEST + 1,),
        )
    with pytest.raises(PostgresSchemaTooNew, match=r"newer entropic-mcp-postgres.*Upgrade") as caught:
        open_pg()
    assert isinstance(caught.value, StorageError)
    with psycopg.connect(pg_dsn) as conn:
        count = conn.execute(sql.SQL("SELECT count(*) FROM {}.conversations").format(sql.Identifier(pg_schema)))
        assert count.fetchone() == (1,)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            sql.SQL("DELETE FROM {}.schema_migrations WHERE version > %s").format(sql.Identifier(pg_schema)), (LATEST,)
        )
    assert open_pg().load_conversation(root)["conversation"]["title"] == "keep me"


def test_a_schema_at_migration_2_gains_plugin_state_at_open(pg_dsn: str, open_pg, pg_schema: str) -> None:
    store = open_pg()
    root = store.create_conversation("kept")
    store.close()
    with psycopg.connect(pg_dsn) as conn:  # as migration 2 left it
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(pg_schema, "states")))
        conn.execute(sql.SQL("DELETE FROM {}.schema_migrations WHERE version = 3").format(sql.Identifier(pg_schema)))
    reopened = open_pg()
    assert reopened.version == LATEST == 3
    with psycopg.connect(pg_dsn) as conn:
        versions = conn.execute(
            sql.SQL("SELECT version FROM {}.schema_migrations ORDER BY version").format(sql.Identifier(pg_schema))
        ).fetchall()
    assert versions == [(1,), (2,), (3,)]
    assert reopened.load_conversation(root)["conversation"]["title"] == "kept"
    assert reopened.load_state("entropic.todo", root) == (None, 0)
    assert reopened.save_state("entropic.todo", root, {"items": ["nul \x00 kept"]}, 0) == 1
    assert open_pg().load_state("entropic.todo", root) == ({"items": ["nul \x00 kept"]}, 1)


def test_stores_in_different_schemas_do_not_see_each_other(pg_dsn: str, open_pg) -> None:
    other_schema = f"t_other_{uuid.uuid4().hex[:10]}"
    try:
        mine = open_pg()
        other = PostgresBackend(pg_dsn, schema=other_schema)
        try:
            mine.create_conversation("mine")
            assert other.stats()["conversations"] == 0
        finally:
            other.close()
    finally:
        drop_schema(pg_dsn, other_schema)


# -- errors a user can act on ----------------------------------------------------------------------


def test_an_unreachable_server_is_a_clear_error(pg_dsn: str) -> None:
    port = _free_port()
    with pytest.raises(PostgresUnavailable, match=rf"cannot reach PostgreSQL at .*127\.0\.0\.1:{port}.*server running"):
        PostgresBackend(f"postgresql://postgres@127.0.0.1:{port}/test", connect_timeout=2)


def test_an_unknown_role_is_a_login_error(pg_dsn: str) -> None:
    role = f"nobody_{uuid.uuid4().hex[:8]}"
    with pytest.raises(PostgresAuthError, match=rf"refused the login.*{role}.*check the user and password"):
        PostgresBackend(_with(pg_dsn, user=role))


def test_a_wrong_password_is_a_login_error_without_the_password(pg_dsn: str) -> None:
    role = f"pw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'right-one'").format(sql.Identifier(role)))
        rules = conn.execute("SELECT type, auth_method FROM pg_hba_file_rules WHERE type = 'host'").fetchall()
    try:
        expected: type[StorageError] = PostgresAuthError
        if rules and all(method == "trust" for _, method in rules):
            # A trust-auth server lets any password in; the login then fails for want of rights to
            # create the schema, which must be just as clear.
            expected = StorageError
        with pytest.raises(expected) as caught:
            PostgresBackend(_with(pg_dsn, user=role, password="wrong-one"))
        assert "wrong-one" not in str(caught.value)
        if expected is StorageError:
            assert f"CREATE SCHEMA entropic_mcp AUTHORIZATION {role}" in str(caught.value)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_missing_database_says_to_create_it(pg_dsn: str) -> None:
    name = f"missing_{uuid.uuid4().hex[:8]}"
    with pytest.raises(PostgresAuthError, match=rf"{name}.*does not exist.*createdb"):
        PostgresBackend(_with(pg_dsn, dbname=name))


def test_the_password_never_appears_in_messages(pg_dsn: str) -> None:
    port = _free_port()
    with pytest.raises(PostgresUnavailable) as caught:
        PostgresBackend(f"postgresql://postgres:s3cret-pass@127.0.0.1:{port}/test", connect_timeout=1)
    assert "s3cret-pass" not in str(caught.value)


def test_operations_after_close_raise(open_pg) -> None:
    store = open_pg()
    store.close()
    for operation in (
        lambda: store.create_conversation("x"),
        lambda: store.search_delegations("x"),
        lambda: store.stats(),
    ):
        with pytest.raises(StorageError, match="closed"):
            operation()


# -- configuration ---------------------------------------------------------------------------------


def test_the_hook_offers_the_backend_and_the_dsn_comes_from_config(
    tmp_path: Path, pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ENTROPIC_MCP_POSTGRES_DSN", raising=False)
    plugins = Plugins()
    plugins.load_entry_points(["postgres"])
    store = open_storage(_config(tmp_path, dsn=pg_dsn, schema=pg_schema), plugins)
    try:
        assert isinstance(store, CheckedStorage) and isinstance(store.backend, PostgresBackend)
        assert store.schema == pg_schema
        store.create_conversation("through the hook")
    finally:
        assert store is not None
        store.close()


def test_the_dsn_falls_back_to_the_environment(
    tmp_path: Path, pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENTROPIC_MCP_POSTGRES_DSN", pg_dsn)
    store = PostgresBackend.from_config(_config(tmp_path, schema=pg_schema))
    store.close()
    # a DSN in the config wins over the environment
    monkeypatch.setenv("ENTROPIC_MCP_POSTGRES_DSN", f"postgresql://postgres@127.0.0.1:{_free_port()}/test")
    store = PostgresBackend.from_config(_config(tmp_path, dsn=pg_dsn, schema=pg_schema))
    store.close()


def test_no_dsn_anywhere_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENTROPIC_MCP_POSTGRES_DSN", raising=False)
    with pytest.raises(ConfigError, match=r"options.dsn.*ENTROPIC_MCP_POSTGRES_DSN"):
        PostgresBackend.from_config(_config(tmp_path))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"dsn": ""}, "options.dsn"),
        ({"dsn": 5}, "options.dsn"),
        ({"pool_max": 0}, "options.pool_max"),
        ({"pool_max": 2.5}, "options.pool_max"),
        ({"pool_min": -1}, "options.pool_min"),
        ({"connect_timeout": "5"}, "options.connect_timeout"),
        ({"audit_batch": True}, "options.audit_batch"),
        ({"path": "x"}, "unknown option for the postgres backend"),
        ({"schema": "bad-name; DROP TABLE x"}, "options.schema"),
        ({"schema": "1abc"}, "options.schema"),
        ({"schema": "a" * 64}, "options.schema"),
        ({"dsn": "host=127.0.0.1 port"}, "options.dsn"),
    ],
)
def test_bad_options_are_config_errors(
    tmp_path: Path, pg_dsn: str, options: dict[str, object], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENTROPIC_MCP_POSTGRES_DSN", pg_dsn)
    with pytest.raises(ConfigError, match=message):
        PostgresBackend.from_config(_config(tmp_path, **options))


# -- the audit trail -------------------------------------------------------------------------------


def test_audit_records_are_copied_in_batches_and_on_close(pg_dsn: str, pg_schema: str, open_pg) -> None:
    import time

    from entropic_mcp.storage import ToolCallRecord

    store = open_pg(audit_batch=100, audit_flush_seconds=3600)

    def written() -> int:
        with psycopg.connect(pg_dsn) as conn:
            row = conn.execute(sql.SQL("SELECT count(*) FROM {}.tool_calls").format(sql.Identifier(pg_schema)))
            return int(row.fetchone()[0])  # type: ignore[index]

    for i in range(250):
        store.record_tool_call(ToolCallRecord(tool="demo.echo", kind="success", args={"i": i, "blob": b"\x00"}))
    for _ in range(200):  # bounded wait for the background COPYs of the full batches
        if written() > 150:
            break
        time.sleep(0.05)
    assert 150 < written() <= 250  # fewer than a batch may wait for the timer, a stats() or the close
    store.close()
    assert written() == 250
    with psycopg.connect(pg_dsn) as conn:
        records = conn.execute(
            sql.SQL("SELECT record::text FROM {}.tool_calls ORDER BY seq").format(sql.Identifier(pg_schema))
        ).fetchall()
    first = orjson.loads(records[0][0])
    assert first["tool"] == "demo.echo" and first["args"] == {"i": 0, "blob": repr(b"\x00")}
    assert [orjson.loads(r[0])["args"]["i"] for r in records] == list(range(250))


# -- lending connections ---------------------------------------------------------------------------


def _backend_pids(pg_dsn: str) -> set[int]:
    """Server processes of the stores' connections (other tests' included: compare before and after)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'entropic-mcp' AND pid <> pg_backend_pid()"
        ).fetchall()
    return {row[0] for row in rows}


def test_operations_one_after_another_reuse_the_warm_connection(open_pg) -> None:
    store = open_pg(pool_min=3, pool_max=5)
    root = store.create_conversation("root")
    pids = set()
    for _ in range(20):
        store.create_conversation("x")
        with store._transaction("probe") as conn:
            pids.add(conn.info.backend_pid)
    store.scope_of(root)
    assert len(pids) == 1


def test_background_work_meanwhile_leaves_the_warm_connection_to_the_operations(open_pg) -> None:
    """The audit buffer and the indexer borrow while operations run (what made the test above
    fail under load): they get a pool connection, and the operations keep their warm one."""
    store = open_pg(pool_min=3, pool_max=5)
    store.create_conversation("root")
    held, release = threading.Event(), threading.Event()

    def background_work() -> None:
        with store._lender.background() as conn:
            conn.execute("SELECT 1")
            held.set()
            release.wait(30)

    pids = set()

    def operations() -> None:
        for _ in range(5):
            store.create_conversation("x")
            with store._transaction("probe") as conn:
                pids.add(conn.info.backend_pid)

    operations()
    worker = threading.Thread(target=background_work)
    worker.start()
    assert held.wait(30)
    operations()  # while the background work holds its connection
    release.set()
    worker.join(30)
    operations()  # after it gave its connection back
    store._indexer.drain()  # the indexer in this thread, between two operations
    operations()
    assert len(pids) == 1


def test_background_work_takes_the_warm_connection_when_the_pool_has_no_other(open_pg) -> None:
    store = open_pg(pool_min=1, pool_max=1, pool_timeout=3)
    with store._transaction("warm") as conn:
        warm = conn
    with store._lender.background() as conn:
        assert conn is warm
    with store._transaction("after") as conn:
        assert conn is warm


def test_a_connection_whose_operation_failed_goes_back_to_the_pool(open_pg) -> None:
    store = open_pg(pool_min=1, pool_max=2)
    with store._transaction("warm") as conn:
        first = conn
    with pytest.raises(StorageError), store._transaction("failing") as conn:
        assert conn is first
        conn.execute("SELECT 1/0")
    assert store._lender._kept == []
    # and one left inside an open transaction is never lent out as it is
    with store._transaction("open transaction") as conn:
        conn.execute("BEGIN")
        conn.execute("SELECT 1")
    assert store._lender._kept == []
    with store._transaction("after") as conn:
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_waiting_borrower_gets_the_returned_connection(open_pg) -> None:
    """With one connection in all, a thread waiting in the pool is handed the connection as soon as
    the operation holding it ends — it is not kept aside for a later borrower."""
    store = open_pg(pool_min=1, pool_max=1, pool_timeout=3)
    root = store.create_conversation("root")
    results: list[object] = []
    started = threading.Event()

    def other() -> None:
        started.set()
        try:
            results.append(store.create_conversation("from the other thread"))
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            results.append(exc)

    with store._transaction("holding the only connection") as conn:
        thread = threading.Thread(target=other)
        thread.start()
        started.wait()
        while not store._lender._waiting:  # the other thread is now waiting in the pool
            time.sleep(0.005)
        conn.execute("SELECT 1")
    thread.join(10)
    assert len(results) == 1 and isinstance(results[0], str), results
    assert store.load_conversation(results[0])["conversation"]["title"] == "from the other thread"
    assert store.scope_of(root) == "default"


def test_many_threads_on_few_connections_lose_nothing_and_never_time_out(open_pg) -> None:
    store = open_pg(pool_min=1, pool_max=2, pool_timeout=5)
    root = store.create_conversation("root")
    errors: list[BaseException] = []
    made: list[str] = []

    def work() -> None:
        try:
            for _ in range(15):
                delegation_id, _child = store.create_delegation(root, "lead", "coder", "task words here")
                store.complete_delegation(delegation_id, "completed", "done words")
                made.append(delegation_id)
        except BaseException as exc:  # pragma: no cover - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(made) == 90
    stored = {d["delegation_id"] for d in store.list_delegations(limit=200) if d["parent_id"] == root}
    assert stored == set(made)


def test_close_leaves_no_connection_open(pg_dsn: str, pg_schema: str) -> None:
    before = _backend_pids(pg_dsn)
    store = PostgresBackend(pg_dsn, schema=pg_schema, pool_min=2, pool_max=4)
    for _ in range(5):
        store.create_conversation("x")
    assert store._lender._kept  # the warm connection is kept aside between operations
    store.close()
    deadline = time.monotonic() + 10
    while _backend_pids(pg_dsn) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _backend_pids(pg_dsn) - before == set()


# -- heuristic state -------------------------------------------------------------------------------


def test_a_heuristic_namespace_commits_lax_in_its_own_transaction_only(pg_dsn: str, open_pg, monkeypatch) -> None:
    """pipeline.guards is written with synchronous_commit off for that statement's transaction;
    the pooled connection's next operation (a todo list, say) commits durably again."""
    from entropic_mcp.storage import HEURISTIC_NAMESPACES, StateConflict

    backend = open_pg(pool_min=1, pool_max=1)
    (namespace,) = HEURISTIC_NAMESPACES

    def setting() -> str:
        with backend._transaction("check") as conn:  # the one connection every save used
            return str(conn.execute("SHOW synchronous_commit").fetchone()[0])

    assert backend.save_state(namespace, "c", {"n": 1}, 0) == 1
    assert setting() == "on"
    assert backend.save_state(namespace, "c", {"n": 2}, 1) == 2
    assert setting() == "on"
    with pytest.raises(StateConflict):
        backend.save_state(namespace, "c", {"n": 3}, 1)
    assert backend.load_state(namespace, "c") == ({"n": 2}, 2)
    assert backend.save_state(namespace, "c", None, 2) == 0
    assert backend.load_state(namespace, "c") == (None, 0)
    assert setting() == "on"
    sent: list[str] = []
    execute = psycopg.Connection.execute

    def spy(self, query, *args, **kwargs):
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", spy)
    backend.save_state(namespace, "e", {}, 0)
    backend.save_state("entropic.todo", "e", {}, 0)
    monkeypatch.undo()
    assert ["synchronous_commit" in text for text in sent] == [True, False]
    # Inside the statement's transaction the commit is lax; a durable namespace's is not.
    statements = type(backend)._SAVE_STATEMENTS
    for durable, expected in ((False, "off"), (True, "on")):
        with psycopg.connect(pg_dsn) as conn, conn.transaction():
            conn.execute(sql.SQL("SET LOCAL search_path = {}").format(sql.Identifier(backend.schema)))
            params = {"namespace": namespace, "key": f"d{durable}", "value": "{}", "version": 0}
            assert conn.execute(statements[durable]["insert"], params).fetchone() == (1,)
            assert conn.execute("SHOW synchronous_commit").fetchone() == (expected,)
