"""The search's word index, kept off the durable path of a completion.

A completion commits the delegation's row and one entry in ``index_queue`` (a one-column b-tree
table) — nothing more. Indexing its words (the GIN entries of ``delegation_words`` and new words
in ``search_terms``, about fifty index insertions) is done afterwards, in batches, by a thread of
the process that completed it, or by any other process's, or at the next start after a crash:
the queue is durable. The search never depends on that having happened: it checks queued
delegations against their texts directly, so its results are the same whether a delegation was
indexed a millisecond or an hour ago — only its speed depends on the queue staying short.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import psycopg.errors

log = logging.getLogger("entropic_mcp.storage.postgres")

_WORD = re.compile(r"\w+")
#: Delegations indexed per transaction.
BATCH = 500
#: Words this process knows are in ``search_terms`` (never deleted from), so a batch sends only
#: the others; forgotten beyond this many.
_KNOWN_TERMS = 200_000


def terms(folded: str) -> list[str]:
    """The words (runs of word characters) of a case-folded text, sorted and distinct."""
    return sorted(set(_WORD.findall(folded)))


class SearchIndexer:
    """Moves queued completions into the word index, in a background thread.

    Args:
        connection: the pool's ``connection`` (a context manager giving an autocommit connection).
        delay: seconds to wait after a completion before indexing, so completions made together
            are indexed in one batch.
    """

    def __init__(self, connection: Callable[[], AbstractContextManager[Any]], *, delay: float) -> None:
        self._connection = connection
        self._delay = delay
        self._wake = threading.Event()
        self._stopping = False
        self._draining = threading.Lock()  # one batch of this process at a time
        self._known: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="entropic-mcp search indexer", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """A delegation was queued: index it (and whatever else is queued) soon."""
        self._wake.set()

    def _run(self) -> None:
        # Queued entries a crashed process left behind are indexed at start.
        self._wake.set()
        while True:
            self._wake.wait()
            if self._stopping:
                return
            if self._delay > 0:
                threading.Event().wait(self._delay)
            self._wake.clear()
            if self._stopping:
                return
            try:
                self.drain()
            except Exception as exc:  # the queue keeps them; the search still finds them
                log.warning("search index not updated yet (it retries at the next completion): %s", exc)

    def drain(self) -> int:
        """Index every queued delegation now; returns how many were indexed.

        Raises:
            psycopg.Error: the server could not be written to (the queue keeps its entries).
        """
        done = 0
        retries = 3
        with self._draining:
            while True:
                try:
                    count, more = self._batch()
                except (psycopg.errors.ForeignKeyViolation, psycopg.errors.DeadlockDetected):
                    # A delegation deleted meanwhile (or a rare lock cycle): the batch rolled
                    # back whole; the next pass no longer finds the deleted one.
                    retries -= 1
                    if retries < 0:
                        raise
                    continue
                done += count
                if not more:
                    return done

    def _batch(self) -> tuple[int, bool]:
        with self._connection() as conn, conn.transaction():
            rows = conn.execute(
                "WITH q AS (DELETE FROM index_queue WHERE delegation_id IN (SELECT delegation_id FROM index_queue "
                "LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING delegation_id) "
                "SELECT q.delegation_id, d.status, d.folded_summary, d.folded_text FROM q "
                "LEFT JOIN delegations d USING (delegation_id)",
                (BATCH,),
            ).fetchall()
            if not rows:
                return 0, False
            vocabulary: set[str] = set()
            with (
                conn.cursor() as cur,
                cur.copy("COPY delegation_words (delegation_id, terms, summary_terms) FROM STDIN") as copy,
            ):
                for delegation_id, status, folded_summary, folded_text in rows:
                    if status != "completed":
                        continue  # deleted since it was queued
                    # No query word spans the newline between summary and task, nor does a word.
                    words = terms(folded_text or "")
                    vocabulary.update(words)
                    copy.write_row((delegation_id, words, terms(folded_summary or "")))
            new = sorted(vocabulary - self._known)  # sorted: concurrent batches lock words in one order
            if new:
                conn.execute("INSERT INTO search_terms (term) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING", (new,))
        if len(self._known) + len(new) > _KNOWN_TERMS:
            self._known = set()
        self._known.update(new)
        return len(rows), len(rows) == BATCH

    def stop(self) -> None:
        """End the thread (after the batch it may be writing)."""
        self._stopping = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
