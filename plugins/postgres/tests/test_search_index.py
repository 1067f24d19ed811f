"""The search's word index is filled after a completion commits (migration 2): whatever is still
queued, indexed, half of each, left behind by a crashed process or migrated from the first layout,
the search's results are the same."""

from __future__ import annotations

import psycopg
import pytest
from entropic_mcp_postgres import PostgresBackend, _migrations
from psycopg import sql


def _count(dsn: str, schema: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table))).fetchone()
    assert row is not None
    return int(row[0])


def _quiet(backend: PostgresBackend) -> PostgresBackend:
    """No background indexing: the test decides when the queue is indexed."""
    backend._indexer.stop()
    return backend


# Older delegations (beyond a window of 2) are reached through the words or the queue.
DELEGATIONS = [
    ("fix the tokenizer for c++ input", "tokenizer fixed; c++ and 50% cases pass"),
    ("write the parser docs", "docs written for the parser"),
    ("profile the parser", "the tokenizer is the hot spot"),
    # Queued while the first three are indexed, older than the window, and holding a known word.
    ("rename the parser's snake_case helpers", "renamed every snake_case helper of the parser"),
    ("review the release notes", "release notes reviewed"),
    ("benchmark the indexer", "the indexer keeps up"),
]
QUERIES = ["tokenizer", "parser", "c++", "50%", "snake_case", "notes release", "TOKENIZER c++", "hot spot", "absent"]


def _complete_all(backend: PostgresBackend, items: list[tuple[str, str]]) -> None:
    root = backend.create_conversation("root")
    for task, summary in items:
        delegation_id, _ = backend.create_delegation(root, "lead", "coder", task, 3, None)
        backend.complete_delegation(delegation_id, "completed", summary)


def _results(backend: PostgresBackend) -> dict[str, list[str]]:
    return {query: [r["summary"] for r in backend.search_delegations(query, 3)] for query in QUERIES}


EXPECTED = {
    "tokenizer": ["the tokenizer is the hot spot", "tokenizer fixed; c++ and 50% cases pass"],
    "parser": [
        "renamed every snake_case helper of the parser",
        "docs written for the parser",
        "the tokenizer is the hot spot",
    ],
    "c++": ["tokenizer fixed; c++ and 50% cases pass"],
    "50%": ["tokenizer fixed; c++ and 50% cases pass"],
    "snake_case": ["renamed every snake_case helper of the parser"],
    "notes release": ["release notes reviewed"],
    "TOKENIZER c++": ["tokenizer fixed; c++ and 50% cases pass"],
    "hot spot": ["the tokenizer is the hot spot"],
    "absent": [],
}


def test_queued_half_indexed_and_indexed_searches_agree(pg_dsn: str, pg_schema: str, open_pg) -> None:
    backend = _quiet(open_pg(search_window=2))
    _complete_all(backend, DELEGATIONS[:3])
    assert backend.index_pending() == 3
    _complete_all(backend, DELEGATIONS[3:])
    assert _count(pg_dsn, pg_schema, "index_queue") == 3  # the newest three wait for the index
    assert _results(backend) == EXPECTED
    assert backend.index_pending() == 3
    assert _count(pg_dsn, pg_schema, "index_queue") == 0
    assert _count(pg_dsn, pg_schema, "delegation_words") == 6
    assert _results(backend) == EXPECTED


def test_everything_queued_searches_the_same(pg_dsn: str, pg_schema: str, open_pg) -> None:
    backend = _quiet(open_pg(search_window=2))
    _complete_all(backend, DELEGATIONS)
    assert _count(pg_dsn, pg_schema, "delegation_words") == 0
    assert _results(backend) == EXPECTED


def test_a_word_only_a_queued_older_delegation_holds_is_found(open_pg) -> None:
    backend = _quiet(open_pg(search_window=1))
    _complete_all(backend, DELEGATIONS[:2])
    backend.index_pending()
    # "quokka" is in no indexed delegation, so no known word contains it; the queue still has it.
    _complete_all(backend, [("feed the quokka", "quokka fed"), *DELEGATIONS[2:4]])
    assert [r["summary"] for r in backend.search_delegations("quokka", 3)] == ["quokka fed"]
    backend.index_pending()
    assert [r["summary"] for r in backend.search_delegations("quokka", 3)] == ["quokka fed"]


