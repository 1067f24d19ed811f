"""What a program run leaves: its output's head and tail, and how it ended."""

from __future__ import annotations

import attrs


class HeadTail:
    """The first and last bytes of a stream within ``limit`` bytes; what is in between is counted.

    With ``keep_tail=False`` the whole cap goes to the head (output cut at the cap).
    """

    def __init__(self, limit: int, *, keep_tail: bool = True) -> None:
        if limit < 2:
            raise ValueError("an output cap is at least 2 bytes")
        self.limit = limit
        self.keep_tail = keep_tail
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = (self.limit // 2 if self.keep_tail else self.limit) - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.keep_tail:
            self._tail += data
            keep = self.limit - len(self.head)
            # Trimmed when it grows to twice its share, not on every piece: a flood of output
            # then costs one copy per share of bytes instead of one per read.
            if len(self._tail) > 2 * keep:
                del self._tail[: len(self._tail) - keep]

    @property
    def tail(self) -> bytes:
        keep = self.limit - len(self.head) if self.keep_tail else 0
        return bytes(self._tail[max(0, len(self._tail) - keep) :]) if keep else b""

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    @property
    def truncated(self) -> bool:
        return self.omitted > 0

    def bytes(self) -> bytes:
        return bytes(self.head) + self.tail

    def text(self, marker: str = "\n[... {omitted} bytes omitted ...]\n") -> str:
        """The kept output as text (invalid UTF-8 replaced), with a marker where bytes were left out."""
        head = bytes(self.head).decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.truncated:
            return head + tail
        return head + marker.format(omitted=self.omitted) + tail


@attrs.frozen(kw_only=True)
class ProcessResult:
    """How a program run ended. ``exit_code`` is None when it was stopped (timeout or cancel);
    a negative one is the signal that ended it."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: HeadTail
    stderr: HeadTail | None
    elapsed: float
    timed_out: bool = False
    cancelled: bool = False
    stopped_at_cap: bool = False

    @property
    def ok(self) -> bool:
        """The program succeeded, or was stopped at the output cap it was asked to stop at."""
        return self.exit_code == 0 or self.stopped_at_cap
