"""The per-conversation read tracker behind read-before-write and changed-since-read."""

from __future__ import annotations

import threading
from collections import OrderedDict

import attrs
from entropic_mcp import ToolError

MAX_CONVERSATIONS = 1024
MAX_FILES_PER_CONVERSATION = 4096


def digest(data: bytes) -> bytes:
    import hashlib  # imported on first use: listing tools must stay cheap

    return hashlib.blake2b(data, digest_size=16).digest()


@attrs.frozen(kw_only=True)
class Seen:
    """A file as the conversation last saw it (read or written)."""

    size: int
    mtime_ns: int
    digest: bytes


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

    def record(self, conversation_id: str, path: str, *, size: int, mtime_ns: int, data_digest: bytes) -> None:
        with self._lock:
            files = self._conversations.get(conversation_id)
            if files is None:
                files = self._conversations[conversation_id] = OrderedDict()
                while len(self._conversations) > self.max_conversations:
                    self._conversations.popitem(last=False)
            else:
                self._conversations.move_to_end(conversation_id)
            files[path] = Seen(size=size, mtime_ns=mtime_ns, digest=data_digest)
            files.move_to_end(path)
            while len(files) > self.max_files:
                files.popitem(last=False)

    def get(self, conversation_id: str, path: str) -> Seen | None:
        with self._lock:
            files = self._conversations.get(conversation_id)
            return None if files is None else files.get(path)

    def check(self, conversation_id: str, path: str, display: str, data: bytes) -> None:
        """Refuse a write to an existing file this conversation has not read, or that changed since."""
        seen = self.get(conversation_id, path)
        if seen is None:
            raise ToolError(
                "read_before_write",
                f"{display} exists and has not been read in this conversation; read it with "
                "filesystem.read_file first, then write or edit it",
            )
        if seen.size != len(data) or seen.digest != digest(data):
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
            if seen is not None:
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
