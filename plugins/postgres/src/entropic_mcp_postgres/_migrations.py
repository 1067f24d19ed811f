"""Schema migrations: applied in order at start, each recorded in ``schema_migrations``.

A migration is never edited once released; a change to the schema is a new migration at the end
of ``MIGRATIONS``. Every statement runs with ``search_path`` set to the store's schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from ._errors import PostgresSchemaTooNew

if TYPE_CHECKING:
    import psycopg

#: (version, name, statements); ``{trgm}`` is the schema holding the pg_trgm operator classes.
MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        1,
        "conversations, messages, snapshots, delegations, tool calls",
        (
            """
            CREATE TABLE conversations (
                seq bigserial UNIQUE,
                conversation_id uuid PRIMARY KEY,
                title text NOT NULL,
                metadata json NOT NULL,
                scope text NOT NULL,
                parent_delegation_id uuid,
                created_at timestamptz NOT NULL,
                updated_at timestamptz NOT NULL
            )
            """,
            """
            CREATE TABLE messages (
                seq bigserial PRIMARY KEY,
                conversation_id uuid NOT NULL REFERENCES conversations ON DELETE CASCADE,
                count integer NOT NULL,
                body json NOT NULL,
                created_at timestamptz NOT NULL
            )
            """,
            "CREATE INDEX messages_by_conversation ON messages (conversation_id, seq)",
            """
            CREATE TABLE snapshots (
                snapshot_id uuid PRIMARY KEY,
                conversation_id uuid NOT NULL REFERENCES conversations ON DELETE CASCADE,
                count integer NOT NULL,
                body json NOT NULL,
                created_at timestamptz NOT NULL
            )
            """,
            "CREATE INDEX snapshots_by_conversation ON snapshots (conversation_id)",
            "CREATE SEQUENCE completion_order",
            """
            CREATE TABLE delegations (
                seq bigserial UNIQUE,
                delegation_id uuid PRIMARY KEY,
                parent_id uuid NOT NULL REFERENCES conversations ON DELETE CASCADE,
                child_conversation_id uuid NOT NULL UNIQUE REFERENCES conversations ON DELETE CASCADE,
                delegating_tier text NOT NULL,
                target_tier text NOT NULL,
                task text NOT NULL,
                folded_task text,
                max_turns integer NOT NULL,
                context json NOT NULL,
                scope text NOT NULL,
                status text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
                summary text,
                created_at timestamptz NOT NULL,
                completed_at timestamptz,
                completion_seq bigint,
                -- case-folded by the backend (Python's casefold, as the tinydb backend folds);
                -- folded_text is the summary, a newline and the task, which no query word spans;
                -- folded_task and task_terms are only kept until the completion builds the rest
                folded_summary text,
                folded_text text,
                -- the words (runs of word characters) of the folded texts: the search's candidates
                task_terms text[],
                summary_terms text[],
                terms text[]
            )
            """,
            # A delegation that goes takes its child conversation; deferred because a delegation
            # and its child conversation are inserted in one transaction, each naming the other.
            """
            ALTER TABLE conversations ADD CONSTRAINT conversations_parent_delegation_fk
                FOREIGN KEY (parent_delegation_id) REFERENCES delegations ON DELETE CASCADE
                DEFERRABLE INITIALLY DEFERRED
            """,
            "CREATE INDEX conversations_by_parent_delegation ON conversations (parent_delegation_id)",
            "CREATE INDEX delegations_by_parent ON delegations (parent_id)",
            """
            CREATE INDEX delegations_latest ON delegations (scope, target_tier, completion_seq DESC)
                WHERE status = 'completed'
            """,
            """
            CREATE INDEX delegations_recent ON delegations (completion_seq DESC) WHERE status = 'completed'
            """,
            """
            CREATE INDEX delegations_recent_in_scope ON delegations (scope, completion_seq DESC)
                WHERE status = 'completed'
            """,
            # fastupdate off: a pending list would be scanned by every search until a vacuum merges it
            """
            CREATE INDEX delegations_terms ON delegations USING gin (terms) WITH (fastupdate = off)
                WHERE status = 'completed'
            """,
            """
            CREATE INDEX delegations_summary_terms ON delegations USING gin (summary_terms) WITH (fastupdate = off)
                WHERE status = 'completed'
            """,
            # Every word ever completed, so a query word finds the words containing it (trigrams).
            "CREATE TABLE search_terms (term text PRIMARY KEY)",
            """
            CREATE INDEX search_terms_trigrams ON search_terms USING gin (term {trgm}.gin_trgm_ops)
                WITH (fastupdate = off)
            """,
            """
            CREATE TABLE tool_calls (
                seq bigserial PRIMARY KEY,
                recorded_at timestamptz NOT NULL DEFAULT now(),
                record json NOT NULL
            )
            """,
        ),
    ),
    (
        2,
        "the search's word index in a table of its own, filled from a queue after the completion commits",
        (
            # A completion used to write ~50 GIN entries (the words of the task and the summary)
            # inside its durable statement; now it queues the delegation and a background batch
            # indexes it (see _indexer.py). The search reads the queue, so nothing is missed.
            """
            CREATE TABLE delegation_words (
                delegation_id uuid PRIMARY KEY REFERENCES delegations ON DELETE CASCADE,
                terms text[] NOT NULL,
                summary_terms text[] NOT NULL
            )
            """,
            """
            INSERT INTO delegation_words (delegation_id, terms, summary_terms)
                SELECT delegation_id, terms, summary_terms FROM delegations
                WHERE status = 'completed' AND terms IS NOT NULL AND summary_terms IS NOT NULL
            """,
            "CREATE INDEX delegation_words_terms ON delegation_words USING gin (terms) WITH (fastupdate = off)",
            """
            CREATE INDEX delegation_words_summary_terms ON delegation_words USING gin (summary_terms)
                WITH (fastupdate = off)
            """,
            # No foreign key: a completion's statement stays free of a referential check; the
            # indexer and the search join with delegations, so an entry of a deleted one is inert.
            "CREATE TABLE index_queue (delegation_id uuid PRIMARY KEY)",
            """
            INSERT INTO index_queue (delegation_id)
                SELECT delegation_id FROM delegations
                WHERE status = 'completed' AND (terms IS NULL OR summary_terms IS NULL)
            """,
            "DROP INDEX delegations_terms",
            "DROP INDEX delegations_summary_terms",
            "ALTER TABLE delegations DROP COLUMN task_terms, DROP COLUMN summary_terms, DROP COLUMN terms",
        ),
    ),
    (
        3,
        "plugin state documents (StateStore), versioned per namespace and key",
        (
            # json, not jsonb: jsonb refuses \u0000 in a string, which a state document may hold.
            # No foreign key: a key is the plugin's, not necessarily a stored conversation's.
            """
            CREATE TABLE states (
                namespace text,
                key text,
                version bigint NOT NULL,
                value json NOT NULL,
                updated_at timestamptz NOT NULL,
                PRIMARY KEY (namespace, key)
            )
            """,
        ),
    ),
)

LATEST = MIGRATIONS[-1][0]


def trigram_schema(conn: psycopg.Connection) -> str:
    """The schema of the pg_trgm extension, installing it in ``public`` when the database lacks it."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'"
    ).fetchone()
    if row is None:
        from psycopg import errors

        try:
            # The extension lives outside the store's schema, so dropping a store never drops it.
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public")
        except (errors.InsufficientPrivilege, errors.FeatureNotSupported, errors.UndefinedFile) as exc:
            from entropic_mcp.storage import StorageError

            raise StorageError(
                f"the database lacks the pg_trgm extension and this role cannot install it ({exc.diag.message_primary}); "
                "ask the database owner to run: CREATE EXTENSION pg_trgm"
            ) from None
        return "public"
    return str(row[0])


