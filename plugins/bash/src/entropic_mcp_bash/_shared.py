"""Background runs any worker answers, when the store is shared between processes.

A run's process lives in the worker that started it (its *owner*); everything the tools report
about it lives in the store, so ``bash.output``, ``bash.kill`` and ``bash.list`` give the same
answers on every worker:

- ``bash.run`` / run id: the record (conversation, command, status, exit code, owner, start and
  end times, heartbeat, bytes written, the chunks holding the last ``max_unread`` bytes). Only the
  owner writes it.
- ``bash.chunk`` / ``<run id>/<n>``: up to ``CHUNK_BYTES`` of output (base64). The last chunk
  grows until full; chunks wholly before the unread window are deleted, so a run keeps at most
  ``max_unread + CHUNK_BYTES`` bytes in the store however long it prints.
- ``bash.read`` / run id: the shared read offset ("new output since the last read", whichever
  worker read last).
- ``bash.kill`` / run id: a kill request; the owner polls it every ``FLUSH_SECONDS`` while the
  run lives (the storage interface has no notifications), stops the run and records its end.
- ``bash.runs`` / conversation: the ids of the conversation's runs, for ``bash.list``.

The owner's spool thread writes output every ``FLUSH_SECONDS`` or ``FLUSH_BYTES``, whichever
comes first, and the record at least every ``HEARTBEAT_SECONDS``; a running record whose
heartbeat is older than ``LOST_AFTER`` (its worker died or lost the store) is reported ``lost``.
Heartbeats are wall-clock times: the workers' clocks must agree to well within ``LOST_AFTER``.
"""

from __future__ import annotations

import base64
import codecs
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from entropic_mcp import ToolError
from entropic_mcp.storage import StateConflict, StateStore, StorageError, update_document

if TYPE_CHECKING:
    from ._background import BackgroundRun

RUN = "bash.run"
CHUNK = "bash.chunk"
READ = "bash.read"
KILL = "bash.kill"
INDEX = "bash.runs"
CHUNK_BYTES = 16 * 1024
FLUSH_BYTES = 16 * 1024
FLUSH_SECONDS = 0.25
HEARTBEAT_SECONDS = 2.0
LOST_AFTER = 15.0
#: Rounds a change of a document several workers write (the read offset, the index) retries.
ATTEMPTS = 8

log = logging.getLogger("entropic_mcp_bash")


def unavailable(exc: Exception) -> ToolError:
    return ToolError(
        "storage_unavailable",
        f"background runs live in the store, which did not answer ({exc}); try again in a moment",
    )


def shown_command(command: str) -> str:
    return command if len(command) <= 200 else command[:197] + "..."


def status_of(record: dict[str, Any], now: float | None = None) -> str:
    """The record's status, ``lost`` for a running one whose owner stopped beating."""
    status = str(record["status"])
    if status == "running" and (now if now is not None else time.time()) - record["heartbeat"] > LOST_AFTER:
        return "lost"
    return status


def describe(record: dict[str, Any]) -> dict[str, object]:
    """What ``_background.describe`` says of a local run, from the record."""
    status = status_of(record)
    end = record["ended"] if record.get("ended") is not None else time.time()
    data: dict[str, object] = {
        "run_id": record["run_id"],
        "command": record["command"],
        "status": status,
        "elapsed_ms": max(0, round((end - record["started"]) * 1000)),
    }
    if record.get("exit_code") is not None:
        data["exit_code"] = record["exit_code"]
    return data


def load_run(store: StateStore, conversation: str, run_id: object) -> dict[str, Any]:
    record = None
    if isinstance(run_id, str) and run_id:
        try:
            record, _ = store.load_state(RUN, run_id)
        except StorageError as exc:
            raise unavailable(exc) from None
    if not isinstance(record, dict) or record.get("conversation") != conversation:
        raise ToolError(
            "unknown_run",
            f"no background command {run_id!r} in this conversation; bash.list shows the ones there are",
        )
    return record


