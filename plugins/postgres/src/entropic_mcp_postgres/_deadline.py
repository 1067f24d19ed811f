"""Store operations bounded by a deadline, and failing fast while the server does not answer.

A network partition does not break a TCP connection: a statement sent into it waits for an
answer that never comes (the kernel retransmits for about 15 minutes), and ``statement_timeout``
cannot help, since the server never got the statement. So the client keeps the clock: a
``Watchdog`` thread shuts down the socket of any operation past its deadline, which wakes the
blocked read at once with an error. The first such cut marks the store *stalled*: every other
operation in flight is cut too (they wait on the same silent network), new ones fail without
touching the network, and one probe a while asks the server until it answers again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

log = logging.getLogger("entropic_mcp.storage.postgres")


class DeadlinePassed(psycopg.OperationalError):
    """The operation's connection was cut at its deadline (the server did not answer in time)."""


class Watchdog:
    """Cuts the connections of operations that outlive their deadline.

    One thread for the whole store, ticking every ``TICK`` seconds: an operation only enters and
    leaves a dict (a timer per operation would cost more than a warm statement does).
    """

    TICK = 0.05

    def __init__(self, on_late: Callable[[], None]) -> None:
        self._on_late = on_late
        self._lock = threading.Lock()
        self._inflight: dict[int, list[Any]] = {}
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def enter(self, conn: psycopg.BaseConnection[Any], seconds: float) -> list[Any]:
        """Watch ``conn`` for ``seconds``; the entry's last field turns True once it was cut."""
        entry = [time.monotonic() + seconds, conn, False]
        self._inflight[id(entry)] = entry  # one dict store: atomic, no lock on the hot path
        if self._thread is None:
            with self._lock:
                if self._thread is not None:
                    return entry
                self._thread = threading.Thread(target=self._run, name="entropic-mcp postgres deadline", daemon=True)
                self._thread.start()
        return entry

    def leave(self, entry: list[Any]) -> None:
        self._inflight.pop(id(entry), None)

    def cut_all(self) -> None:
        """Cut every operation in flight now."""
        for entry in _values(self._inflight):
            _cut(entry)

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(self.TICK):
            now = time.monotonic()
            # list() of a dict other threads change: taken again on "changed size during iteration".
            late = [entry for entry in _values(self._inflight) if entry[0] <= now and not entry[2]]
            if not late:
                continue
            # The store is marked stalled before a cut wakes its operation: a caller that retries
            # as soon as its error arrives must find the mark, not a fresh wait on the silent network.
            try:
                self._on_late()
            except Exception:  # the watchdog must keep watching whatever the callback does
                log.exception("the deadline callback failed")
            for entry in late:
                _cut(entry)


def _values(inflight: dict[int, list[Any]]) -> list[list[Any]]:
    while True:
        try:
            return list(inflight.values())
        except RuntimeError:
            continue


def _cut(entry: list[Any]) -> None:
    if entry[2]:
        return
    entry[2] = True
    try:
        fd = entry[1].pgconn.socket
    except psycopg.Error:  # already closed
        return
    # shutdown() acts on the socket itself, so a duplicate descriptor reaches the one psycopg
    # waits on, without closing a descriptor libpq still owns.
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class Stall:
    """Whether the store is stalled, since when, and the probe that ends the stall."""

    #: Seconds between probes while stalled.
    PROBE_EVERY = 0.5

    def __init__(self, probe: Callable[[], None], where: str) -> None:
        self._probe = probe
        self._where = where
        self._lock = threading.Lock()
        self.since: float | None = None
        self._closed = threading.Event()

    def begin(self) -> bool:
        """Mark the store stalled (probing until it answers); False when it already was."""
        with self._lock:
            if self.since is not None or self._closed.is_set():
                return False
            self.since = time.monotonic()
        threading.Thread(target=self._until_answered, name="entropic-mcp postgres probe", daemon=True).start()
        return True

    def seconds(self) -> float | None:
        """Seconds since the store stalled, or None when it answers."""
        since = self.since
        return None if since is None else time.monotonic() - since

    def close(self) -> None:
        self._closed.set()

    def _until_answered(self) -> None:
        while not self._closed.wait(self.PROBE_EVERY):
            try:
                self._probe()
            except Exception as exc:
                log.debug("PostgreSQL at %s still does not answer: %s", self._where, exc)
                continue
            with self._lock:
                stalled, self.since = self.seconds(), None
            log.warning("PostgreSQL at %s answers again after %.1f s; store calls resume", self._where, stalled or 0)
            return
