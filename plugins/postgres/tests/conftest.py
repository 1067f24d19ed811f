"""The PostgreSQL server the tests use (``$ENTROPIC_MCP_TEST_POSTGRES_DSN``), and a fresh schema per
test; see ``entropic_mcp_postgres.testing`` for the skip-or-fail-in-CI rule."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest
from entropic_mcp_postgres.testing import fresh_schema, test_dsn
from psycopg import sql


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    return test_dsn()


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    with fresh_schema(pg_dsn) as schema:
        yield schema


def _opener(dsn: str, schema: str) -> Iterator[Callable[..., object]]:
    """Yields a function opening handles on ``schema``; closes whatever is still open at the end."""
    from entropic_mcp_postgres import PostgresBackend

    opened: list[PostgresBackend] = []

    def open_backend(**options: object) -> PostgresBackend:
        backend = PostgresBackend(dsn, schema=schema, **options)  # type: ignore[arg-type]
        opened.append(backend)
        return backend

    yield open_backend
    for backend in opened:
        backend.close()


@pytest.fixture
def open_pg(pg_dsn: str, pg_schema: str) -> Iterator[Callable[..., object]]:
    """Opens handles on this test's store; closes whatever is still open at the end."""
    yield from _opener(pg_dsn, pg_schema)


@pytest.fixture(scope="module")
def shared_schema(pg_dsn: str) -> Iterator[str]:
    """One migrated schema for a module's tests, emptied before each (see ``open_empty_pg``)."""
    from entropic_mcp_postgres import PostgresBackend

    with fresh_schema(pg_dsn, "m") as schema:
        PostgresBackend(pg_dsn, schema=schema).close()
        yield schema


@pytest.fixture
def open_empty_pg(pg_dsn: str, shared_schema: str) -> Iterator[Callable[..., object]]:
    """Like ``open_pg`` on the module's schema, emptied first — migrating a schema per test costs
    more than the test."""
    # DELETE, not TRUNCATE: a few rows go faster than new files for every table and index.
    with psycopg.connect(pg_dsn) as conn:
        # the rest cascades; index_queue and states have no foreign key (migrations 2 and 3)
        for table in ("conversations", "tool_calls", "search_terms", "index_queue", "states"):
            conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(shared_schema, table)))
    yield from _opener(pg_dsn, shared_schema)