def _offset(store: StateStore, run_id: str) -> tuple[int, int]:
    value, version = store.load_state(READ, run_id)
    return (int(value["offset"]) if isinstance(value, dict) else 0), version


def unread_bytes(store: StateStore, record: dict[str, Any]) -> int:
    offset, _ = _offset(store, record["run_id"])
    return max(0, min(record["written"] - offset, record["max_unread"]))


def read(store: StateStore, conversation: str, run_id: str) -> tuple[dict[str, Any], str, int]:
    """The record, the output since the last read on any worker, and the unread bytes dropped.

    Bytes past ``max_unread`` unread are dropped oldest first, as on the owner; an incomplete
    UTF-8 character at the end of a running run's output is left for the next read.
    """
    try:
        for _ in range(ATTEMPTS):
            record = load_run(store, conversation, run_id)
            offset, version = _offset(store, run_id)
            written = record["written"]
            floor = max(0, written - record["max_unread"])
            start = max(offset, floor)
            data = bytearray()
            position = start
            for _seq, at, length in record["chunks"]:
                end = min(at + length, written)
                if end <= position:
                    continue
                value, _ = store.load_state(CHUNK, f"{run_id}/{_seq}")
                raw = base64.b64decode(value["data"]) if isinstance(value, dict) else b""
                if at > position or len(raw) < end - at:
                    break  # deleted since the record was read: what follows is newer, read again
                data += raw[position - at : end - at]
                position = end
            if position != written and record["chunks"]:
                continue
            final = status_of(record) != "running"
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            text = decoder.decode(bytes(data), final=final)
            held = len(decoder.getstate()[0])
            new_offset = max(offset, written - held)
            if new_offset != offset:
                try:
                    store.save_state(READ, run_id, {"offset": new_offset}, version)
                except StateConflict:
                    continue  # another worker read meanwhile: that output is theirs, read what is left
            return record, text, max(0, floor - offset)
    except StorageError as exc:
        raise unavailable(exc) from None
    raise ToolError("run_busy", f"{run_id} is being read by other calls right now; read it again")


def request_kill(store: StateStore, run_id: str, *, forget: bool = False) -> None:
    try:
        value, version = store.load_state(KILL, run_id)
        if isinstance(value, dict) and (value.get("forget") or not forget):
            return
        store.save_state(KILL, run_id, {"forget": forget}, version)
    except StateConflict:
        return  # another request came first; the owner acts on one
    except StorageError as exc:
        raise unavailable(exc) from None


def wait_ended(store: StateStore, conversation: str, run_id: str, timeout: float) -> dict[str, Any]:
    """The record once the owner has recorded the run's end (or it is lost), or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        record = load_run(store, conversation, run_id)
        if status_of(record) != "running" or time.monotonic() >= deadline:
            return record
        time.sleep(0.1)


def forget(store: StateStore, run_id: str, record: dict[str, Any] | None = None) -> None:
    """Delete every document of a run (its owner has stopped it, or is gone)."""
    if record is None:
        record, _ = store.load_state(RUN, run_id)
    if isinstance(record, dict):
        for seq, _at, _length in record.get("chunks", ()):
            _delete(store, CHUNK, f"{run_id}/{seq}")
    for namespace in (READ, KILL, RUN):
        _delete(store, namespace, run_id)


def _delete(store: StateStore, namespace: str, key: str) -> None:
    try:
        update_document(store, namespace, key, lambda stored: None, attempts=ATTEMPTS)
    except StateConflict:
        pass  # saved again by another writer at every attempt: left to it


def run_ids(store: StateStore, conversation: str) -> list[str]:
    try:
        value, _ = store.load_state(INDEX, conversation)
    except StorageError as exc:
        raise unavailable(exc) from None
    return [str(i) for i in value["runs"]] if isinstance(value, dict) else []


def records(store: StateStore, conversation: str) -> list[dict[str, Any]]:
    """The conversation's run records, oldest first (ids whose record is gone are skipped)."""
    found = []
    try:
        for run_id in run_ids(store, conversation):
            record, _ = store.load_state(RUN, run_id)
            if isinstance(record, dict) and record.get("conversation") == conversation:
                found.append(record)
    except StorageError as exc:
        raise unavailable(exc) from None
    return found


