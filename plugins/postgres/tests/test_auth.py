"""Credentials against a server that checks them (a throwaway cluster with scram-sha-256)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from entropic_mcp_postgres import PostgresAuthError, PostgresBackend
from entropic_mcp_postgres.testing import no_server
from pg_cluster import Cluster, make_cluster

PASSWORD = "right-Pa55-word"


@pytest.fixture(scope="module")
def guarded() -> Iterator[Cluster]:
    made = make_cluster(password=PASSWORD)
    if isinstance(made, str):
        no_server(f"the credentials tests need a PostgreSQL cluster of their own: {made}")
    assert isinstance(made, Cluster)
    try:
        yield made
    finally:
        made.remove()


def _dsn(cluster: Cluster, password: str | None) -> str:
    secret = f":{password}" if password is not None else ""
    return f"postgresql://postgres{secret}@127.0.0.1:{cluster.port}/postgres"


def test_the_right_password_opens_the_store(guarded: Cluster) -> None:
    store = PostgresBackend(_dsn(guarded, PASSWORD), connect_timeout=5)
    try:
        root = store.create_conversation("behind a password")
        assert store.load_conversation(root)["conversation"]["title"] == "behind a password"
    finally:
        store.close()


@pytest.mark.parametrize(
    "password",
    ["wrong-one", PASSWORD.upper(), PASSWORD[:-1], "", None],
    ids=["wrong", "case", "prefix", "empty", "missing"],
)
def test_any_other_password_is_a_login_error_that_does_not_echo_it(
    guarded: Cluster, password: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", "/nonexistent/pgpass")
    with pytest.raises(PostgresAuthError, match=r"refused the login.*check the user and password") as caught:
        PostgresBackend(_dsn(guarded, password), connect_timeout=5)
    if password:
        assert password not in str(caught.value)
    assert PASSWORD not in str(caught.value)
