"""The built-in ``tinydb`` backend: a journal replayed into in-memory TinyDB tables.

Layout of ``[storage] path`` (a directory):

- ``snapshot.json`` — the store as of its generation, in TinyDB's JSON layout (open it with
  ``TinyDB(path, access_mode="r")`` to look inside); replaced atomically by compaction.
- ``journal-<generation>.jsonl`` — every change since that snapshot, one JSON line each, fsync'd
  before the method returns. A last line cut short (a crash mid-append: the start of a line,
  without its end) is ignored, and the next append moves its bytes to
  ``torn-<offset>-journal-<generation>.jsonl`` before cutting it off; any other unreadable line —
  including a last line that is complete or damaged but lacks its line end — stops the store with
  an error naming the file.
- ``messages-<n>.jsonl`` — message batches too big to keep in memory (see ``_segments``); the
  journal and the tables hold only where they are.
- ``tool_calls.jsonl`` — the audit trail, appended in batches (see ``_audit``).
- ``.lock``, ``.audit.lock`` — the cross-process locks.

Every operation takes the lock, first replays what other processes appended since it last
looked (a ``stat`` when nothing changed), then validates, appends, and applies in memory. When the
journal outgrows the snapshot, the next write compacts: a new snapshot (temp + fsync + rename)
and an empty journal of the next generation.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .._errors import StorageError
from ._audit import AuditLog
from ._files import atomic_write, fsync_dir, write_all
from ._lock import StoreLock
from ._options import check_options
from ._records import DEFAULT_SCOPE, ToolCallRecord, check_record
from ._segments import Segments
from ._state import TABLES, StoreState, dumps

if TYPE_CHECKING:
    from .._config import Config

log = logging.getLogger("entropic_mcp.storage")

FORMAT = 1
SNAPSHOT = "snapshot.json"
AUDIT = "tool_calls.jsonl"
LOCK = ".lock"
_JOURNAL = re.compile(r"journal-(\d+)\.jsonl")
_OPERATIONS = frozenset(
    {
        "create_conversation",
        "save_messages",
        "delete_conversation",
        "save_snapshot",
        "create_delegation",
        "complete_delegation",
        "save_state",
        "prune_states",
    }
)

#: ``[storage] options`` the tinydb backend understands, with their defaults.
OPTIONS: dict[str, tuple[type, Any, str]] = {
    "compact_bytes": (int, 8 << 20, "journal size (bytes) before compaction is considered"),
    "inline_bytes": (int, 2048, "message batches larger than this (bytes of JSON) go to segment files"),
    "segment_bytes": (int, 64 << 20, "size at which a new message segment file is started"),
    "audit_batch": (int, 256, "tool-call records buffered before they are written"),
    "audit_flush_seconds": (float, 1.0, "longest a buffered tool-call record waits"),
    "lock_timeout": (float, 30.0, "seconds to wait for another process's lock"),
}


def _journal_name(generation: int) -> str:
    return f"journal-{generation:08d}.jsonl"


def _damage(tail: bytes) -> str | None:
    """Why ``tail`` (the journal after its last line end) is not a write cut short; None if it is.

    A crash mid-append leaves the start of a line: JSON that ends too early (possibly in the middle
    of a UTF-8 character), or zeros where the file system extended the file without the data. A
    complete entry without its line end, or bytes that are not the start of one, were changed
    after the write that returned — an acknowledged operation would be lost by cutting them.
    """
    if not tail.strip(b"\x00"):
        return None
    text = tail
    try:
        tail.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.end == len(tail):
            text = tail[: exc.start]  # a character cut in two by the crash
        else:
            return f"is damaged (not UTF-8 at byte {exc.start} of the entry)"
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        # orjson counts characters, not bytes
        if exc.pos >= len(text.decode("utf-8")) and exc.msg == "unexpected end of data":
            return None
        return f"is damaged ({exc.msg} at byte {exc.pos} of the entry) and lacks its line end"
    return "is complete but lacks its line end, so the file was changed after the entry was written"


class TinyDBBackend:
    """The default store: embedded, nothing to run, safe between processes.

    Args:
        path: the store directory (created if missing).
        compact_bytes: journal size that triggers compaction (also when it outgrows the snapshot).
        inline_bytes: message batches larger than this (JSON bytes) are kept in segment files.
        segment_bytes: size at which a new message segment file is started.
        audit_batch: tool-call records buffered before a write.
        audit_flush_seconds: the longest a buffered tool-call record waits.
        lock_timeout: seconds to wait for another process holding the lock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        compact_bytes: int = 8 << 20,
        inline_bytes: int = 2048,
        segment_bytes: int = 64 << 20,
        audit_batch: int = 256,
        audit_flush_seconds: float = 1.0,
        lock_timeout: float = 30.0,
    ) -> None:
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise StorageError(
                f"{self.path}: exists and is not a directory; [storage] path names a directory"
            ) from None
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot create the store directory ({exc.strerror})") from None
        # The store lives inside projects: keep it out of git (and so out of the filesystem
        # server's walks, which honour .gitignore), as pytest and mypy do with their caches.
        ignore = self.path / ".gitignore"
        if not ignore.exists():
            with contextlib.suppress(OSError):  # a read-only store still opens without it
                ignore.write_text("# created by entropic-mcp: the store is local state\n*\n", encoding="utf-8")
        self._snapshot_path = self.path / SNAPSHOT
        self._lock = StoreLock(self.path / LOCK, lock_timeout)
        self._compact_bytes = compact_bytes
        self._inline_bytes = inline_bytes
        self._segments = Segments(self.path, segment_bytes)
        self._mutex = threading.RLock()
        self._state = StoreState(read_ref=self._segments.read)
        self._generation: int | None = None  # None: (re)load everything at the next operation
        self._snapshot_signature: tuple[int, int, int] | None = None
        self._snapshot_size = 0
        self._offset = 0  # bytes of the journal applied
        self._torn_at: int | None = None  # start of a torn last line, cut before the next append
        self._read_fd: int | None = None
        self._write_fd: int | None = None
        self._closed = False
        self._audit = AuditLog(
            self.path / AUDIT, batch=audit_batch, seconds=audit_flush_seconds, lock_timeout=lock_timeout
        )
        self._finalizer = weakref.finalize(self, self._audit.close)
        try:
            with self._locked():
                pass
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_config(cls, config: Config) -> TinyDBBackend:
        """Open the store at ``config.storage_path`` with ``[storage] options``."""
        options = check_options(config.storage.options, OPTIONS, "tinydb")
        return cls(config.storage_path, **options)

    def __repr__(self) -> str:
        return f"TinyDBBackend({str(self.path)!r})"

    # -- locking and catching up -------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._mutex:
            if self._closed:
                raise StorageError(f"{self.path}: the store is closed")
            self._lock.acquire()
            try:
                try:
                    self._catch_up()
                except BaseException:
                    self._forget()
                    raise
                yield
            finally:
                self._lock.release()

    def _forget(self) -> None:
        """Drop what is loaded, so the next operation reloads from the files."""
        self._generation = None
        self._close_fds()

    def _close_fds(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._read_fd = self._write_fd = None

    def _journal_path(self) -> Path:
        return self.path / _journal_name(self._generation or 0)

    def _catch_up(self) -> None:
        try:
            st = os.stat(self._snapshot_path)
            signature: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            signature = None
        except OSError as exc:
            raise StorageError(f"{self._snapshot_path}: cannot read ({exc.strerror})") from None
        if self._generation is None or signature != self._snapshot_signature:
            self._load_snapshot(signature)
        self._read_journal()

    def _load_snapshot(self, signature: tuple[int, int, int] | None) -> None:
        self._close_fds()
        self._offset = 0
        self._torn_at = None
        if signature is None:
            if self._generation:
                raise StorageError(
                    f"{self._snapshot_path}: disappeared while the store was open; restore it from a backup"
                )
            later = sorted(int(match.group(1)) for name in os.listdir(self.path) if (match := _JOURNAL.fullmatch(name)))
            if later and later[-1] > 0:
                raise StorageError(
                    f"{self._snapshot_path}: missing, but {_journal_name(later[-1])} shows the store was compacted; "
                    "restore snapshot.json from a backup (nothing was changed)"
                )
            self._state = StoreState(read_ref=self._segments.read)
            self._generation = 0
            self._snapshot_signature = None
            self._snapshot_size = 0
            return
        try:
            data = self._snapshot_path.read_bytes()
        except OSError as exc:
            raise StorageError(f"{self._snapshot_path}: cannot read ({exc.strerror})") from None
        try:
            tables = orjson.loads(data)
            meta = tables.pop("_meta")["1"]
            if meta["format"] != FORMAT:
                raise ValueError(f"format {meta['format']!r}, this version reads format {FORMAT}")
            generation = meta["generation"]
            if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
                raise ValueError(f"bad generation {generation!r}")
            next_ids = meta.get("next_ids") or {}
            if not set(next_ids) <= set(TABLES) or not all(isinstance(v, int) and v >= 1 for v in next_ids.values()):
                raise ValueError(f"bad next_ids {next_ids!r}")
            state = StoreState(tables, read_ref=self._segments.read, next_ids=next_ids)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StorageError(
                f"{self._snapshot_path}: not a readable entropic-mcp store snapshot ({type(exc).__name__}: {exc}); "
                "the file was left as it is — restore it from a backup or move the directory away"
            ) from None
        self._state = state
        self._generation = generation
        self._snapshot_signature = signature
        self._snapshot_size = len(data)

    def _read_journal(self) -> None:
        path = self._journal_path()
        if self._read_fd is None:
            try:
                self._read_fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                if self._offset:
                    raise StorageError(
                        f"{path}: disappeared while the store was open; restore it from a backup"
                    ) from None
                return
            except OSError as exc:
                raise StorageError(f"{path}: cannot read ({exc.strerror})") from None
        st = os.fstat(self._read_fd)
        try:
            replaced = os.stat(path).st_ino != st.st_ino
        except FileNotFoundError:
            replaced = True
        if replaced:
            # Writing on would go to a file nobody will read again.
            raise StorageError(f"{path}: was removed or replaced by another program while the store was open")
        size = st.st_size
        if size < self._offset:
            raise StorageError(f"{path}: shrank from {self._offset} to {size} bytes; another program changed it")
        if size == self._offset:
            return
        data = os.pread(self._read_fd, size - self._offset, self._offset)
        end = data.rfind(b"\n") + 1
        position = self._offset
        for line in data[:end].split(b"\n")[:-1]:
            try:
                op = orjson.loads(line)
                if not isinstance(op, dict) or op.get("op") not in _OPERATIONS:
                    raise ValueError("not an operation")
            except (orjson.JSONDecodeError, ValueError) as exc:
                raise StorageError(
                    f"{path}: corrupt entry at byte {position} ({exc}); the file was left as it is — "
                    "restore it from a backup or move the directory away"
                ) from None
            try:
                self._state.apply(op)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise StorageError(
                    f"{path}: entry at byte {position} does not fit the store ({type(exc).__name__}: {exc}); "
                    "the file was left as it is"
                ) from None
            position += len(line) + 1
            self._offset = position
        tail = data[end:]
        if tail:
            problem = _damage(tail)
            if problem is not None:
                raise StorageError(
                    f"{path}: the last entry (at byte {position}) {problem}; the file was left as it is — "
                    "restore it from a backup or move the directory away"
                )
        self._torn_at = self._offset if tail else None

    # -- writing -----------------------------------------------------------------------------------

    def _commit(self, op: dict[str, Any]) -> None:
        """Append ``op`` durably, then apply it; on failure nothing changes and StorageError says why."""
        messages = op.get("messages")
        if messages:
            body = dumps(messages, "messages")
            if len(body) > self._inline_bytes:
                ref = self._segments.append(body)
                op = {key: value for key, value in op.items() if key != "messages"}
                op.update(ref=ref, count=len(messages))
        line = dumps(op, "operation") + b"\n"
        path = self._journal_path()
        if self._write_fd is None:
            try:
                created = not path.exists()
                self._write_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            except OSError as exc:
                raise StorageError(f"{path}: cannot open for writing ({exc.strerror}); nothing was changed") from None
            if created:
                fsync_dir(self.path)
        try:
            if self._torn_at is not None:
                self._keep_torn(path, self._torn_at)
                os.ftruncate(self._write_fd, self._torn_at)
                self._torn_at = None
            write_all(self._write_fd, line)
            os.fsync(self._write_fd)
        except OSError as exc:
            try:
                os.ftruncate(self._write_fd, self._offset)
            except OSError:
                self._torn_at = self._offset
            raise StorageError(f"{path}: write failed ({exc.strerror or exc}); nothing was changed") from None
        self._offset += len(line)
        try:
            self._state.apply(op)
        except Exception as exc:
            # The operation is durable but memory may be half-changed: reload from the files.
            self._forget()
            raise StorageError(
                f"{path}: applying {op['op']} failed ({type(exc).__name__}: {exc}); the store will reload"
            ) from exc
        if self._offset >= max(self._compact_bytes, self._snapshot_size):
            self._compact()
        self._flush_audit_quietly()

    def _keep_torn(self, path: Path, offset: int) -> None:
        """Move the bytes of a write cut short aside before they are cut off, and say so."""
        with path.open("rb") as journal:
            journal.seek(offset)
            torn = journal.read()
        if not torn:
            return
        aside = path.with_name(f"torn-{offset}-{path.name}")
        atomic_write(aside, torn)
        log.warning(
            "%s: the last %d bytes were the start of an entry a crash cut short; moved to %s and cut off",
            path,
            len(torn),
            aside.name,
        )

    def _compact(self) -> None:
        # Under the lock nobody else compacts, so temp files left here are from a crashed one.
        for stale in self.path.glob(f".{SNAPSHOT}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
        generation = (self._generation or 0) + 1
        meta = {
            "format": FORMAT,
            "generation": generation,
            "written_at": datetime.now(UTC).isoformat(),
            "next_ids": self._state.next_ids(),
        }
        try:
            data = orjson.dumps({"_meta": {"1": meta}, **self._state.dump()})
            journal = self.path / _journal_name(generation)
            fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            atomic_write(self._snapshot_path, data)  # the commit point
            st = os.stat(self._snapshot_path)
        except (OSError, StorageError) as exc:
            # The operation itself is already durable in the journal; compaction retries later.
            self._snapshot_size = max(self._snapshot_size, self._offset) * 2
            log.warning("compaction of %s postponed: %s", self.path, exc)
            return
        old = self._journal_path()
        self._close_fds()
        self._generation = generation
        self._snapshot_signature = (st.st_ino, st.st_mtime_ns, st.st_size)
        self._snapshot_size = len(data)
        self._offset = 0
        self._torn_at = None
        for name in os.listdir(self.path):
            match = _JOURNAL.fullmatch(name)
            if (match and int(match.group(1)) < generation) or name == old.name:
                with contextlib.suppress(OSError):
                    os.unlink(self.path / name)

    def _flush_audit_quietly(self) -> None:
        try:
            self._audit.flush()
        except StorageError as exc:
            log.warning("audit trail not written yet: %s", exc)

    # -- the protocol ------------------------------------------------------------------------------

    def create_conversation(
        self, title: str, metadata: Mapping[str, Any] | None = None, scope: str = DEFAULT_SCOPE
    ) -> str:
        with self._locked():
            op = self._state.prepare_create_conversation(title, metadata, scope)
            self._commit(op)
            return op["conversation_id"]

    def scope_of(self, conversation_id: str) -> str | None:
        with self._locked():
            return self._state.scope_of(conversation_id)

    def save_messages(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        with self._locked():
            self._commit(self._state.prepare_save_messages(conversation_id, messages))

    def load_conversation(self, conversation_id: str) -> dict[str, Any]:
        with self._locked():
            return self._state.load_conversation(conversation_id)

    def list_conversations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        with self._locked():
            return self._state.list_conversations(limit, offset)

    def delete_conversation(self, conversation_id: str) -> None:
        with self._locked():
            self._commit(self._state.prepare_delete_conversation(conversation_id))

    def save_snapshot(self, conversation_id: str, messages: Sequence[Mapping[str, Any]]) -> str:
        with self._locked():
            op = self._state.prepare_save_snapshot(conversation_id, messages)
            self._commit(op)
            return op["snapshot_id"]

    def create_delegation(
        self,
        parent_id: str,
        delegating_tier: str,
        target_tier: str,
        task: str,
        max_turns: int = -1,
        context: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[str, str]:
        with self._locked():
            op = self._state.prepare_create_delegation(
                parent_id, delegating_tier, target_tier, task, max_turns, context
            )
            self._commit(op)
            return op["delegation_id"], op["child_conversation_id"]

    def complete_delegation(self, delegation_id: str, status: str, summary: str) -> None:
        with self._locked():
            self._commit(self._state.prepare_complete_delegation(delegation_id, status, summary))

    def load_delegation_with_messages(self, delegation_id: str) -> dict[str, Any]:
        with self._locked():
            return self._state.load_delegation_with_messages(delegation_id)

    def latest_delegation_for_target(self, target_tier: str, scope: str | None = None) -> str | None:
        with self._locked():
            return self._state.latest_delegation_for_target(target_tier, scope)

    def search_delegations(self, query: str, max_results: int = 3, scope: str | None = None) -> list[dict[str, Any]]:
        with self._locked():
            return self._state.search_delegations(query, max_results, scope)

    def list_delegations(self, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        with self._locked():
            return self._state.list_delegations(limit, offset)

    def load_state(self, namespace: str, key: str) -> tuple[Any, int]:
        with self._locked():
            return self._state.load_state(namespace, key)

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        with self._locked():
            op = self._state.prepare_save_state(namespace, key, value, version)
            self._commit(op)
            return int(op["version"])

    def prune_states(self, namespace: str, older_than: float) -> int:
        with self._locked():
            op = self._state.prepare_prune_states(namespace, older_than)
            if op["keys"]:
                self._commit(op)
            return len(op["keys"])

    def record_tool_call(self, record: ToolCallRecord) -> None:
        self._audit.record(check_record(record).to_dict())

    def stats(self) -> dict[str, int]:
        with self._locked():
            counts = self._state.stats()
        counts["tool_calls"] = self._audit.count()
        return counts

    def flush(self) -> None:
        """Write the buffered audit records now."""
        self._audit.flush()

    def close(self) -> None:
        """Write the buffered audit records and release the files; idempotent."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._close_fds()
            self._segments.close()
            self._lock.close()
        self._finalizer()
