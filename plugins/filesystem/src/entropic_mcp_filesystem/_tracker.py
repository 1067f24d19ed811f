"""The per-conversation read tracker behind read-before-write and changed-since-read.

A read records the file's stat identity (device, inode, size, mtime, ctime) instead of hashing
it whole on every page: any write to a file moves its ctime, and no unprivileged call sets ctime
back (``os.utime`` restoring the mtime moves the ctime too). What the identity cannot see is a
change within the filesystem's timestamp granularity of the change before it (the "racy git"
case: two writes in one clock tick leave one ctime), so a file changed less than ``RACY_NS``
before it is read is hashed whole, as before, and the write compares the hash. Writes and edits
read the file whole anyway; they record the hash of what they wrote.

Where it lives: this process's memory, unless the store is one several processes share
(``StorageConfig.shares_state``: PostgreSQL behind several serve workers, or
``conversation_state = "store"``). Then each conversation has one document in the store
(namespace ``filesystem.reads``), loaded by every check and changed (load, apply, save guarded by
its version, re-applied on a conflict) by every read and write, so a read answered by one worker
lets another worker's edit through and a change between them is still refused. The stored
identity names the file by device and inode: the workers must see the project on one machine or
one shared filesystem, at the same path (a second mount of the same tree has other device
numbers, and its files look changed).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import orjson
from entropic_mcp import CallContext, ToolError
from entropic_mcp.storage import UNCHANGED, StateConflict, StateStore, StorageError, update_document

if TYPE_CHECKING:
    Files = OrderedDict[str, "Seen"]

MAX_CONVERSATIONS = 1024
MAX_FILES_PER_CONVERSATION = 4096
#: A file whose last change is younger than this at the read is hashed whole: its stat identity
#: may not move for a write in the same timestamp tick (ext4 and tmpfs tick with the kernel's
#: coarse clock, up to 10 ms; FAT keeps 2 s; a network server's clock may run ahead).
RACY_NS = 2_000_000_000
#: The store's namespace for the read tracker shared by several workers; the key is the conversation.
NAMESPACE = "filesystem.reads"
#: A stored conversation's document, as JSON, stays under this (the oldest entries go first): it
#: is loaded and saved whole on every read and write, and the store refuses documents over 1 MiB.
MAX_STORED_BYTES = 256 * 1024
#: Saves retried when another worker changed the same conversation's document meanwhile.
SAVE_ATTEMPTS = 8

log = logging.getLogger("entropic_mcp_filesystem")

Identity = tuple[int, int, int, int, int]


def identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def st_key(st: os.stat_result) -> tuple[int, int]:
    return (st.st_size, st.st_mtime_ns)


def identity_vouches(st: os.stat_result, now_ns: int | None = None) -> bool:
    """True when any later change to the file will show in its stat identity."""
    now = time.time_ns() if now_ns is None else now_ns
    return now - max(st.st_ctime_ns, st.st_mtime_ns) >= RACY_NS


def digest(data: bytes) -> bytes:
    import hashlib  # imported on first use: listing tools must stay cheap

    return hashlib.blake2b(data, digest_size=16).digest()


@attrs.frozen(kw_only=True)
class Seen:
    """A file as the conversation last saw it (read or written)."""

    size: int
    mtime_ns: int
    #: The whole content's hash; None when ``identity`` alone vouches for it (a page was read).
    digest: bytes | None
    identity: Identity | None = None
    #: False: only the file's status was seen (file_info, list_directory), not its content. Enough
    #: to move or delete it unchanged, never to write or edit it.
    content: bool = True


def store_of(ctx: CallContext) -> StateStore | None:
    """The store this conversation's reads are tracked in; None: this process's memory (one
    process: tinydb, none, or a server used bare).

    Raises:
        ToolError: the shared store is configured but cannot be opened.
    """
    return ctx.services.state_store(
        "what this conversation has read",
        shared_only=True,
        then="Nothing was changed; try again once the store answers.",
    )


def _put(files: Files, path: str, seen: Seen, max_files: int) -> None:
    files[path] = seen
    files.move_to_end(path)
    while len(files) > max_files:
        files.popitem(last=False)


def _still_stands(seen: Seen | None, st: os.stat_result, ident: Identity) -> bool:
    """A read recorded earlier still stands for the file with this status (a status adds nothing)."""
    return (
        seen is not None
        and seen.content
        and (seen.identity == ident or (seen.identity is None and (seen.size, seen.mtime_ns) == st_key(st)))
    )


def _moved(files: Files, source: str, destination: str) -> bool:
    seen = files.pop(source, None)
    below = source.rstrip("/") + "/"
    stale = [p for p in files if p.startswith(below)]
    for path in stale:
        del files[path]
    if seen is not None and seen.content:  # a status says nothing once the move changed it
        files[destination] = seen
    return seen is not None or bool(stale)


def _encode(files: Files) -> list[list[Any]]:
    return [
        [
            path,
            s.size,
            s.mtime_ns,
            None if s.digest is None else s.digest.hex(),
            None if s.identity is None else list(s.identity),
            s.content,
        ]
        for path, s in files.items()
    ]


def _decode(value: Any) -> Files:
    """The stored document's entries; a malformed one (or entry) is dropped: it only asks for a re-read."""
    files: Files = OrderedDict()
    rows = value.get("files") if isinstance(value, dict) else None
    for row in rows if isinstance(rows, list) else ():
        try:
            path, size, mtime_ns, hexdigest, ident, content = row
            identity_ = None if ident is None else tuple(int(n) for n in ident)
            if not isinstance(path, str) or (identity_ is not None and len(identity_) != 5):
                continue
            files[path] = Seen(
                size=int(size),
                mtime_ns=int(mtime_ns),
                digest=None if hexdigest is None else bytes.fromhex(hexdigest),
                identity=identity_,  # type: ignore[arg-type]
                content=bool(content),
            )
        except (TypeError, ValueError):
            continue
    return files