def migrate(conn: psycopg.Connection, schema: str) -> tuple[int, list[int]]:
    """Bring ``schema`` to ``LATEST`` in the open transaction; returns (version, versions applied).

    The caller holds the advisory lock of the schema, so workers starting together migrate once.
    """
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.schema_migrations ("
            "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        ).format(sql.Identifier(schema))
    )
    row = conn.execute(
        sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(sql.Identifier(schema))
    ).fetchone()
    current = int(row[0]) if row else 0
    if current > LATEST:
        raise PostgresSchemaTooNew(
            f"schema {schema!r} is at migration {current}, made by a newer entropic-mcp-postgres; this one knows "
            f"migrations up to {LATEST}. Upgrade entropic-mcp-postgres (pip install -U entropic-mcp-postgres), or "
            "point [storage] options.schema at another schema. Nothing was changed."
        )
    applied: list[int] = []
    pending = [m for m in MIGRATIONS if m[0] > current]
    if pending:
        trgm_schema = trigram_schema(conn)
        trgm = sql.Identifier(trgm_schema).as_string(conn)
        # Unqualified names in the migrations are the store's: its schema first on the path.
        conn.execute(
            "SELECT set_config('search_path', %s, true)", (f"{sql.Identifier(schema).as_string(conn)}, {trgm}",)
        )
        for version, name, statements in pending:
            for statement in statements:
                conn.execute(statement.replace("{trgm}", trgm).encode())
            conn.execute(
                sql.SQL("INSERT INTO {}.schema_migrations (version, name) VALUES (%s, %s)").format(
                    sql.Identifier(schema)
                ),
                (version, name),
            )
            applied.append(version)
    return max(current, LATEST if pending else current), applied