def test_indexing_between_the_two_looks_of_one_search_misses_nothing(open_pg, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process indexes the queue after the search's first look and before its second:
    the second look must still find what was queued when the first looked (one snapshot)."""
    backend = _quiet(open_pg(search_window=1))
    other = _quiet(open_pg())
    _complete_all(backend, DELEGATIONS[:2])
    backend.index_pending()
    _complete_all(backend, [("feed the quokka", "quokka fed"), *DELEGATIONS[2:4]])
    looks_older = PostgresBackend._search_older
    indexed = []

    def index_in_between(*args: object, **kwargs: object) -> object:
        indexed.append(other.index_pending())
        return looks_older(*args, **kwargs)

    monkeypatch.setattr(PostgresBackend, "_search_older", staticmethod(index_in_between))
    assert [r["summary"] for r in backend.search_delegations("quokka", 3)] == ["quokka fed"]
    assert indexed == [3]  # the queue was indexed in between
    assert [r["summary"] for r in backend.search_delegations("quokka", 3)] == ["quokka fed"]


def test_failed_delegations_are_not_queued_and_deleted_ones_leave_the_queue(
    pg_dsn: str, pg_schema: str, open_pg
) -> None:
    backend = _quiet(open_pg(search_window=1))
    root = backend.create_conversation("root")
    failed, _ = backend.create_delegation(root, "lead", "coder", "try the parser", 3, None)
    backend.complete_delegation(failed, "failed", "parser crashed")
    assert _count(pg_dsn, pg_schema, "index_queue") == 0
    doomed_root = backend.create_conversation("doomed")
    doomed, _ = backend.create_delegation(doomed_root, "lead", "coder", "parser cleanup", 3, None)
    backend.complete_delegation(doomed, "completed", "parser cleaned")
    _complete_all(backend, DELEGATIONS[:2])
    backend.delete_conversation(doomed_root)
    assert _count(pg_dsn, pg_schema, "index_queue") == 3  # the deleted one's entry is inert
    assert "parser cleaned" not in [r["summary"] for r in backend.search_delegations("parser", 3)]
    assert backend.index_pending() == 3
    assert _count(pg_dsn, pg_schema, "index_queue") == 0
    assert _count(pg_dsn, pg_schema, "delegation_words") == 2
    assert [r["summary"] for r in backend.search_delegations("parser", 3)] == ["docs written for the parser"]
    assert [r["summary"] for r in backend.search_delegations("cleaned", 3)] == []


def test_another_process_indexes_what_a_crashed_one_queued(pg_dsn: str, pg_schema: str, open_pg) -> None:
    crashed = _quiet(open_pg(search_window=2))
    _complete_all(crashed, DELEGATIONS)
    assert _count(pg_dsn, pg_schema, "index_queue") == 6
    survivor = open_pg(search_window=2)
    survivor.index_pending()  # its own thread may have taken some already: either way all are indexed
    assert _count(pg_dsn, pg_schema, "index_queue") == 0
    assert _count(pg_dsn, pg_schema, "delegation_words") == 6
    assert _results(survivor) == EXPECTED


def test_a_first_layout_store_is_migrated_with_its_words(
    pg_dsn: str, pg_schema: str, open_pg, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(_migrations, "MIGRATIONS", _migrations.MIGRATIONS[:1])
        patch.setattr(_migrations, "LATEST", 1)
        with psycopg.connect(pg_dsn) as conn:
            assert _migrations.migrate(conn, pg_schema) == (1, [1])
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
            # As version 1 left a completed delegation: its words on the row, in its GIN indexes.
            conn.execute(
                "INSERT INTO conversations (conversation_id, title, metadata, scope, created_at, updated_at) VALUES "
                "('00000000-0000-4000-8000-000000000001', 'root', '{}', 'default', now(), now()), "
                "('00000000-0000-4000-8000-000000000002', 'child', '{}', 'default', now(), now())"
            )
            conn.execute(
                "INSERT INTO delegations (delegation_id, parent_id, child_conversation_id, delegating_tier, "
                "target_tier, task, max_turns, context, scope, status, summary, created_at, completed_at, "
                "completion_seq, folded_summary, folded_text, summary_terms, terms) VALUES "
                "('00000000-0000-4000-8000-0000000000d1', '00000000-0000-4000-8000-000000000001', "
                "'00000000-0000-4000-8000-000000000002', 'lead', 'coder', 'Tune the Walrus', 3, '[]', 'default', "
                "'completed', 'walrus tuned', now(), now(), nextval('completion_order'), 'walrus tuned', "
                "'walrus tuned' || chr(10) || 'tune the walrus', '{tuned,walrus}', '{tune,the,tuned,walrus}')"
            )
            conn.execute("INSERT INTO search_terms VALUES ('tune'), ('the'), ('tuned'), ('walrus')")
    backend = _quiet(open_pg(search_window=1))
    assert backend.version == _migrations.LATEST
    assert _count(pg_dsn, pg_schema, "delegation_words") == 1
    assert _count(pg_dsn, pg_schema, "index_queue") == 0
    _complete_all(backend, DELEGATIONS[:2])
    backend.index_pending()
    # Beyond the window of 1, the migrated one is reached through its words only.
    assert [r["summary"] for r in backend.search_delegations("walrus", 3)] == ["walrus tuned"]
    assert [r["summary"] for r in backend.search_delegations("TUNE wal", 3)] == ["walrus tuned"]
