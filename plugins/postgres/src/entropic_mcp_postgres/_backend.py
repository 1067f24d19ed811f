"""``PostgresBackend``: the storage protocol over a PostgreSQL connection pool.

Every method is one transaction on a pooled connection, committed before it returns (so durable
as the server's ``synchronous_commit`` makes it). Validation happens in Python before anything is
sent; existence checks happen inside the statement that changes the data (an ``UPDATE ...
RETURNING`` or an ``INSERT ... SELECT`` that finds no row), so a concurrent delete can never leave
a half-made record. Foreign keys with ``ON DELETE CASCADE`` do the deleting.

A connection that breaks (the server restarted, the network dropped) fails the operation in
flight with ``PostgresUnavailable``; the pool then checks its idle connections and opens new ones
as soon as the server answers again, so the next operation works without restarting the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson
import psycopg
import psycopg.errors
from entropic_mcp import ConfigError
from entropic_mcp.storage import (
    DEFAULT_SCOPE,
    HEURISTIC_NAMESPACES,
    StateConflict,
    StorageError,
    ToolCallRecord,
    check_options,
    validate_prune,
    validate_state,
)
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from ._audit import AuditBuffer
from ._deadline import DeadlinePassed, Stall, Watchdog
from ._errors import PostgresAuthError, PostgresUnavailable
from ._indexer import SearchIndexer
from ._migrations import LATEST, migrate, trigram_schema

if TYPE_CHECKING:
    from entropic_mcp import Config

log = logging.getLogger("entropic_mcp.storage.postgres")

ENV_DSN = "ENTROPIC_MCP_POSTGRES_DSN"
#: Newest completed delegations a search looks at first (see ``search_delegations``).
SEARCH_WINDOW = 500
#: Seconds a completion waits in the queue before the background indexing, so completions made
#: together are indexed in one batch (the search finds them meanwhile; see ``_indexer.py``).
INDEX_DELAY = 0.05
_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

#: ``[storage] options`` the postgres backend understands: (type, default, meaning).
OPTIONS: dict[str, tuple[type, Any, str]] = {
    "dsn": (str, None, f"libpq connection string or URI (else ${ENV_DSN})"),
    "schema": (str, "entropic_mcp", "the schema holding the store's tables (created if missing)"),
    "pool_min": (int, 1, "connections kept open"),
    "pool_max": (int, 10, "most connections open at once"),
    "connect_timeout": (float, 5.0, "seconds to wait for the server when connecting"),
    "pool_timeout": (float, 10.0, "seconds an operation waits for a connection before failing"),
    "deadline": (float, 5.0, "seconds one operation may take, waiting for a connection included, before it fails"),
    "audit_batch": (int, 256, "tool-call records buffered before they are written"),
    "audit_flush_seconds": (float, 1.0, "longest a buffered tool-call record waits"),
    "search_window": (int, SEARCH_WINDOW, "newest completed delegations a search ranks before older ones"),
}

_AUTH_SIGNS = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "password is required",
    "no pg_hba.conf entry",
    "permission denied for database",
)


# -- argument checks -------------------------------------------------------------------------------
# The protocol's argument rules are the core's CheckedStorage, in front of this backend; what is
# left here is what PostgreSQL itself cannot store.


def _text(value: str, what: str) -> str:
    if "\x00" in value:
        raise StorageError(f"{what} contains a NUL character, which PostgreSQL text cannot hold")
    return value


def _scope(value: str | None, what: str) -> str | None:
    return None if value is None else _text(value, f"{what}: scope")


def _json(value: Any, what: str) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError as exc:
        raise StorageError(
            f"{what} is not JSON-serialisable ({exc}); pass plain dicts, lists, strings and numbers"
        ) from None


def _messages(value: Sequence[Any]) -> tuple[int, str]:
    # CheckedStorage hands over the JSON-clean copy validate_messages made.
    return len(value), orjson.dumps(list(value)).decode()


#: What ``str(uuid.UUID(...))`` gives: the only spelling of an id the store ever hands out.
_CANONICAL_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _id(value: Any, kind: str, what: str) -> str:
    """A canonical UUID string; anything else names no record (the same error as an unknown id)."""
    _text(value, what)
    if _CANONICAL_ID.fullmatch(value) is None:
        raise _unknown(kind, value, what)
    return value


def _unknown(kind: str, value: Any, what: str) -> StorageError:
    if kind == "conversation":
        return StorageError(f"unknown conversation {value!r} ({what}); it was never created or has been deleted")
    return StorageError(f"unknown delegation {value!r}; it was never created or its conversation was deleted")


_WORD = re.compile(r"\w+")
#: A query word contained in more known words than this (``a``, ``er``) narrows nothing worth an
#: index lookup; the search checks the texts for it instead.
_BROAD = 256


def _fold(text: str) -> str:
    # Python's casefold, as the tinydb backend folds, so both backends match the same words.
    return text.casefold()


def _like(word: str) -> str:
    """A LIKE pattern matching ``word`` anywhere, every character literal (``\\`` is LIKE's escape)."""
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _stamp(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="microseconds")


def describe(dsn: str) -> str:
    """``user@host:port/dbname`` for messages; never the password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(an unreadable DSN)"
    host = parts.get("host") or parts.get("hostaddr") or os.environ.get("PGHOST") or "localhost"
    port = parts.get("port") or os.environ.get("PGPORT") or "5432"
    user = parts.get("user") or os.environ.get("PGUSER") or ""
    dbname = parts.get("dbname") or os.environ.get("PGDATABASE") or user
    return f"{str(user) + '@' if user else ''}{host}:{port}/{dbname}"


def connection_error(exc: BaseException, where: str) -> StorageError:
    """The StorageError for a failed connect: bad credentials/database, or an unreachable server."""
    message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    text = str(exc).lower()
    source = f"[storage] options.dsn or ${ENV_DSN}"
    if any(sign in text for sign in _AUTH_SIGNS) or ("role" in text and "does not exist" in text):
        return PostgresAuthError(
            f"PostgreSQL at {where} refused the login ({message}); check the user and password in {source} "
            "(a password can also come from PGPASSWORD or ~/.pgpass) and the server's pg_hba.conf"
        )
    if "database" in text and "does not exist" in text:
        return PostgresAuthError(
            f"PostgreSQL at {where}: {message}; create it (createdb) or name an existing database in {source}"
        )
    return PostgresUnavailable(
        f"cannot reach PostgreSQL at {where} ({message}); is the server running and accepting connections "
        f"there? Check {source}. Nothing was changed."
    )


# -- the backend -----------------------------------------------------------------------------------


def _save_statements(durable: bool) -> dict[str, str]:
    """The guarded writes of ``save_state``: one statement each, returning a row only when the
    stored version was the one given (versions start at 1, so a delete at 0 finds nothing).

    Not ``durable`` (a heuristic namespace): the statement sets ``synchronous_commit`` off for its
    own transaction, so the commit does not wait for the WAL flush (one statement, so still one
    round trip; a ``SET LOCAL`` needs a transaction block, three statements more). A server crash
    may lose the last ~0.6 s (three ``wal_writer_delay``) of such writes, never a torn one.
    """
    lax = "" if durable else "(SELECT set_config('synchronous_commit', 'off', true)) AS lax"
    return {
        "insert": "INSERT INTO states (namespace, key, version, value, updated_at) "
        f"SELECT %(namespace)s, %(key)s, 1, %(value)s::json, now(){' FROM ' + lax if lax else ''} "
        "ON CONFLICT DO NOTHING RETURNING version",
        "update": "UPDATE states SET value = %(value)s, version = version + 1, updated_at = now()"
        f"{' FROM ' + lax if lax else ''} "
        "WHERE namespace = %(namespace)s AND key = %(key)s AND version = %(version)s RETURNING version",
        "delete": f"DELETE FROM states{' USING ' + lax if lax else ''} WHERE namespace = %(namespace)s "
        "AND key = %(key)s AND version = %(version)s RETURNING 0",
    }


class PostgresBackend:
    """The storage protocol in a PostgreSQL schema, shared by every process that opens it.

    Args:
        dsn: a libpq connection string or URI (``postgresql://user@host:5432/db``).
        schema: the schema holding the tables; created and migrated at open.
        pool_min: connections kept open.
        pool_max: most connections open at once.
        connect_timeout: seconds to wait for the server when connecting.
        pool_timeout: seconds an operation waits for a free (or new) connection.
        deadline: seconds one operation may take in all (the wait for a connection included);
            past it the operation fails, and so does every other until the server answers again
            (see ``_deadline.py``).
        audit_batch: tool-call records buffered before they are written.
        audit_flush_seconds: the longest a buffered tool-call record waits.
        search_window: newest completed delegations a search ranks first, before looking at
            older ones (only the speed depends on it, never the results).

    Raises:
        PostgresUnavailable: the server cannot be reached.
        PostgresAuthError: the login, role or database was refused.
        PostgresSchemaTooNew: the schema was migrated by a newer version of this plugin.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "entropic_mcp",
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout: float = 5.0,
        pool_timeout: float = 10.0,
        deadline: float = 5.0,
        audit_batch: int = 256,
        audit_flush_seconds: float = 1.0,
        search_window: int = SEARCH_WINDOW,
    ) -> None:
        if not _SCHEMA.fullmatch(schema):
            raise ConfigError(
                f"[storage] options.schema: {schema!r} is not a plain SQL identifier (letters, digits, _; "
                "at most 63 characters, not starting with a digit)"
            )
        self.where = describe(dsn)
        self.schema = schema
        self._timeout = min(pool_timeout, deadline)
        self.deadline = deadline
        self._window = search_window
        self._closed = False
        self._mutex = threading.Lock()
        self._checking = threading.Event()  # one pool check at a time after a broken connection
        connect_args: dict[str, Any] = {
            "connect_timeout": max(1, round(connect_timeout)),
            "application_name": "entropic-mcp",
            # A partition leaves idle connections open: keepalives find them dead, and a write
            # unacknowledged for the deadline closes its connection in the kernel.
            "keepalives": 1,
            "keepalives_idle": max(1, round(deadline)),
            "keepalives_interval": 1,
            "keepalives_count": 3,
            "tcp_user_timeout": max(1000, round(deadline * 1000)),
        }
        self._dsn, self._connect_args = dsn, connect_args
        try:
            first = psycopg.connect(dsn, **connect_args)  # type: ignore[arg-type]
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"[storage] options.dsn / ${ENV_DSN}: not a valid connection string ({exc})") from None
        except psycopg.OperationalError as exc:
            raise connection_error(exc, self.where) from None
        user, database = first.info.user, first.info.dbname
        try:
            with first:
                with first.transaction():
                    first.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("entropic_mcp:" + schema,))
                    self.version, applied = migrate(first, schema)
                    search_path = [schema, trigram_schema(first)]
                if applied:
                    log.info("migrated schema %s of %s to version %d (%s)", schema, self.where, LATEST, applied)
        except StorageError:
            raise
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StorageError(
                f"PostgreSQL at {self.where}: role {user!r} may not create or change schema {schema!r} ({exc}); "
                f"ask the database owner to run: CREATE SCHEMA {schema} AUTHORIZATION {user} "
                f"(or GRANT CREATE ON DATABASE {database} TO {user}). Nothing was changed."
            ) from None
        except psycopg.OperationalError as exc:
            raise connection_error(exc, self.where) from None
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL at {self.where}: preparing schema {schema!r} failed ({exc})") from None
        self._search_path = ", ".join(sql.Identifier(s).as_string(None) for s in dict.fromkeys(search_path))
        # Autocommit: every operation is one statement, which PostgreSQL runs as one transaction —
        # atomic, and committed in a single round trip (BEGIN/COMMIT would add two).
        self._pool = ConnectionPool(
            dsn,
            kwargs={**connect_args, "autocommit": True},
            min_size=min(pool_min, pool_max),
            max_size=pool_max,
            configure=self._configure,
            timeout=pool_timeout,
            name=f"entropic-mcp {self.where}/{schema}",
            open=False,
        )
        self._pool.open(wait=False)
        self._stall = Stall(self._probe, self.where)
        self._watchdog = Watchdog(self._late)
        self._lender = _Lender(self._pool, self._watchdog, deadline)
        self._loop_conns = _LoopConnections(self._connect_on_loop, pool_max)
        self._audit = AuditBuffer(self._lender.background, batch=audit_batch, seconds=audit_flush_seconds)
        self._indexer = SearchIndexer(self._lender.background, delay=INDEX_DELAY)
        self._finalizer = weakref.finalize(
            self,
            _shutdown,
            self._audit,
            self._indexer,
            self._lender,
            self._pool,
            self._watchdog,
            self._stall,
            self._loop_conns,
        )

    @classmethod
    def from_config(cls, config: Config) -> PostgresBackend:
        """Open the store ``[storage] options`` describe; the DSN falls back to ``$ENTROPIC_MCP_POSTGRES_DSN``."""
        options = check_options(config.storage.options, OPTIONS, "postgres", zero_allowed=("pool_min",))
        dsn = options.pop("dsn", None) or os.environ.get(ENV_DSN, "").strip()
        if not dsn:
            raise ConfigError(
                '[storage] backend = "postgres" needs a server: set [storage] options.dsn = '
                f'"postgresql://user@host:5432/dbname" or the {ENV_DSN} environment variable'
            )
        return cls(dsn, **options)

    def __repr__(self) -> str:
        return f"PostgresBackend({self.where!r}, schema={self.schema!r})"

    # -- connections and transactions --------------------------------------------------------------

    #: Every connection's session settings: statement_timeout so the server stops a statement
    #: the client has given up on by then.
    _SESSION = (
        "SELECT set_config('search_path', %s, false), set_config('TimeZone', 'UTC', false), "
        "set_config('statement_timeout', %s, false)"
    )

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.execute(self._SESSION, (self._search_path, str(max(1, round(self.deadline * 1000)))))

    async def _connect_on_loop(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True, **self._connect_args)
        try:
            await conn.execute(self._SESSION, (self._search_path, str(max(1, round(self.deadline * 1000)))))
        except BaseException:
            await conn.close()
            raise
        return conn

    def _late(self) -> None:
        """An operation passed its deadline (the watchdog's thread): the store is stalled."""
        if self._stall.begin():
            log.warning(
                "PostgreSQL at %s did not answer within the %g s deadline; store calls fail at once until it "
                "answers again",
                self.where,
                self.deadline,
            )
        self._watchdog.cut_all()  # the other operations wait on the same silent network

    def _probe(self) -> None:
        with self._transaction("probe", probing=True) as conn:
            conn.execute("SELECT 1")

    def _stalled(self, what: str) -> PostgresUnavailable | None:
        seconds = self._stall.seconds()
        if seconds is None:
            return None
        return PostgresUnavailable(
            f"{what}: PostgreSQL at {self.where} has not answered for {seconds:.1f} s (an operation got no answer "
            f"within the {self.deadline:g} s deadline: the network or the server is stalled); nothing was sent or "
            f"changed. Store calls fail at once until it answers again (checked every {Stall.PROBE_EVERY:g} s): "
            "retry in a few seconds; tools that need no store still work."
        )

    @contextlib.contextmanager
    def _transaction(self, what: str, *, probing: bool = False) -> Iterator[psycopg.Connection]:
        """A pooled connection (autocommit) for one operation, with its errors made StorageErrors.

        Every operation is a single statement (PostgreSQL's own transaction: all or nothing);
        an operation of several statements wraps them in ``conn.transaction()``. The whole
        operation is bounded by the deadline; while the store is stalled it fails at once
        (``probing``: the probe that finds out whether it still is).
        """
        if self._closed:
            raise StorageError(f"PostgreSQL store {self.where}/{self.schema}: the store is closed")
        stalled = None if probing else self._stalled(what)
        if stalled is not None:
            raise stalled
        try:
            with self._lender.connection() as conn:
                yield conn
        except StorageError:
            raise
        except (DeadlinePassed, psycopg.Error, PoolTimeout) as exc:
            raise self._failure(exc, what, probing=probing) from None

    def _failure(self, exc: BaseException, what: str, *, probing: bool = False) -> StorageError:
        """The StorageError an operation's failure is reported as (both ``_transaction`` and
        ``_on_loop``), with what it means for the store's state."""
        if isinstance(exc, DeadlinePassed):
            return PostgresUnavailable(
                f"{what}: PostgreSQL at {self.where} did not answer within the {self.deadline:g} s deadline "
                "([storage] options.deadline): the network or the server is stalled. If the operation was a change "
                "it may or may not have been saved — check before repeating it. Store calls fail at once until the "
                "server answers again; raise options.deadline if operations are legitimately this slow."
            )
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return PostgresUnavailable(
                f"{what}: PostgreSQL at {self.where} cancelled the statement at the {self.deadline:g} s deadline "
                "(statement_timeout; a lock held elsewhere, or a slow server); nothing was changed. Retry, or raise "
                "[storage] options.deadline if operations are legitimately this slow."
            )
        if isinstance(exc, PoolTimeout):
            # No connection within the deadline: the pool could not open one either (the server or
            # the network is silent), so the calls after this one fail at once as after a cut.
            if not probing and self._stall.begin():
                log.warning(
                    "no connection to PostgreSQL at %s within %g s; store calls fail at once until it answers again",
                    self.where,
                    self._timeout,
                )
            return PostgresUnavailable(
                f"{what}: no connection to PostgreSQL at {self.where} within {self._timeout:g} s; is the server "
                "running? Nothing was changed; the store reconnects by itself once the server answers."
            )
        if isinstance(exc, psycopg.OperationalError):
            # A broken connection is discarded when it goes back to the pool; the idle ones may be
            # just as dead (a restarted server), so check them now rather than failing on each.
            if not self._checking.is_set():
                self._checking.set()
                threading.Thread(target=self._check_pool, daemon=True).start()
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return PostgresUnavailable(
                f"{what}: the connection to PostgreSQL at {self.where} failed ({detail}); if it dropped during the "
                "commit the change may or may not have been saved — check before repeating it. The store "
                "reconnects by itself once the server answers."
            )
        return StorageError(f"{what} failed in PostgreSQL at {self.where}: {exc}")

    def _check_pool(self) -> None:
        try:
            with contextlib.suppress(Exception):
                self._loop_conns.close_idle()
                self._lender.return_all()
                self._pool.check()
        finally:
            self._checking.clear()

    def index_pending(self) -> int:
        """Index the queued completions now rather than in the background; returns how many.

        Only the search's speed depends on it (the search checks queued delegations directly).
        """
        if self._closed:
            raise StorageError(f"PostgreSQL store {self.where}/{self.schema}: the store is closed")
        try:
            return self._indexer.drain()
        except PoolTimeout:
            raise PostgresUnavailable(f"index_pending: no connection to PostgreSQL at {self.where}") from None
        except psycopg.Error as exc:
            raise PostgresUnavailable(f"index_pending: PostgreSQL at {self.where} failed: {exc}") from None

    # -- conversations -----------------------------------------------------------------------------

    def create_conversation(
        self, title: str, metadata: Mapping[str, Any] | None = None, scope: str = DEFAULT_SCOPE
    ) -> str:
        _text(title, "title")
        body = _json(dict(metadata or {}), "metadata")
        _scope(scope, "create_conversation")
        conversation_id = str(uuid.uuid4())
        with self._transaction("create_conversation") as conn:
            conn.execute(
                "INSERT INTO conversations (conversation_id, title, metadata, scope, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, now(), now())",
                (conversation_id, title, body, scope),
            )
        return conversation_id

    def scope_of(self, conversation_id: str) -> str | None:
        _text(conversation_id, "conversation_id")
        try:
            _id(conversation_id, "conversation", "scope_of")
        except StorageError:
            return None
        with self._transaction("scope_of") as conn:
            row = conn.execute(
                "SELECT scope FROM conversations WHERE conversation_id = %s", (conversation_id,)
            ).fetchone()
        return None if row is None else str(row[0])

    def save_messages(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        _id(conversation_id, "conversation", "save_messages")
        count, body = _messages(messages)
        with self._transaction("save_messages") as conn:
            cur = conn.execute(
                "WITH c AS (UPDATE conversations SET updated_at = now() WHERE conversation_id = %s "
                "RETURNING conversation_id) "
                "INSERT INTO messages (conversation_id, count, body, created_at) "
                "SELECT conversation_id, %s, %s, now() FROM c",
                (conversation_id, count, body),
            )
            if cur.rowcount != 1:
                raise _unknown("conversation", conversation_id, "save_messages")

    _CONVERSATION_COLUMNS = (
        "c.conversation_id, c.title, c.metadata::text, c.scope, c.created_at, c.updated_at, c.parent_delegation_id, "
        "(SELECT coalesce(sum(m.count), 0) FROM messages m WHERE m.conversation_id = c.conversation_id)"
    )
    #: The message batches of conversation ``c`` as one JSON array of arrays, in order.
    _MESSAGES_OF = (
        "(SELECT json_agg(m.body ORDER BY m.seq)::text FROM messages m WHERE m.conversation_id = {conversation})"
    )

    @staticmethod
    def _conversation_record(row: Sequence[Any]) -> dict[str, Any]:
        return {
            "conversation_id": str(row[0]),
            "title": row[1],
            "metadata": orjson.loads(row[2]),
            "scope": row[3],
            "created_at": _stamp(row[4]),
            "updated_at": _stamp(row[5]),
            "parent_delegation_id": None if row[6] is None else str(row[6]),
            "message_count": int(row[7]),
        }

    @staticmethod
    def _messages(batches: str | None) -> list[Any]:
        messages: list[Any] = []
        for batch in orjson.loads(batches) if batches else ():
            messages.extend(batch)
        return messages

    def _load_with_messages(
        self, op: str, what: str, kind: str, record_id: Any, *, columns: str, source: str, key: str, conversation: str
    ) -> tuple[Sequence[Any], list[Any]]:
        """The row of ``source`` whose ``key`` is ``record_id`` (``columns``, then the messages of
        ``conversation``) and those messages; a malformed or unknown id → StorageError naming ``what``."""
        _id(record_id, kind, what)
        messages_of = self._MESSAGES_OF.format(conversation=conversation)
        with self._transaction(op) as conn:
            # One statement, so the record and its messages are one consistent snapshot.
            row = conn.execute(
                f"SELECT {columns}, {messages_of} FROM {source} WHERE {key} = %s", (record_id,)
            ).fetchone()
        if row is None:
            raise _unknown(kind, record_id, what)
        return row, self._messages(row[-1])

    def load_conversation(self, conversation_id: str) -> dict[str, Any]:
        row, messages = self._load_with_messages(
            "load_conversation",
            "conversation_id",
            "conversation",
            conversation_id,
            columns=self._CONVERSATION_COLUMNS,
            source="conversations c",
            key="c.conversation_id",
            conversation="c.conversation_id",
        )
        return {"conversation": self._conversation_record(row), "messages": messages}

    def list_conversations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        with self._transaction("list_conversations") as conn:
            rows = conn.execute(
                f"SELECT {self._CONVERSATION_COLUMNS} FROM conversations c ORDER BY c.seq DESC LIMIT %s OFFSET %s",
                (limit, offset),
            ).fetchall()
        return [self._conversation_record(row) for row in rows]

    def delete_conversation(self, conversation_id: str) -> None:
        _id(conversation_id, "conversation", "delete_conversation")
        with self._transaction("delete_conversation") as conn:
            cur = conn.execute("DELETE FROM conversations WHERE conversation_id = %s", (conversation_id,))
            if cur.rowcount != 1:
                raise _unknown("conversation", conversation_id, "delete_conversation")

    def save_snapshot(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> str:
        _id(conversation_id, "conversation", "save_snapshot")
        count, body = _messages(messages)
        snapshot_id = str(uuid.uuid4())
        with self._transaction("save_snapshot") as conn:
            cur = conn.execute(
                "INSERT INTO snapshots (snapshot_id, conversation_id, count, body, created_at) "
                "SELECT %s, conversation_id, %s, %s, now() FROM conversations WHERE conversation_id = %s",
                (snapshot_id, count, body, conversation_id),
            )
            if cur.rowcount != 1:
                raise _unknown("conversation", conversation_id, "save_snapshot")
        return snapshot_id

    # -- delegations -------------------------------------------------------------------------------

    def create_delegation(
        self,
        parent_id: str,
        delegating_tier: str,
        target_tier: str,
        task: str,
        max_turns: int = -1,
        context: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[str, str]:
        _id(parent_id, "conversation", "create_delegation parent_id")
        _text(delegating_tier, "delegating_tier")
        _text(target_tier, "target_tier")
        _text(task, "task")
        context_body = _json([dict(item) for item in context or ()], "context")
        delegation_id, child = str(uuid.uuid4()), str(uuid.uuid4())
        metadata = _json(
            {"parent_id": parent_id, "delegating_tier": delegating_tier, "target_tier": target_tier}, "metadata"
        )
        with self._transaction("create_delegation") as conn:
            # One statement: the parent is found (and kept from being deleted meanwhile), the child
            # conversation and the delegation inserted, each taking the parent's scope.
            cur = conn.execute(
                "WITH p AS (SELECT conversation_id, scope FROM conversations WHERE conversation_id = %(parent)s "
                "FOR KEY SHARE), "
                "child AS (INSERT INTO conversations (conversation_id, title, metadata, scope, parent_delegation_id, "
                "created_at, updated_at) SELECT %(child)s, %(title)s, %(metadata)s, p.scope, %(id)s, now(), now() "
                "FROM p RETURNING conversation_id) "
                "INSERT INTO delegations (delegation_id, parent_id, child_conversation_id, delegating_tier, "
                "target_tier, task, folded_task, max_turns, context, scope, status, created_at) "
                "SELECT %(id)s, p.conversation_id, child.conversation_id, %(from)s, %(to)s, %(task)s, %(folded)s, "
                "%(turns)s, %(context)s, p.scope, 'running', now() FROM p, child",
                {
                    "parent": parent_id,
                    "child": child,
                    "title": f"{target_tier}: {task[:80]}",
                    "metadata": metadata,
                    "id": delegation_id,
                    "from": delegating_tier,
                    "to": target_tier,
                    "task": task,
                    "folded": _fold(task),
                    "turns": max_turns,
                    "context": context_body,
                },
            )
            if cur.rowcount != 1:
                raise _unknown("conversation", parent_id, "create_delegation parent_id")
        return delegation_id, child

    def complete_delegation(self, delegation_id: str, status: str, summary: str) -> None:
        _id(delegation_id, "delegation", "complete_delegation")
        _text(summary, "summary")
        folded = _fold(summary)
        with self._transaction("complete_delegation") as conn:
            # One statement: the completion and, for a searchable one, its entry in the queue of
            # the word index (indexed after the commit, in a batch; the search reads the queue).
            cur = conn.execute(
                "WITH d AS (UPDATE delegations SET status = %(status)s, summary = %(summary)s, "
                "completed_at = greatest(now(), created_at), completion_seq = nextval('completion_order'), "
                "folded_summary = %(folded)s, folded_text = %(folded)s || chr(10) || folded_task, "
                "folded_task = NULL WHERE delegation_id = %(id)s AND status = 'running' RETURNING delegation_id), "
                "q AS (INSERT INTO index_queue (delegation_id) SELECT delegation_id FROM d "
                "WHERE %(status)s = 'completed') "
                "SELECT count(*) FROM d",
                {"status": status, "summary": summary, "folded": folded, "id": delegation_id},
            )
            row = cur.fetchone()
            if row is not None and row[0] == 1:
                if status == "completed":
                    self._indexer.poke()
                return
            row = conn.execute(
                "SELECT status, completed_at FROM delegations WHERE delegation_id = %s", (delegation_id,)
            ).fetchone()
        if row is None:
            raise _unknown("delegation", delegation_id, "complete_delegation")
        raise StorageError(
            f"delegation {delegation_id!r} was already completed (status {row[0]!r} at {_stamp(row[1])}); "
            "a delegation is completed once"
        )

    _DELEGATION_COLUMNS = (
        "delegation_id, parent_id, child_conversation_id, delegating_tier, target_tier, task, max_turns, "
        "context::text, scope, status, summary, created_at, completed_at"
    )

    @staticmethod
    def _delegation_record(row: Sequence[Any]) -> dict[str, Any]:
        return {
            "delegation_id": str(row[0]),
            "parent_id": str(row[1]),
            "child_conversation_id": str(row[2]),
            "delegating_tier": row[3],
            "target_tier": row[4],
            "task": row[5],
            "max_turns": row[6],
            "context": orjson.loads(row[7]),
            "scope": row[8],
            "status": row[9],
            "summary": row[10],
            "created_at": _stamp(row[11]),
            "completed_at": _stamp(row[12]),
        }

    def load_delegation_with_messages(self, delegation_id: str) -> dict[str, Any]:
        what = "load_delegation_with_messages"
        row, messages = self._load_with_messages(
            what,
            what,
            "delegation",
            delegation_id,
            columns=self._DELEGATION_COLUMNS,
            source="delegations",
            key="delegation_id",
            conversation="child_conversation_id",
        )
        record = self._delegation_record(row)
        record["messages"] = messages
        return record

    def list_delegations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        with self._transaction("list_delegations") as conn:
            rows = conn.execute(
                f"SELECT {self._DELEGATION_COLUMNS} FROM delegations ORDER BY seq DESC LIMIT %s OFFSET %s",
                (limit, offset),
            ).fetchall()
        return [self._delegation_record(row) for row in rows]

    def latest_delegation_for_target(self, target_tier: str, scope: str | None = None) -> str | None:
        _text(target_tier, "target_tier")
        _scope(scope, "latest_delegation_for_target")
        where = "status = 'completed' AND target_tier = %s" + ("" if scope is None else " AND scope = %s")
        params = (target_tier,) if scope is None else (target_tier, scope)
        with self._transaction("latest_delegation_for_target") as conn:
            row = conn.execute(
                f"SELECT delegation_id FROM delegations WHERE {where} ORDER BY completion_seq DESC LIMIT 1", params
            ).fetchone()
        return None if row is None else str(row[0])

    def search_delegations(self, query: str, max_results: int = 3, scope: str | None = None) -> list[dict[str, Any]]:
        """Every word somewhere in "summary\\ntask" (case-folded, literally); ranked by how many words
        the summary holds, then by completion, newest first — as the tinydb backend ranks.

        First the newest ``search_window`` completed delegations (an index range): a word found in
        many delegations has its best results there. Older delegations can then only enter with a
        better score than the last of those results — few enough that the word indexes (a query
        word's runs of word characters → the known words containing them → the delegations
        holding one) find them quickly; every candidate is still checked against the texts.
        """
        _text(query, "query")
        _scope(scope, "search_delegations")
        words = list(dict.fromkeys(_fold(query).split()))
        params: dict[str, Any] = {f"p{i}": _like(word) for i, word in enumerate(words)}
        params.update(scope=scope, k=max_results, window=self._window)
        in_scope = "status = 'completed'" + ("" if scope is None else " AND scope = %(scope)s")
        every_word = " AND ".join(f"folded_text LIKE %(p{i})s" for i in range(len(words)))
        score = " + ".join(f"(folded_summary LIKE %(p{i})s)::int" for i in range(len(words)))
        result = "d.delegation_id, d.target_tier, d.task, d.summary, d.completed_at"
        # The known words containing each run of word characters of the query, for the older
        # delegations (fetched with the first look, so the second costs no extra round trip).
        runs = sorted({run for word in words for run in _WORD.findall(word)})
        params.update(runs=[_like(run) for run in runs], broad=_BROAD + 1)
        expansions = (
            "(SELECT json_agg((SELECT coalesce(json_agg(t.term), '[]') FROM (SELECT term FROM search_terms "
            "WHERE term LIKE u.r LIMIT %(broad)s) t) ORDER BY u.n) "
            "FROM unnest(%(runs)s::text[]) WITH ORDINALITY AS u(r, n))::text"
        )
        recent = (
            "WITH w AS (SELECT delegation_id, completion_seq, folded_text, folded_summary FROM delegations "
            f"WHERE {in_scope} ORDER BY completion_seq DESC LIMIT %(window)s), "
            "edge AS (SELECT min(completion_seq) AS low, count(*) AS size FROM w), "
            f"m AS (SELECT delegation_id, completion_seq, {score} AS score FROM w WHERE {every_word} "
            "ORDER BY score DESC, completion_seq DESC LIMIT %(k)s) "
            f"SELECT edge.low, edge.size, {expansions}, m.completion_seq, m.score, {result} "
            "FROM edge LEFT JOIN (m JOIN delegations d USING (delegation_id)) ON true "
            "ORDER BY m.score DESC, m.completion_seq DESC"
        )
        with self._transaction("search_delegations") as conn:
            # Both looks see one snapshot: between two statements the background indexer may
            # move delegations from the queue into the word index, and the second look must not
            # miss them with the words the first look found. BEGIN goes with the first look.
            with conn.pipeline():
                conn.execute(b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cursor = conn.execute(recent.encode(), params)
            rows = cursor.fetchall()
            low, size, expanded = rows[0][0], rows[0][1], rows[0][2]
            found = [row[3:] for row in rows if row[3] is not None]
            least = found[-1][1] if len(found) == max_results else -1
            if size == self._window and least < len(words):
                terms = orjson.loads(expanded) if expanded else []
                found += self._search_older(conn, words, terms, params, in_scope, every_word, score, result, low, least)
                found.sort(key=lambda row: (row[1], row[0]), reverse=True)
            conn.execute(b"COMMIT")
        return [
            {
                "delegation_id": str(row[2]),
                "target_tier": row[3],
                "task": row[4],
                "summary": row[5],
                "completed_at": _stamp(row[6]),
            }
            for row in found[:max_results]
        ]

    @staticmethod
    def _search_older(
        conn: psycopg.Connection,
        words: list[str],
        expansions: list[list[str]],
        params: dict[str, Any],
        in_scope: str,
        every_word: str,
        score: str,
        result: str,
        low: int,
        least: int,
    ) -> list[Any]:
        """The delegations completed before ``low`` that score more than ``least``; ``expansions``
        are the known words containing each run of word characters of the query.

        The candidates are the indexed delegations holding a known word for every run, and the
        ones still queued for the index (checked against their texts like every candidate).
        """
        # Only a better score can enter: with ``least`` one below the most, every word must be in
        # the summary, so the summary's words narrow the candidates.
        in_summary = least == len(words) - 1
        column = "summary_terms" if in_summary else "terms"
        narrowing: list[str] = []
        indexed: str | None = "true"
        for index, terms in enumerate(expansions):
            if not terms:
                indexed = None  # a run no indexed delegation holds: only queued ones can match
                break
            if len(terms) <= _BROAD:
                params[f"t{index}"] = terms
                narrowing.append(f"{column} && %(t{index})s::text[]")
        if indexed is not None and narrowing:
            indexed = "SELECT delegation_id FROM delegation_words WHERE " + " AND ".join(narrowing)
        if indexed is None:
            candidates: str | None = "SELECT delegation_id FROM index_queue"
        elif indexed == "true":
            candidates = None  # every word too common to narrow: the older delegations' texts decide
        else:
            candidates = f"{indexed} UNION ALL SELECT delegation_id FROM index_queue"
        better = (
            " AND ".join(f"folded_summary LIKE %(p{i})s" for i in range(len(words)))
            if in_summary
            else f"({score}) > %(least)s"
        )
        # Written so no b-tree index applies ("+ 0", "|| ''"): walking the scope's delegations by
        # recency is what the first look did; here the word indexes must choose the candidates
        # (a planner without statistics would otherwise walk every older delegation).
        unindexed_scope = in_scope.replace("scope = %(scope)s", "scope || '' = %(scope)s")
        conditions = " AND ".join([unindexed_scope, "completion_seq + 0 < %(low)s", every_word, better])
        source = "delegations d"
        if candidates is not None:
            # The candidates drive: each looks its delegation up by key ("OFFSET 0" keeps the
            # lookup from being turned into a join, which a planner short of statistics on the
            # young word table would do by walking every completed delegation instead).
            source = (
                f"(WITH c AS MATERIALIZED ({candidates}) SELECT x.* FROM c, LATERAL (SELECT * FROM delegations y "
                "WHERE y.delegation_id = c.delegation_id OFFSET 0) x) d"
            )
        older = (
            f"SELECT d.completion_seq, {score.replace('folded_summary', 'd.folded_summary')} AS score, {result} "
            f"FROM {source} WHERE {conditions} ORDER BY score DESC, d.completion_seq DESC LIMIT %(k)s"
        )
        return conn.execute(older.encode(), {**params, "low": low, "least": least}).fetchall()

    # -- plugin state (StateStore) -----------------------------------------------------------------

    _LOAD_STATE = "SELECT value::text, version FROM states WHERE namespace = %s AND key = %s"
    _STATE_VERSION = "SELECT version FROM states WHERE namespace = %s AND key = %s"

    def load_state(self, namespace: str, key: str) -> tuple[Any, int]:
        validate_state(namespace, key)
        with self._transaction("load_state") as conn:
            row = conn.execute(self._LOAD_STATE, (namespace, key)).fetchone()
        return (None, 0) if row is None else (orjson.loads(row[0]), int(row[1]))

    #: durable? -> kind ("insert", "update", "delete") -> the guarded write of ``save_state``.
    _SAVE_STATEMENTS = {durable: _save_statements(durable) for durable in (True, False)}

    def _save(self, namespace: str, key: str, value: Any, version: int) -> tuple[str, str, dict[str, Any]]:
        """(kind, statement, parameters) of ``save_state``."""
        text = validate_state(namespace, key, value, version)
        kind = "delete" if text is None else "update" if version else "insert"
        params = {"namespace": namespace, "key": key, "value": text, "version": version}
        return kind, self._SAVE_STATEMENTS[namespace not in HEURISTIC_NAMESPACES][kind], params

    @staticmethod
    def _missed(namespace: str, key: str, kind: str, version: int, found: Sequence[Any] | None) -> int | None:
        """After a guarded write that found another version (``found``: the row's version read
        then; a concurrent writer has committed by then, as the write waited for its row lock):
        the version to return, None to write again, or ``StateConflict``."""
        if found is None and kind == "delete":
            return 0  # nothing stored: nothing to delete, as in the tinydb backend
        current = 0 if found is None else int(found[0])
        if current != version:
            raise StateConflict(
                f"state {namespace}/{key} is at version {current}, not {version}: someone saved it "
                "meanwhile; load it again, apply your change to what it holds now, and save again"
            )
        return None  # deleted and saved again between the two statements, back at ``version``

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        kind, statement, params = self._save(namespace, key, value, version)
        with self._transaction("save_state") as conn:
            while True:
                row = conn.execute(statement, params).fetchone()
                if row is not None:
                    return int(row[0])
                found = conn.execute(self._STATE_VERSION, (namespace, key)).fetchone()
                done = self._missed(namespace, key, kind, version, found)
                if done is not None:
                    return done

    # The same two operations awaited on the caller's event loop (``AsyncStateStore``): the guard
    # state is loaded and saved on every tool call, and a hop to a worker thread for each statement
    # cost more than the statement (P17 in docs/benchmarks.md). Same statements, same answers, same
    # errors; the deadline bounds each operation as the watchdog bounds the threads' ones.

    async def load_state_async(self, namespace: str, key: str) -> tuple[Any, int]:
        validate_state(namespace, key)
        async with self._on_loop("load_state") as conn:
            row = await (await conn.execute(self._LOAD_STATE, (namespace, key))).fetchone()
        return (None, 0) if row is None else (orjson.loads(row[0]), int(row[1]))

    async def save_state_async(self, namespace: str, key: str, value: Any, version: int) -> int:
        kind, statement, params = self._save(namespace, key, value, version)
        async with self._on_loop("save_state") as conn:
            while True:
                row = await (await conn.execute(statement, params)).fetchone()
                if row is not None:
                    return int(row[0])
                found = await (await conn.execute(self._STATE_VERSION, (namespace, key))).fetchone()
                done = self._missed(namespace, key, kind, version, found)
                if done is not None:
                    return done

    @contextlib.asynccontextmanager
    async def _on_loop(self, what: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """``_transaction`` for the event loop: a connection of ``_LoopConnections``, the whole
        operation within the deadline — the wait for a connection by the loop's clock, the
        statements by the watchdog, which cuts them as it cuts the threads' (cancelling the task
        instead would have psycopg wait for the server to confirm the cancel: in a partition, never)."""
        if self._closed:
            raise StorageError(f"PostgreSQL store {self.where}/{self.schema}: the store is closed")
        stalled = self._stalled(what)
        if stalled is not None:
            raise stalled
        started = time.monotonic()
        try:
            # An idle connection without a suspension; wait_for (a task of its own) only to open one.
            idle = self._loop_conns.idle()
            conn = idle if idle is not None else await asyncio.wait_for(self._loop_conns.take(), self._timeout)
        except TimeoutError:
            raise self._failure(PoolTimeout("no connection"), what) from None
        except psycopg.Error as exc:
            raise self._failure(exc, what) from None
        clean = False
        entry = self._watchdog.enter(conn, self.deadline - (time.monotonic() - started))
        try:
            yield conn
            clean = True
        except StorageError:
            raise
        except psycopg.OperationalError as exc:
            self._loop_conns.close_idle()  # as dead as this one, most likely (a restarted server)
            if not entry[2]:
                raise self._failure(exc, what) from None
            # Cut at the deadline: stalled from now on, even before the watchdog's thread says so.
            self._late()
            raise self._failure(DeadlinePassed(str(exc)), what) from None
        except psycopg.Error as exc:
            raise self._failure(exc, what) from None
        finally:
            self._watchdog.leave(entry)
            self._loop_conns.give_back(conn, clean)

    def prune_states(self, namespace: str, older_than: float) -> int:
        seconds = validate_prune(namespace, older_than)
        with self._transaction("prune_states") as conn:
            row = conn.execute(
                "WITH gone AS (DELETE FROM states WHERE namespace = %s "
                "AND updated_at < now() - make_interval(secs => %s) RETURNING 1) SELECT count(*) FROM gone",
                (namespace, seconds),
            ).fetchone()
        return 0 if row is None else int(row[0])

    # -- audit trail, stats, lifecycle -------------------------------------------------------------

    def record_tool_call(self, record: ToolCallRecord) -> None:
        if self._closed:
            raise StorageError(f"PostgreSQL store {self.where}/{self.schema}: the store is closed")
        self._audit.add(record.to_dict())

    def flush(self) -> None:
        """Write the buffered audit records now (StorageError when the server cannot take them)."""
        if self._closed:
            raise StorageError(f"PostgreSQL store {self.where}/{self.schema}: the store is closed")
        stalled = self._stalled("writing the audit trail")
        if stalled is not None:
            raise stalled
        try:
            self._audit.flush()
        except PoolTimeout:
            raise PostgresUnavailable(f"writing the audit trail: no connection to PostgreSQL at {self.where}") from None
        except psycopg.Error as exc:
            raise PostgresUnavailable(f"writing the audit trail to PostgreSQL at {self.where} failed: {exc}") from None

    def stats(self) -> dict[str, int]:
        self.flush()
        with self._transaction("stats") as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM conversations), (SELECT coalesce(sum(count), 0) FROM messages), "
                "(SELECT count(*) FROM snapshots), count(*), count(*) FILTER (WHERE status = 'running'), "
                "count(*) FILTER (WHERE status = 'completed'), count(*) FILTER (WHERE status = 'failed'), "
                "(SELECT count(*) FROM tool_calls) FROM delegations"
            ).fetchone()
        assert row is not None
        names = (
            "conversations",
            "messages",
            "snapshots",
            "delegations",
            "running_delegations",
            "completed_delegations",
            "failed_delegations",
            "tool_calls",
        )
        return dict(zip(names, (int(value) for value in row), strict=True))

    def close(self) -> None:
        """Write the buffered audit records and close the pool; idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        self._finalizer()


def _shutdown(
    audit: AuditBuffer,
    indexer: SearchIndexer,
    lender: _Lender,
    pool: ConnectionPool,
    watchdog: Watchdog,
    stall: Stall,
    loop_conns: _LoopConnections,
) -> None:
    stall.close()
    loop_conns.close_idle()
    audit.cancel()
    audit.flush_quietly()
    # Whatever is still queued is indexed by the next process to start (and searched as queued
    # meanwhile); waiting here for a server that may be gone would hold up the close.
    indexer.stop()
    with contextlib.suppress(Exception):
        lender.return_all()
    with contextlib.suppress(Exception):
        pool.close(timeout=5)
    watchdog.stop()


class _Lender:
    """Lends the pool's connections, the one returned last first.

    psycopg_pool hands out the connection idle the longest, so operations made one after another
    rotate through every open connection, each with a server process gone cold meanwhile, and
    pay the pool's bookkeeping each time. The lender keeps the last cleanly returned connection
    aside for the next borrower — unless someone is already waiting in the pool, who gets it.
    Any other connection (its operation failed, or it holds an open transaction) goes back to the
    pool, which checks or discards it; so does the kept one every ``POOL_EVERY`` loans (the pool
    then applies its lifetime rules), before a pool check and at close. Everything of the store
    borrows through here, so no connection sits kept while another borrower waits.

    Background work (the audit buffer, the search indexer) borrows through ``background``: an
    idle pool connection when there is one, and the warm connection kept for the caller's next
    operation only when the pool has nothing else. (Taking the warm one meant a call meanwhile
    ran on a cold connection, and the warm one ended up back in the pool.)

    Every loan is bounded by the deadline: the wait for a connection, then the watchdog over the
    borrower's statements (a cut connection raises ``DeadlinePassed``).
    """

    POOL_EVERY = 1000

    def __init__(self, pool: ConnectionPool, watchdog: Watchdog, deadline: float) -> None:
        self._pool = pool
        self._watchdog = watchdog
        self._deadline = deadline
        self._lock = threading.Lock()
        self._kept: list[psycopg.Connection] = []
        self._warm: psycopg.Connection | None = None  # the connection kept last
        self._waiting = 0
        self._loans = 0

    def take(self) -> psycopg.Connection:
        with self._lock:
            if self._kept:
                return self._kept.pop()
            self._waiting += 1
        try:
            return self._pool.getconn(timeout=min(self._pool.timeout, self._deadline))
        finally:
            with self._lock:
                self._waiting -= 1

    def give_back(self, conn: psycopg.Connection, clean: bool) -> None:
        keep = (
            clean
            and not self._pool.closed
            and not conn.closed
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        with self._lock:
            self._loans += 1
            if keep and not self._kept and not self._waiting and self._loans % self.POOL_EVERY:
                self._kept.append(conn)
                self._warm = conn
                return
        self._pool.putconn(conn)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        started = time.monotonic()
        conn = self.take()
        clean = False
        # Inline rather than a nested context manager: this is every operation's path.
        entry = self._watchdog.enter(conn, self._deadline - (time.monotonic() - started))
        try:
            yield conn
            clean = True
        except psycopg.OperationalError as exc:
            if entry[2]:
                raise DeadlinePassed(str(exc)) from None
            raise
        finally:
            self._watchdog.leave(entry)
            self.give_back(conn, clean)

    #: How long background work waits for an idle pool connection before it takes the warm one.
    BACKGROUND_WAIT = 0.05

    @contextlib.contextmanager
    def background(self) -> Iterator[psycopg.Connection]:
        """A connection for background work, leaving the warm one to the caller's operations."""
        started = time.monotonic()
        try:
            conn = self._pool.getconn(timeout=self.BACKGROUND_WAIT)
        except PoolTimeout:
            conn = self.take()  # the pool is busy or at its size: any connection will do
        clean = False
        entry = self._watchdog.enter(conn, self._deadline - (time.monotonic() - started))
        try:
            yield conn
            clean = True
        except psycopg.OperationalError as exc:
            if entry[2]:
                raise DeadlinePassed(str(exc)) from None
            raise
        finally:
            self._watchdog.leave(entry)
            if conn is self._warm:
                self.give_back(conn, clean)
            else:
                self._pool.putconn(conn)

    def return_all(self) -> None:
        with self._lock:
            kept, self._kept = self._kept, []
        for conn in kept:
            self._pool.putconn(conn)


class _LoopConnections:
    """Connections for operations awaited on an event loop (``PostgresBackend._on_loop``).

    Lent to one operation at a time, so psycopg's per-connection lock is never contended and a
    connection may serve whichever loop borrows it next (tests run one loop after another).
    Opened on demand, at most ``size`` at once (beyond that an operation waits for one to come
    back, within its deadline); kept idle for the next operation; any that failed or holds an
    open transaction is closed instead.
    """

    def __init__(self, connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]], size: int) -> None:
        self._connect = connect
        self._size = max(1, size)
        self._lock = threading.Lock()
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._open = 0

    def idle(self) -> psycopg.AsyncConnection[Any] | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    async def take(self) -> psycopg.AsyncConnection[Any]:
        while True:
            with self._lock:
                if self._idle:
                    return self._idle.pop()
                if self._open < self._size:
                    self._open += 1
                    break
            await asyncio.sleep(0.001)  # all lent: one comes back within a statement's time
        try:
            return await self._connect()
        except BaseException:
            with self._lock:
                self._open -= 1
            raise

    def give_back(self, conn: psycopg.AsyncConnection[Any], clean: bool) -> None:
        keep = clean and not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        with self._lock:
            if keep:
                self._idle.append(conn)
                return
            self._open -= 1
        _finish(conn)

    def close_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for conn in idle:
            _finish(conn)


def _finish(conn: psycopg.AsyncConnection[Any]) -> None:
    """Close an async connection without a loop (all ``AsyncConnection.close`` does is this)."""
    with contextlib.suppress(Exception):
        conn.pgconn.finish()
