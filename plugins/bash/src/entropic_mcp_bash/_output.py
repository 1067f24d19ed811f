"""Captured output: a bounded head and tail of the bytes a command writes, and progress lines."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from entropic_mcp.toolkit import HeadTail

log = logging.getLogger("entropic_mcp_bash")

#: Bytes of pending lines one progress notification carries at most (the newest are kept).
PROGRESS_CHUNK = 8192
#: Seconds progress lines are gathered before they are sent together.
PROGRESS_INTERVAL = 0.1


def _lead_boundary(data: bytes | bytearray) -> int:
    """Index of the first byte that starts a UTF-8 character (skips up to 3 continuation bytes)."""
    i = 0
    while i < min(3, len(data)) and data[i] & 0xC0 == 0x80:
        i += 1
    return i


def _trail_boundary(data: bytes | bytearray) -> int:
    """Length of ``data`` without a UTF-8 sequence cut off at its end."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        byte = data[n - back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII): does its sequence fit?
            need = (
                1
                if byte < 0x80
                else 2
                if byte >> 5 == 0b110
                else 3
                if byte >> 4 == 0b1110
                else 4
                if byte >> 3 == 0b11110
                else 1
            )
            return n if back >= need else n - back
    return n


class OutputBuffer:
    """A command's output: the toolkit's ``HeadTail`` keeps its first and last ``limit`` bytes
    (memory stays bounded whatever the command prints) and counts the rest; this renders it.

    The rendering is the bash tool's own: the result may have to fit a smaller cap than the
    buffer's (the pipeline's ``max_result_bytes``), and cuts must fall on character boundaries.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept = HeadTail(limit)

    def feed(self, data: bytes) -> None:
        self._kept.feed(data)

    @property
    def total(self) -> int:
        """Bytes the command printed, kept or not."""
        return self._kept.total

    def text(self, limit: int | None = None) -> str:
        """The output as text, cut to ``limit`` bytes (at most the buffer's own) if it is longer.

        Invalid UTF-8 becomes U+FFFD; cuts fall on character boundaries, and the marker says
        how many bytes were dropped.
        """
        limit = self.limit if limit is None else min(limit, self.limit)
        kept = self._kept
        total = kept.total
        if total <= limit:
            return (bytes(kept.head) + kept.tail).decode("utf-8", errors="replace")
        head_size = limit - limit // 2
        kept_head, kept_tail = kept.head, kept.tail  # slicing the bytearray copies the slice only
        if total > self.limit:  # bytes were dropped between the kept head and tail
            head_size = min(head_size, len(kept_head))
        tail_size = limit - head_size
        # Only the bytes shown are copied: a short cut of a large kept output stays short.
        head = bytes(kept_head[:head_size]) + kept_tail[: max(0, head_size - len(kept_head))]
        head = head[: _trail_boundary(head)]
        if not tail_size:
            tail = b""
        elif tail_size <= len(kept_tail):
            tail = kept_tail[len(kept_tail) - tail_size :]
        else:
            tail = bytes(kept_head[len(kept_head) - (tail_size - len(kept_tail)) :]) + kept_tail
        tail = tail[_lead_boundary(tail) :]
        omitted = total - len(head) - len(tail)
        return (
            head.decode("utf-8", errors="replace")
            + f"\n[... {omitted} bytes omitted ...]\n"
            + tail.decode("utf-8", errors="replace")
        )

    def truncated(self, limit: int | None = None) -> bool:
        return self.total > (self.limit if limit is None else min(limit, self.limit))


class ProgressLines:
    """Sends complete output lines to a progress callback, gathered over short intervals.

    ``report(progress, total, message)``: ``progress`` is the count of lines seen so far.
    Lines are batched so a command printing a million lines sends a handful of
    notifications per second, each at most ``PROGRESS_CHUNK`` bytes (the newest lines).
    """

    def __init__(self, report: Callable[[float, float | None, str | None], None]) -> None:
        self.report = report
        self.partial = bytearray()
        self.pending = bytearray()
        self.skipped = 0
        self.lines = 0
        self.last_sent = 0.0

    def feed(self, data: bytes) -> bool:
        """Take output; True when lines are pending that ``flush`` should send later."""
        cut = data.rfind(b"\n")
        if cut < 0:
            self.partial += data
            if len(self.partial) > PROGRESS_CHUNK:  # a very long line: keep its end only
                del self.partial[: len(self.partial) - PROGRESS_CHUNK]
            return bool(self.pending)
        self._add(bytes(self.partial) + data[: cut + 1])
        self.partial = bytearray(data[cut + 1 :])
        if time.monotonic() - self.last_sent >= PROGRESS_INTERVAL:
            self.flush()
        return bool(self.pending)

    def _add(self, lines: bytes) -> None:
        self.lines += lines.count(b"\n")
        self.pending += lines
        if len(self.pending) > PROGRESS_CHUNK:
            drop = len(self.pending) - PROGRESS_CHUNK
            self.skipped += drop
            del self.pending[:drop]

    def flush(self, *, final: bool = False) -> None:
        if final and self.partial:
            self._add(bytes(self.partial) + b"\n")
            self.partial.clear()
        if not self.pending:
            return
        data = bytes(self.pending)
        if self.skipped:
            start = data.find(b"\n") + 1  # the first line was cut when older lines were dropped
            self.skipped += start
            data = b"[... %d bytes of output not streamed ...]\n" % self.skipped + data[start:]
        text = data.decode("utf-8", errors="replace")
        self.pending.clear()
        self.skipped = 0
        self.last_sent = time.monotonic()
        try:
            self.report(float(self.lines), None, text.removesuffix("\n"))
        except Exception:  # a failing progress sink must not stop the command or its output
            log.warning("progress reporting failed; no more progress for this call", exc_info=True)
            self.report = _ignore


def _ignore(progress: float, total: float | None, message: str | None) -> None:
    """The progress sink after the real one failed."""
