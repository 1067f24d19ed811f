"""The PostgreSQL server the tests use, and a fresh schema per test.

The server comes from ``ENTROPIC_MCP_TEST_POSTGRES_DSN``. Without it the tests skip with a one-line
reason — except in CI (``CI=true``), where a skipped PostgreSQL test would hide that the backend
was never exercised, so they fail instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql

DSN_VARIABLE = "ENTROPIC_MCP_TEST_POSTGRES_DSN"


def _no_server(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must run the PostgreSQL tests against a real server", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The test server's DSN (``$ENTROPIC_MCP_TEST_POSTGRES_DSN``), checked to answer."""
    dsn = os.environ.get(DSN_VARIABLE, "").strip()
    if not dsn:
        _no_server(f"{DSN_VARIABLE} is not set (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        pytest.fail(f"{DSN_VARIABLE}={dsn} does not answer: {exc}", pytrace=False)
    return dsn


def drop_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A schema name no other test or run uses; dropped afterwards."""
    schema = f"t_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    yield schema
    drop_schema(pg_dsn, schema)


@pytest.fixture
def open_pg(pg_dsn: str, pg_schema: str) -> Iterator[Callable[..., object]]:
    """Opens handles on this test's store; closes whatever is still open at the end."""
    from entropic_mcp_postgres import PostgresBackend

    opened: list[PostgresBackend] = []

    def open_backend(**options: object) -> PostgresBackend:
        backend = PostgresBackend(pg_dsn, schema=pg_schema, **options)  # type: ignore[arg-type]
        opened.append(backend)
        return backend

    yield open_backend
    for backend in opened:
        backend.close()
