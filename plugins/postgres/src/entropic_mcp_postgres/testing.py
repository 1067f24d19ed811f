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
from collections.abc import Iterator, Sequence
from typing import Any

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


class PartitionProxy:
    """A TCP proxy to the test server that can be frozen: a network partition on demand.

    Frozen, it forwards nothing and closes nothing — what a dropped link looks like to both ends
    (sent bytes wait unanswered, connections stay open); connections accepted meanwhile are
    forwarded once it thaws. ``dsn`` is the test server's DSN pointed at the proxy.
    """

    def __init__(self, dsn: str) -> None:
        import socket
        import threading

        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = conninfo_to_dict(dsn)
        self._upstream = (str(parts.get("host") or "127.0.0.1"), int(parts.get("port") or 5432))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        port = self._listener.getsockname()[1]
        self.dsn = make_conninfo(dsn, host="127.0.0.1", port=str(port))
        self.frozen = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[Any] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def freeze(self) -> None:
        self.frozen.set()

    def thaw(self) -> None:
        self.frozen.clear()

    def close(self) -> None:
        self._closed.set()
        self.frozen.clear()
        self._listener.close()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> PartitionProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        import socket
        import threading

        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            while self.frozen.is_set() and not self._closed.is_set():
                self._closed.wait(0.05)
            try:
                server = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            for source, target in ((client, server), (server, client)):
                thread = threading.Thread(target=self._pump, args=(source, target), daemon=True)
                thread.start()

    def _pump(self, source: Any, target: Any) -> None:
        import select

        try:
            while not self._closed.is_set():
                if self.frozen.is_set():
                    self._closed.wait(0.02)
                    continue
                ready, _, _ = select.select([source], [], [], 0.05)
                if not ready or self.frozen.is_set():
                    continue
                data = source.recv(65536)
                if not data:
                    break
                target.sendall(data)
        except (OSError, ValueError):  # the other pump, or close(), closed the socket
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.close()


#: docs/deployment.md's haproxy configuration (a test compares them); ``{...}`` filled by ``haproxy_recipe``.
HAPROXY_RECIPE = """\
global
    maxconn 1024
{global_log}defaults
    mode http
{defaults_log}    timeout connect 2s
    timeout check 5s
    timeout client 120s
    timeout server 120s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response
    option http-server-close
    http-reuse never
    option http-buffer-request

frontend mcp
    bind 127.0.0.1:{port}
    default_backend workers

backend workers
{balance}    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    default-server inter {check_every} fall 3 rise 1
{servers}"""


def haproxy_recipe(
    port: int,
    workers: Sequence[int],
    *,
    balance: str = "balance roundrobin",
    check_every: str = "300ms",
    log: bool = False,
) -> str:
    """docs/deployment.md's haproxy configuration for serve workers on one store: round robin
    without affinity, ``/readyz`` checks with a ``Host`` header, retries only of requests a
    stopping worker never started. For the integration tests and the benchmarks.

    Args:
        port: where haproxy listens (on 127.0.0.1).
        workers: the workers' ports on 127.0.0.1.
        balance: the balance line(s) (``"balance hdr(X-Conversation)\\nhash-type consistent"``:
            affinity by a header instead).
        check_every: the health checks' interval.
        log: log each request to haproxy's stdout.
    """
    return HAPROXY_RECIPE.format(
        global_log="    log stdout format raw local0\n" if log else "",
        defaults_log="    log global\n    option httplog\n" if log else "",
        port=port,
        balance="".join(f"    {line.strip()}\n" for line in balance.splitlines()),
        check_every=check_every,
        servers="".join(f"    server w{n} 127.0.0.1:{worker} check\n" for n, worker in enumerate(workers)),
    )
