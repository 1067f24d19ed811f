"""stdio framing with limits: one JSON-RPC message per line, answered on the process's stdout.

The SDK's own stdio transport reads unbounded lines and drops unparseable ones silently; serve
needs ``max_message_bytes`` and JSON-RPC's parse / invalid-request answers, so it frames the
pipe itself and hands every well-formed message to the SDK server unchanged. While serving,
fd 0 reads the null device and fd 1 points at stderr, so nothing a tool or a child process
prints can corrupt the wire.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import orjson
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, jsonrpc_message_adapter

log = logging.getLogger("entropic_mcp.serve")

CHUNK = 65536
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,256}"|-?\d{1,18})')


class Oversized:
    """A line longer than the limit (its bytes were discarded); ``head`` helps find its id."""

    def __init__(self, size: int, head: bytes) -> None:
        self.size = size
        self.head = head


class LineFramer:
    """Split a byte stream into lines; a line over ``limit`` bytes becomes one ``Oversized``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._skipping: Oversized | None = None

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if self._skipping is not None:
                self._skipping.size += len(piece)
            else:
                self._buffer += piece
                if len(self._buffer) > self.limit:
                    self._skipping = Oversized(len(self._buffer), bytes(self._buffer[:512]))
                    self._buffer.clear()
            if end < 0:
                return out
            if self._skipping is not None:
                out.append(self._skipping)
                self._skipping = None
            else:
                line = bytes(self._buffer)
                self._buffer.clear()
                out.append(line)
            start = end + 1

    def finish(self) -> list[bytes | Oversized]:
        """What is left at end of input (a last line without a newline)."""
        if self._skipping is not None:
            left: list[bytes | Oversized] = [self._skipping]
        elif self._buffer.strip():
            left = [bytes(self._buffer)]
        else:
            left = []
        self._buffer.clear()
        self._skipping = None
        return left


def _request_id(data: bytes) -> str | int | None:
    match = _ID.search(data)
    if match is None:
        return None
    try:
        value = orjson.loads(match.group(1))
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, (str, int)) else None


def classify(line: bytes | Oversized, limit: int) -> SessionMessage | JSONRPCError | None:
    """A line as a message for the SDK, the error to answer it with, or None (blank)."""
    if isinstance(line, Oversized):
        return JSONRPCError(
            jsonrpc="2.0",
            id=_request_id(line.head),
            error=ErrorData(
                code=INVALID_REQUEST,
                message=f"message of {line.size} bytes exceeds max_message_bytes ({limit}); send less per request",
            ),
        )
    if not line.strip():
        return None
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception:
        pass
    try:
        decoded: Any = orjson.loads(line)
    except orjson.JSONDecodeError:
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message="Parse error: not JSON"))
    if isinstance(decoded, list):
        return JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=ErrorData(
                code=INVALID_REQUEST, message="Invalid Request: batches are not supported; send one message per line"
            ),
        )
    rid = decoded.get("id") if isinstance(decoded, dict) else None
    if isinstance(decoded, dict) and "id" not in decoded:
        log.warning("dropped a malformed notification: %.200s", line)
        return None
    return JSONRPCError(
        jsonrpc="2.0",
        id=rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None,
        error=ErrorData(code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message"),
    )


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _claim(fd: int, diversion: int) -> int:
    """Move the wire off ``fd`` onto a private descriptor; point ``fd`` at ``diversion``."""
    private = os.dup(fd)
    os.set_inheritable(private, False)
    os.dup2(diversion, fd)
    return private


class _Wire:
    """Non-blocking pipe I/O when the descriptors allow it, worker-thread I/O otherwise."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        # epoll takes pipes and sockets; files and devices (/dev/null, a tty) are read in a thread.
        if not _pollable(self.read_fd):
            self.reader = None
        else:
            await self._open_reader(loop)
        if _pollable(self.write_fd):
            await self._open_writer(loop)

    async def _open_reader(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            reader = asyncio.StreamReader(limit=CHUNK * 4)
            await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(self.read_fd, "rb", buffering=0, closefd=False)
            )
            self.reader = reader
        except (ValueError, OSError):
            self.reader = None

    async def _open_writer(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, os.fdopen(self.write_fd, "wb", buffering=0, closefd=False)
            )
            self.writer = asyncio.StreamWriter(transport, protocol, None, loop)  # type: ignore[arg-type]
        except (ValueError, OSError):
            self.writer = None

    async def read(self) -> bytes:
        if self.reader is not None:
            return await self.reader.read(CHUNK)
        return await anyio.to_thread.run_sync(os.read, self.read_fd, CHUNK, abandon_on_cancel=True)

    async def write(self, data: bytes) -> None:
        if self.writer is not None:
            self.writer.write(data)
            await self.writer.drain()
            return
        view = memoryview(data)
        while view:
            written = await anyio.to_thread.run_sync(os.write, self.write_fd, view)
            view = view[written:]

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with suppress(OSError):
                os.set_blocking(fd, True)
        if self.writer is not None and not self.writer.transport.is_closing():
            with suppress(Exception):
                self.writer.transport.abort()


@asynccontextmanager
async def stdio_streams(max_message_bytes: int, eof: anyio.Event | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """(read, write) streams of ``SessionMessage`` over this process's stdin/stdout.

    ``eof`` is set when the client closes stdin: the caller stops serving soon after even if a
    call is still running (a stuck synchronous tool must not keep the process alive).
    """
    devnull = os.open(os.devnull, os.O_RDONLY)
    wire_in = _claim(0, devnull)
    os.close(devnull)
    wire_out = _claim(1, 2)
    wire = _Wire(wire_in, wire_out)
    await wire.open()
    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[Any](0)
    errors = write_send.clone()

    async def reader() -> None:
        framer = LineFramer(max_message_bytes)
        async with read_send, errors:
            while True:
                try:
                    data = await wire.read()
                except OSError:
                    data = b""
                lines = framer.feed(data) if data else framer.finish()
                for line in lines:
                    item = classify(line, max_message_bytes)
                    if isinstance(item, JSONRPCError):
                        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                            await errors.send(SessionMessage(item))
                    elif item is not None:
                        await read_send.send(item)
                if not data:
                    if eof is not None:
                        eof.set()
                    return

    writer_done = anyio.Event()

    async def writer() -> None:
        try:
            await write_all()
        finally:
            writer_done.set()

    async def write_all() -> None:
        async with write_recv:
            async for message in write_recv:
                payload = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                try:
                    await wire.write(payload)
                except (OSError, ConnectionError):
                    log.info("the client closed stdout; stopping")
                    return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_recv, write_send
            # The server closed its side: let the last answers reach the client, then stop reading.
            with anyio.move_on_after(2):
                await writer_done.wait()
            tg.cancel_scope.cancel()
    finally:
        wire.close()
        with suppress(OSError):
            os.dup2(wire_in, 0)
            os.dup2(wire_out, 1)
        for fd in (wire_in, wire_out):
            with suppress(OSError):
                os.close(fd)
