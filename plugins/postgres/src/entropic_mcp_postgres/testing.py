"""Helpers for tests that need a real PostgreSQL server (this plugin's and the integration tests).

The server comes from ``ENTROPIC_MCP_TEST_POSTGRES_DSN``. Without it such tests skip with a
one-line reason naming the variable — except in CI (``CI=true``), where a skipped PostgreSQL test
would hide that the backend was never exercised, so they fail instead. Each test gets a schema of
its own, so runs (and parallel runs) never collide.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

DSN_VARIABLE = "ENTROPIC_MCP_TEST_POSTGRES_DSN"


def no_server(reason: str) -> None:
    """Skip the test, or fail it under ``CI=true``."""
    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must run the PostgreSQL tests against a real server", pytrace=False)
    pytest.skip(reason)


def test_dsn() -> str:
    """The test server's DSN, checked to answer; skips (or fails in CI) without one."""
    import psycopg
    import pytest

    dsn = os.environ.get(DSN_VARIABLE, "").strip()
    if not dsn:
        no_server(f"{DSN_VARIABLE} is not set (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        pytest.fail(f"{DSN_VARIABLE}={dsn} does not answer: {exc}", pytrace=False)
    return dsn


test_dsn.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextlib.contextmanager
def fresh_schema(dsn: str, prefix: str = "t") -> Iterator[str]:
    """A schema name no other test or run uses; dropped afterwards."""
    schema = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    try:
        yield schema
    finally:
        drop_schema(dsn, schema)
