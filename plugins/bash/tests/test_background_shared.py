"""Issue 27: every background-run test of test_background.py that drives one session, run again
with the runs on a store several workers share (postgres): the record, the output and the read
position go through the store, and each answer must be the one the in-memory runs give."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_background
from bash_helpers import make_manager
from test_background import Session

for _name, _test in vars(test_background).items():
    if _name.startswith("test_") and "session" in inspect.signature(_test).parameters:
        globals()[_name] = _test


@pytest.fixture
def session(root: Path) -> Iterator[Session]:
    testing = pytest.importorskip("entropic_mcp_postgres.testing", reason="the postgres plugin is not installed")
    from entropic_mcp_postgres import PostgresBackend

    dsn = testing.test_dsn()  # skips without ENTROPIC_MCP_TEST_POSTGRES_DSN
    with testing.fresh_schema(dsn, "bashone") as schema:
        store = PostgresBackend(dsn, schema=schema)
        manager, server = make_manager(
            root,
            permissions={"default": "allow"},
            bash={"max_background_runs": 3},
            storage={"backend": "postgres"},  # shares_state: the runs go through the store
            store=store,
        )
        yield Session(manager, server)
        manager.close()
        store.close()
