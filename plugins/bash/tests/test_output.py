"""The bounded head-and-tail buffer and the progress batching."""

from __future__ import annotations

import re
import tracemalloc

from entropic_mcp_bash._output import PROGRESS_CHUNK, OutputBuffer, ProgressLines
from hypothesis import given, settings
from hypothesis import strategies as st

MARKER = re.compile(r"\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=700), max_size=30),
    st.integers(min_value=2, max_value=1500),
    st.one_of(st.none(), st.integers(min_value=0, max_value=1500)),
)
def test_buffer_keeps_head_and_tail_and_counts_the_rest(chunks: list[bytes], limit: int, render: int | None) -> None:
    buffer = OutputBuffer(limit)
    for chunk in chunks:
        buffer.feed(chunk)
    data = b"".join(chunks)
    effective = limit if render is None else min(render, limit)
    text = buffer.text(render)
    if len(data) <= effective:
        assert text == data.decode("utf-8", errors="replace")
        assert not buffer.truncated(render)
        return
    assert buffer.truncated(render)
    match = MARKER.search(text)
    assert match is not None
    head, tail = text[: match.start()], text[match.end() :]
    if _valid(data):  # valid UTF-8 in: the kept parts are exact slices of it, within the limit
        head_bytes, tail_bytes = head.encode(), tail.encode()
        assert len(head_bytes) + len(tail_bytes) <= effective
        assert data.startswith(head_bytes) and data.endswith(tail_bytes)
        assert int(match.group(1)) == len(data) - len(head_bytes) - len(tail_bytes)


def _valid(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=30), st.integers(min_value=16, max_value=400))
def test_cuts_never_split_a_character(pieces: list[str], limit: int) -> None:
    buffer = OutputBuffer(limit)
    for piece in pieces:
        buffer.feed(piece.encode())
    assert buffer.text().count("\ufffd") <= sum(p.count("\ufffd") for p in pieces)


def test_memory_stays_bounded() -> None:
    # 40 MB through a 1000-byte buffer holds a few KiB (measured, not read off internals).
    chunk = b"x" * 4096
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        buffer = OutputBuffer(1000)
        for _ in range(10_000):
            buffer.feed(chunk)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= 32 * 1024
    assert buffer.total == 10_000 * 4096 and buffer.truncated()


def test_progress_sends_whole_lines_and_the_last_partial_one_at_the_end() -> None:
    sent: list[str] = []
    lines = ProgressLines(lambda progress, total, message: sent.append(message or ""))
    lines.feed(b"one\ntw")
    lines.feed(b"o\nthr")
    lines.flush()
    lines.flush(final=True)
    assert "\n".join(sent).split("\n") == ["one", "two", "thr"]
    assert lines.lines == 3


def test_progress_keeps_only_the_newest_lines_of_a_flood() -> None:
    sent: list[str] = []
    lines = ProgressLines(lambda progress, total, message: sent.append(message or ""))
    lines.last_sent = float("inf")  # hold everything until the explicit flush
    for i in range(5000):
        lines.feed(b"line %d\n" % i)
    lines.flush()
    assert len(sent) == 1
    assert sent[0].startswith("[... ") and sent[0].endswith("line 4999")
    assert len(sent[0]) <= PROGRESS_CHUNK + 100


def test_a_short_cut_of_a_large_output_copies_only_what_it_shows() -> None:
    buffer = OutputBuffer(2_000_000)
    for _ in range(100):
        buffer.feed(b"x" * 9_999 + b"\n")  # 1 MB, all of it kept
    tracemalloc.start()
    try:
        text = buffer.text(16_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(text.encode()) < 16_100 and "bytes omitted" in text
    assert peak < 200_000  # not a copy of the whole megabyte (or two)