def change_index(store: StateStore, conversation: str, change: Callable[[list[str]], list[str]]) -> None:
    def apply(value: Any) -> Any:
        new = change([str(i) for i in value["runs"]] if isinstance(value, dict) else [])
        return {"runs": new} if new else None

    try:
        update_document(store, INDEX, conversation, apply, attempts=ATTEMPTS)
    except StateConflict:
        log.warning("the list of background runs of conversation %r kept changing; not updated", conversation)


def new_record(
    store: StateStore, make_id: Callable[[], str], *, conversation: str, command: str, owner: str, max_unread: int
) -> tuple[dict[str, Any], int]:
    """Store the record of a run about to start under an id no worker has used; returns it and its version."""
    now = time.time()
    for _ in range(ATTEMPTS):
        record: dict[str, Any] = {
            "run_id": make_id(),
            "conversation": conversation,
            "command": shown_command(command),
            "owner": owner,
            "pid": None,
            "status": "running",
            "exit_code": None,
            "started": now,
            "ended": None,
            "heartbeat": now,
            "written": 0,
            "max_unread": max_unread,
            "chunks": [],
        }
        try:
            return record, store.save_state(RUN, record["run_id"], record, 0)
        except StateConflict:
            continue  # the id is taken (another worker's run): draw again
        except StorageError as exc:
            raise unavailable(exc) from None
    raise ToolError("storage_unavailable", "no free background run id could be stored; try again")


