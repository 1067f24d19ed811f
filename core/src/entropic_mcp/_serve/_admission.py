"""Connections before authentication: a request head must arrive in time, and one client cannot
hold more than a few connections that have not sent one.

uvicorn times out idle keep-alive connections, but not a request whose head never finishes: a
client sending one header byte at a time (a slowloris) holds its socket forever, and about a
thousand of them used every descriptor of the process, locking every client out before the
bearer token was ever read. Here each HTTP connection is admitted by an ``Admission``: from its
first byte (or from the connection itself) the head must be complete within
``header_timeout_seconds`` and the body within ``body_timeout_seconds`` after it; and a client
address with more than ``max_pending_per_client`` connections still waiting for a head has its
oldest one closed once that one has waited ``PENDING_GRACE_SECONDS``, and the server with more
than ``max_pending_connections`` of them closes the oldest of the address holding the most — a
client whose request is complete is never counted, so a flood only ever evicts its own sockets.

The grace is for bursts: fifty clients of one process (or every client behind one load balancer,
which all share its address) connect at once, and their heads arrive a few milliseconds apart;
closing the oldest at once dropped 34 of 50 such connections before their first byte. A slowloris
holds its sockets for many seconds, so it still meets the cap.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from .._config import ServeConfig

#: How long a client's oldest waiting connection is spared when the client goes over its cap.
PENDING_GRACE_SECONDS = 1.0


class Admission:
    """The connections still waiting for a request head, oldest first, overall and per client.

    ``limits``: the ``[serve]`` settings (``header_timeout_seconds``, ``body_timeout_seconds``,
    ``max_pending_per_client``, ``max_pending_connections``).
    """

    def __init__(self, limits: ServeConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._pending: dict[Any, str] = {}
        #: Per client address, its waiting connections (oldest first) and when each was admitted.
        self._by_client: dict[str, dict[Any, float]] = {}
        self.evicted = 0

    def admit(self, connection: Any, client: str) -> None:
        if connection in self._pending:
            return
        now = self._clock()
        self._pending[connection] = client
        mine = self._by_client.setdefault(client, {})
        mine[connection] = now
        if len(mine) > self.limits.max_pending_per_client:
            oldest, since = next(iter(mine.items()))
            if now - since >= PENDING_GRACE_SECONDS:
                self._evict(oldest)
        if len(self._pending) > self.limits.max_pending_connections:
            crowded = max(self._by_client.values(), key=len)
            self._evict(next(iter(crowded)))

    def release(self, connection: Any) -> None:
        client = self._pending.pop(connection, None)
        if client is None:
            return
        mine = self._by_client.get(client)
        if mine is not None:
            mine.pop(connection, None)
            if not mine:
                del self._by_client[client]

    def _evict(self, connection: Any) -> None:
        self.release(connection)
        self.evicted += 1
        connection.drop()

    def __len__(self) -> int:
        return len(self._pending)


def protocol_class(admission: Admission) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol, with request heads and bodies timed and admitted."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    limits = admission.limits

    class AdmittedProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_head()

        def _await_head(self) -> None:
            if self._head_timer is not None or self.transport.is_closing():
                return
            self._head_timer = self.loop.call_later(limits.header_timeout_seconds, self.drop)
            admission.admit(self, self.client[0] if self.client else "?")

        def _cancel(self, timer: asyncio.TimerHandle | None) -> None:
            if timer is not None:
                timer.cancel()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._await_head()  # the next request on a kept-alive connection: timed again

        def on_headers_complete(self) -> None:
            self._cancel(self._head_timer)
            self._head_timer = None
            admission.release(self)
            self._cancel(self._body_timer)
            self._body_timer = self.loop.call_later(limits.body_timeout_seconds, self.drop)
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._cancel(self._body_timer)
            self._body_timer = None
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel(self._head_timer)
            self._cancel(self._body_timer)
            self._head_timer = self._body_timer = None
            admission.release(self)
            super().connection_lost(exc)

        def drop(self) -> None:
            """Close a connection that was too slow, or evicted by a newer one of its client."""
            admission.release(self)
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()

    return AdmittedProtocol