def _document(files: Files) -> dict[str, Any] | None:
    """What to store (None: nothing, the document deleted), the oldest entries dropped past ``MAX_STORED_BYTES``."""
    rows = _encode(files)
    if len(orjson.dumps(rows)) > MAX_STORED_BYTES:
        sizes = [len(orjson.dumps(row)) + 1 for row in rows]
        total, first = sum(sizes), 0
        while total > MAX_STORED_BYTES - 64:
            total -= sizes[first]
            first += 1
        rows = rows[first:]
    return {"files": rows} if rows else None


class ReadTracker:
    """canonical path -> ``Seen``, per conversation; bounded (least recently used goes first).

    An evicted entry only means the model must read the file again before writing it. Every
    method takes the conversation's ``store`` (``store_of``): None keeps the entries here, in
    this process's memory; a store keeps them in its ``filesystem.reads`` document.
    """

    def __init__(
        self, *, max_conversations: int = MAX_CONVERSATIONS, max_files: int = MAX_FILES_PER_CONVERSATION
    ) -> None:
        self.max_conversations = max_conversations
        self.max_files = max_files
        self._conversations: OrderedDict[str, Files] = OrderedDict()
        self._lock = threading.Lock()

    def _files(self, conversation_id: str) -> Files:
        """The conversation's entries in memory, made on first use (call with the lock held)."""
        files = self._conversations.get(conversation_id)
        if files is None:
            files = self._conversations[conversation_id] = OrderedDict()
            while len(self._conversations) > self.max_conversations:
                self._conversations.popitem(last=False)
        else:
            self._conversations.move_to_end(conversation_id)
        return files

    # -- the shared store ------------------------------------------------------------------------

    def _load(self, store: StateStore, conversation_id: str) -> tuple[Files, int]:
        value, version = store.load_state(NAMESPACE, conversation_id)
        return _decode(value), version

    def _change(self, store: StateStore, conversation_id: str, apply: Callable[[Files], bool], what: str) -> None:
        """Load, ``apply`` (True: it changed something), save (``update_document``: again from
        what is stored now on a conflict). A failing store is logged, not raised: the file was
        read or written, and the worst left behind is a request to read it again."""

        def change(value: Any) -> Any:
            files = _decode(value)
            return _document(files) if apply(files) else UNCHANGED

        try:
            update_document(store, NAMESPACE, conversation_id, change, attempts=SAVE_ATTEMPTS)
        except StateConflict:
            log.warning(
                "the read tracker of conversation %r kept changing in the store; %s not kept", conversation_id, what
            )
        except StorageError as exc:
            log.warning("the read tracker could not keep %s of conversation %r: %s", what, conversation_id, exc)

    # -- recording -------------------------------------------------------------------------------

    def record(
        self,
        conversation_id: str,
        path: str,
        *,
        size: int,
        mtime_ns: int,
        data_digest: bytes | None,
        stat_identity: Identity | None = None,
        store: StateStore | None = None,
    ) -> None:
        if data_digest is None and stat_identity is None:
            raise ValueError("a read is recorded with its content hash, its stat identity or both")
        seen = Seen(size=size, mtime_ns=mtime_ns, digest=data_digest, identity=stat_identity)
        if store is not None:

            def apply(files: Files) -> bool:
                if files.get(path) == seen:
                    return False  # a read of an unchanged file: no save (the order is by last change)
                _put(files, path, seen, self.max_files)
                return True

            self._change(store, conversation_id, apply, "a read")
            return
        with self._lock:
            _put(self._files(conversation_id), path, seen, self.max_files)

    def record_stat(self, conversation_id: str, path: str, st: os.stat_result, store: StateStore | None = None) -> None:
        """A regular file's status was shown (file_info, a listing): it may be moved or deleted
        while that status is unchanged. A read of its content is kept when it still stands for the
        file; a status too recent to vouch for later changes (``identity_vouches``) records nothing."""
        self.record_stats(conversation_id, [(path, st)], store)

    def record_stats(
        self, conversation_id: str, shown: list[tuple[str, os.stat_result]], store: StateStore | None = None
    ) -> None:
        """``record_stat`` for several files at once (a listing): one store change for them all."""
        statuses = [
            (
                path,
                st,
                ident,
                Seen(size=st.st_size, mtime_ns=st.st_mtime_ns, digest=None, identity=ident, content=False),
            )
            for path, st in shown
            if identity_vouches(st)
            for ident in (identity(st),)
        ]
        if not statuses:
            return

        def apply(files: Files) -> bool:
            changed = False
            for path, st, ident, seen in statuses:
                before = files.get(path)
                if not _still_stands(before, st, ident) and before != seen:
                    _put(files, path, seen, self.max_files)
                    changed = True
            return changed

        if store is not None:
            self._change(store, conversation_id, apply, "a file's status")
            return
        with self._lock:
            apply(self._files(conversation_id))

    def discard(self, conversation_id: str, path: str, store: StateStore | None = None) -> None:
        """Drop one file's entry (it was deleted)."""
        if store is not None:
            self._change(store, conversation_id, lambda files: files.pop(path, None) is not None, "a deletion")
            return
        with self._lock:
            files = self._conversations.get(conversation_id)
            if files is not None:
                files.pop(path, None)

    def move(self, conversation_id: str, source: str, destination: str, store: StateStore | None = None) -> None:
        """A file moved: what was seen of it now stands for its new path (entries below a moved
        directory are dropped: they must be read again under their new names)."""
        if store is not None:
            self._change(store, conversation_id, lambda files: _moved(files, source, destination), "a move")
            return
        with self._lock:
            files = self._conversations.get(conversation_id)
            if files is not None:
                _moved(files, source, destination)

    def forget(self, conversation_id: str, store: StateStore | None = None) -> None:
        with self._lock:
            self._conversations.pop(conversation_id, None)
        if store is not None:

            def clear(files: Files) -> bool:
                files.clear()
                return True

            self._change(store, conversation_id, clear, "the end")

    def clear(self) -> None:
        with self._lock:
            self._conversations.clear()

    # -- checking --------------------------------------------------------------------------------

    def get(self, conversation_id: str, path: str, store: StateStore | None = None) -> Seen | None:
        """What the conversation last saw of ``path``.

        Raises:
            ToolError: ``storage_unavailable``, the store holding it did not answer.
        """
        if store is not None:
            try:
                return self._load(store, conversation_id)[0].get(path)
            except StorageError as exc:
                raise ToolError(
                    "storage_unavailable",
                    f"what this conversation has read is kept in the store, which did not answer ({exc}); "
                    "nothing was changed. Try again in a moment.",
                ) from None
        with self._lock:
            files = self._conversations.get(conversation_id)
            return None if files is None else files.get(path)

    def unchanged_since_stat(
        self, conversation_id: str, path: str, display: str, st: os.stat_result, store: StateStore | None = None
    ) -> bool:
        """For a move or a delete: True when the conversation saw only the file's status (file_info,
        a listing) and the file still has it; False when it read the content (compare that instead).

        Raises:
            ToolError: ``read_before_write`` (never seen), ``file_changed`` (status moved since),
                ``storage_unavailable``.
        """
        seen = self.get(conversation_id, path, store)
        if seen is None:
            raise ToolError(
                "read_before_write",
                f"{display} exists and has not been read or looked at in this conversation; look at it with "
                "filesystem.file_info (or read it) first",
            )
        if seen.content:
            # A read: reading the file again re-records it by its hash, which survives the
            # move's new ctime (the identity would not), so a later edit is not refused.
            return False
        if identity(st) != seen.identity:
            raise ToolError(
                "file_changed",
                f"{display} changed on disk since you last looked at it; look again with filesystem.file_info "
                "or filesystem.read_file, then decide again",
            )
        return True

    def check(
        self,
        conversation_id: str,
        path: str,
        display: str,
        data: bytes,
        st: os.stat_result | None = None,
        store: StateStore | None = None,
    ) -> None:
        """Refuse a write to an existing file this conversation has not read, or that changed since.

        ``data`` is the file as the writer read it and ``st`` its status from the same descriptor.
        A read vouched for by its stat identity alone passes only when that identity is unchanged
        (so a ``touch`` or ``chmod`` since the read also asks for a fresh read).
        """
        seen = self.get(conversation_id, path, store)
        if seen is None or not seen.content:
            raise ToolError(
                "read_before_write",
                f"{display} exists and has not been read in this conversation; read it with "
                "filesystem.read_file first, then write or edit it",
            )
        if seen.digest is None:
            changed = st is None or identity(st) != seen.identity
        else:
            changed = seen.size != len(data) or seen.digest != digest(data)
        if changed:
            raise ToolError(
                "file_changed",
                f"{display} changed on disk since you read it; read it again with filesystem.read_file, "
                "then redo the change on the current content",
            )

    def __len__(self) -> int:
        return len(self._conversations)

    def files(self, conversation_id: str, store: StateStore | None = None) -> int:
        if store is not None:
            return len(self._load(store, conversation_id)[0])
        with self._lock:
            return len(self._conversations.get(conversation_id, ()))