class Spool:
    """The owner's side of one shared run: output, state and heartbeat to the store, kill requests from it.

    ``feed`` (the run's watcher thread) only appends to a bounded buffer; a thread of its own
    writes to the store, so a slow store never delays the run's timeout or its kill.
    """

    def __init__(self, store: StateStore, record: dict[str, Any], version: int) -> None:
        self.store = store
        self.record = record
        self.run_id: str = record["run_id"]
        self.max_unread: int = record["max_unread"]
        self._version = version
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._pending = bytearray()
        self._pending_at = 0
        self._open = bytearray()  # the last chunk's bytes, while it has room
        self._open_version = 0
        self._next_seq = 0
        self._wake = threading.Event()
        self._beat = 0.0
        #: Set by a conversation's end: the run's documents are deleted once it has stopped.
        self.forget = False
        self.run: BackgroundRun | None = None
        self._thread: threading.Thread | None = None

    def feed(self, data: bytes) -> None:
        with self._lock:
            self._pending += data
            excess = len(self._pending) - self.max_unread
            if excess > 0:  # never readable anyway: past the unread window before it was written
                del self._pending[:excess]
                self._pending_at += excess
            if len(self._pending) >= FLUSH_BYTES:
                self._wake.set()

    def attach(self, run: BackgroundRun) -> None:
        self.run = run
        self.record["pid"] = run.pid
        self._thread = threading.Thread(target=self._loop, name=f"bash-{self.run_id}-spool", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def drop(self) -> None:
        """Make the run unknown to every worker at once (its conversation ended); its other
        documents are deleted once it has stopped."""
        self.forget = True
        try:
            _delete(self.store, RUN, self.run_id)
        except StorageError:
            log.warning("could not delete the record of background run %s", self.run_id, exc_info=True)

    def join(self, timeout: float) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @property
    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    def flush(self) -> None:
        """Write what the run printed since the last flush, and its state; store failures are logged."""
        run = self.run
        assert run is not None
        with self._flushing:
            ended = not run.running  # read before the buffer: everything fed before the end is taken
            with self._lock:
                data, at = bytes(self._pending), self._pending_at
                self._pending.clear()
                self._pending_at = at + len(data)
            try:
                self._write(data, at, run if ended else None)
            except StorageError:
                log.warning("could not spool the output of background run %s", self.run_id, exc_info=True)
                with self._lock:  # kept for the next flush, still bounded by the unread window
                    self._pending[0:0] = data
                    self._pending_at = at
                    excess = len(self._pending) - self.max_unread
                    if excess > 0:
                        del self._pending[:excess]
                        self._pending_at += excess

    def _write(self, data: bytes, at: int, ended: BackgroundRun | None) -> None:
        record = self.record
        chunks: list[list[int]] = [list(c) for c in record["chunks"]]
        if data:
            if chunks and chunks[-1][1] + chunks[-1][2] == at and len(self._open) < CHUNK_BYTES:
                taken = data[: CHUNK_BYTES - len(self._open)]
                self._open += taken
                self._save_chunk(chunks[-1][0], self._open)
                chunks[-1][2] = len(self._open)
                data, at = data[len(taken) :], at + len(taken)
            while data:
                seq, self._next_seq = self._next_seq, self._next_seq + 1
                self._open, self._open_version = bytearray(data[:CHUNK_BYTES]), 0
                self._save_chunk(seq, self._open)
                chunks.append([seq, at, len(self._open)])
                data, at = data[CHUNK_BYTES:], at + len(self._open)
        written = max(record["written"], at)
        floor = written - self.max_unread
        gone = [c for c in chunks if c[1] + c[2] <= floor]
        chunks = [c for c in chunks if c[1] + c[2] > floor]
        new = {**record, "written": written, "chunks": chunks, "heartbeat": time.time()}
        if ended is not None:
            new.update(
                status=ended.status, exit_code=ended.exit_code, ended=record["started"] + ended.elapsed_ms() / 1000
            )
        try:
            self._version = self.store.save_state(RUN, self.run_id, new, self._version)
        except StateConflict:
            # Only the owner writes the record: it was deleted (the conversation ended, here or
            # on a worker to which this one looked lost). Stop the run and leave nothing behind.
            self.forget = True
            self.record = {**record, "chunks": chunks + gone}  # for _finish to delete them all
            if ended is None and self.run is not None:
                self.run.stop()
            return
        self.record = new
        self._beat = time.monotonic()
        for seq, _at, _length in gone:
            _delete(self.store, CHUNK, f"{self.run_id}/{seq}")

    def _save_chunk(self, seq: int, data: bytearray) -> None:
        key = f"{self.run_id}/{seq}"
        value = {"data": base64.b64encode(data).decode()}
        try:
            self._open_version = self.store.save_state(CHUNK, key, value, self._open_version)
        except StateConflict:  # a failed flush stored it after all: overwrite
            _, version = self.store.load_state(CHUNK, key)
            self._open_version = self.store.save_state(CHUNK, key, value, version)

    def _loop(self) -> None:
        run = self.run
        assert run is not None
        try:
            while True:
                self._wake.wait(FLUSH_SECONDS)
                self._wake.clear()
                ended = not run.running
                with self._lock:
                    pending = bool(self._pending)
                if pending or ended or time.monotonic() - self._beat >= HEARTBEAT_SECONDS:
                    self.flush()
                # The end is recorded, the documents are to go anyway, or the store has not
                # answered for so long that the run reads as lost.
                recorded = self.record["status"] != "running"
                if ended and (recorded or self.forget or time.monotonic() - self._beat > LOST_AFTER):
                    break
                if not ended:
                    self._poll_kill(run)
        finally:
            self._finish()

    def _poll_kill(self, run: BackgroundRun) -> None:
        try:
            value, _ = self.store.load_state(KILL, self.run_id)
        except StorageError:
            return  # asked again at the next tick
        if isinstance(value, dict):
            if value.get("forget"):
                self.forget = True
            run.stop()

    def _finish(self) -> None:
        try:
            if self.forget:
                forget(self.store, self.run_id, self.record)
            else:
                _delete(self.store, KILL, self.run_id)
        except StorageError:
            log.warning("could not tidy the documents of background run %s", self.run_id, exc_info=True)
