"""The per-conversation read tracker behind read-before-write and changed-since-read.

A read records the file's stat identity (device, inode, size, mtime, ctime) instead of hashing
it whole on every page: any write to a file moves its ctime, and no unprivileged call sets ctime
back (``os.utime`` restoring the mtime moves the ctime too). What the identity cannot see is a
change within the filesystem's timestamp granularity of the change before it (the "racy git"
case: two writes in one clock tick leave one ctime), so a file changed less than ``RACY_NS``
before it is read is hashed whole, as before, and the write compares the hash. Writes and edits
read the file whole anyway; they record the hash of what they wrote.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

import attrs
from entropic_mcp import ToolError

MAX_CONVERSATIONS = 1024
MAX_FILES_PER_CONVERSATION = 4096
#: A file whose last change is younger than this at the read is hashed whole: its stat identity
#: may not move for a write in the same timestamp tick (ext4 and tmpfs tick with the kernel's
#: coarse clock, up to 10 ms; FAT keeps 2 s; a network server's clock may run ahead).
RACY_NS = 2_000_000_000

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


class ReadTracker:
    """canonical path -> ``Seen``, per conversation; bounded (least recently used goes first).

    An evicted entry only means the model must read the file again before writing it.
    """

    def __init__(
        self, *, max_conversations: int = MAX_CONVERSATIONS, max_files: int = MAX_FILES_PER_CONVERSATION
    ) -> None:
        self.max_conversations = max_conversations
        self.max_files = max_files
        self._conversations: OrderedDict[str, OrderedDict[str, Seen]] = OrderedDict()
        self._lock = threading.Lock()

    def record(
        self,
        conversation_id: str,
        path: str,
        *,
        size: int,
        mtime_ns: int,
        data_digest: bytes | None,
        stat_identity: Identity | None = None,
    ) -> None:
        if data_digest is None and stat_identity is None:
            raise ValueError("a read is recorded with its content hash, its stat identity or both")
        with self._lock:
            files = self._conversations.get(conversation_id)
            if files is None:
                files = self._conversations[conversation_id] = OrderedDict()
                while len(self._conversations) > self.max_conversations:
                    self._conversations.popitem(last=False)
            else:
                self._conversations.move_to_end(conversation_id)
            files[path] = Seen(size=size, mtime_ns=mtime_ns, digest=data_digest, identity=stat_identity)
            files.move_to_end(path)
            while len(files) > self.max_files:
                files.popitem(last=False)

    def record_stat(self, conversation_id: str, path: str, st: os.stat_result) -> None:
        """A regular file's status was shown (file_info, a listing): it may be moved or deleted
        while that status is unchanged. A read of its content is kept when it still stands for the
        file; a status too recent to vouch for later changes (``identity_vouches``) records nothing."""
        if not identity_vouches(st):
            return
        ident = identity(st)
        seen = self.get(conversation_id, path)
        read_still_stands = (
            seen is not None
            and seen.content
            and (seen.identity == ident or (seen.identity is None and (seen.size, seen.mtime_ns) == st_key(st)))
        )
        if read_still_stands:
            return
        with self._lock:
            files = self._conversations.get(conversation_id)
            if files is None:
                files = self._conversations[conversation_id] = OrderedDict()
                while len(self._conversations) > self.max_conversations:
                    self._conversations.popitem(last=False)
            files[path] = Seen(size=st.st_size, mtime_ns=st.st_mtime_ns, digest=None, identity=ident, content=False)
            files.move_to_end(path)
            while len(files) > self.max_files:
                files.popitem(last=False)

    def unchanged_since_stat(self, conversation_id: str, path: str, display: str, st: os.stat_result) -> bool:
        """For a move or a delete: True when the conversation saw only the file's status (file_info,
        a listing) and the file still has it; False when it read the content (compare that instead).

        Raises:
            ToolError: ``read_before_write`` (never seen), ``file_changed`` (status moved since).
        """
        seen = self.get(conversation_id, path)
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

    def get(self, conversation_id: str, path: str) -> Seen | None:
        with self._lock:
            files = self._conversations.get(conversation_id)
            return None if files is None else files.get(path)

    def check(
        self, conversation_id: str, path: str, display: str, data: bytes, st: os.stat_result | None = None
    ) -> None:
        """Refuse a write to an existing file this conversation has not read, or that changed since.

        ``data`` is the file as the writer read it and ``st`` its status from the same descriptor.
        A read vouched for by its stat identity alone passes only when that identity is unchanged
        (so a ``touch`` or ``chmod`` since the read also asks for a fresh read).
        """
        seen = self.get(conversation_id, path)
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

    def discard(self, conversation_id: str, path: str) -> None:
        """Drop one file's entry (it was deleted)."""
        with self._lock:
            files = self._conversations.get(conversation_id)
            if files is not None:
                files.pop(path, None)

    def move(self, conversation_id: str, source: str, destination: str) -> None:
        """A file moved: what was seen of it now stands for its new path (entries below a moved
        directory are dropped: they must be read again under their new names)."""
        with self._lock:
            files = self._conversations.get(conversation_id)
            if files is None:
                return
            seen = files.pop(source, None)
            below = source.rstrip("/") + "/"
            for stale in [p for p in files if p.startswith(below)]:
                del files[stale]
            if seen is not None and seen.content:  # a status says nothing once the move changed it
                files[destination] = seen

    def forget(self, conversation_id: str) -> None:
        with self._lock:
            self._conversations.pop(conversation_id, None)

    def clear(self) -> None:
        with self._lock:
            self._conversations.clear()

    def __len__(self) -> int:
        return len(self._conversations)

    def files(self, conversation_id: str) -> int:
        with self._lock:
            return len(self._conversations.get(conversation_id, ()))
