"""The PostgreSQL server the tests use (``$ENTROPIC_MCP_TEST_POSTGRES_DSN``), and a fresh schema per
test; see ``entropic_mcp_postgres.testing`` for the skip-or-fail-in-CI rule."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from entropic_mcp_postgres.testing import fresh_schema, test_dsn


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    return test_dsn()


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    with fresh_schema(pg_dsn) as schema:
        yield schema


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
