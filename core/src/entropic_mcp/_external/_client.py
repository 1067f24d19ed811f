"""One connection to an external server through the official SDK client, owned by the pool.

The SDK's ``Client`` is an async context manager: it is entered and left by one task of the
pool's loop (``_run``) that lives as long as the connection, while operations from other tasks
use its session. A fault — the process gone, a line that is not JSON-RPC, a request that outlives
its timeout — marks the connection broken: every operation in flight on it is cancelled at once
and answers ``ClientBroken``, and the connection is closed (the SDK stops the process tree).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

import anyio

from .._config import ExternalServerConfig, refused_env

log = logging.getLogger("entropic_mcp.external")

T = TypeVar("T")
#: A listing longer than this many pages is treated as a server that never ends its pagination.
MAX_PAGES = 1000
#: How often the watchdog looks for operations past their timeout while any run (its precision).
WATCH_SECONDS = 0.05


class ClientBroken(Exception):
    """The connection failed (crash, garbage, hang, refused start); ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ToolListIncompleteError(Exception):
    """A tool list could not be read to its end (a cursor failed, the connection dropped mid-way)."""


class Listed:
    """One complete ``tools/list``: the tools, and the server's cache hints."""

    __slots__ = ("pages", "scope", "tools", "ttl_ms")

    def __init__(self, tools: list[Any], ttl_ms: int | None, scope: str, pages: int) -> None:
        self.tools = tools
        self.ttl_ms = ttl_ms
        self.scope = scope
        self.pages = pages


def child_env(config: ExternalServerConfig) -> dict[str, str]:
    """What the child process gets besides the SDK's short safe list (HOME, PATH, ...): ``env``
    from config, with every refused name dropped again (config loading already refuses them)."""
    return {key: value for key, value in config.env.items() if not refused_env(key)}


def _errlog() -> Any:
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")


def describe(exc: BaseException) -> str:
    """One line for a connection failure, whatever shape the SDK or anyio gave it."""
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        if inner:
            return describe(inner[0])
    if isinstance(exc, ClientBroken):
        return exc.reason
    if isinstance(exc, FileNotFoundError):
        return f"cannot start: {exc.strerror}: {exc.filename}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, OSError) else text


class PooledClient:
    """One SDK client connection (one process for stdio), with its use bookkeeping."""

    def __init__(
        self,
        config: ExternalServerConfig,
        root: Path,
        key: Any,
        *,
        on_broken: Callable[[PooledClient], None],
        on_tools_changed: Callable[[PooledClient], None],
    ) -> None:
        self.config = config
        self.root = root
        self.key = key
        self.in_use = 0
        self.handed_out = False
        self.last_used = time.monotonic()
        self.broken: str | None = None
        self.closed = False
        self.client: Any = None
        self._on_broken = on_broken
        self._on_tools_changed = on_tools_changed
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._gone = asyncio.Event()
        #: Operations in flight: their task -> [deadline, what, timeout] (the watchdog reads it).
        self._operations: dict[asyncio.Task[Any], list[Any]] = {}
        #: Operations ``break_`` cancelled: their CancelledError is ours, to become ClientBroken.
        self._cancelled: set[asyncio.Task[Any]] = set()
        self._watching = False
        self._task: asyncio.Task[None] | None = None

    # -- lifetime ------------------------------------------------------------------------------

    async def open(self, timeout: float) -> None:
        """Start the process or HTTP session and finish the MCP handshake within ``timeout``."""
        self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            with anyio.fail_after(timeout):
                await self._ready.wait()
        except TimeoutError:
            self.break_(f"did not finish the MCP handshake within {timeout:g} s")
            raise ClientBroken(self.broken or "handshake timed out") from None
        except BaseException:
            self.break_("the connection was abandoned while opening")
            raise
        if self.client is None:
            raise ClientBroken(self.broken or "could not connect")

    async def _transport(self, stack: AsyncExitStack) -> Any:
        config = self.config
        if config.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            assert config.command is not None
            cwd = config.cwd if config.cwd is None or config.cwd.is_absolute() else self.root / config.cwd
            argv = [config.command, *config.args]
            env: dict[str, str] | None = child_env(config)
            if config.sandbox:
                from .._sandbox import external_sandbox

                box = external_sandbox(config.name, self.root, argv)
                prepared = box.prepare(argv, cwd=cwd or self.root, env=env)
                stack.callback(prepared.close)
                argv, env = prepared.argv, prepared.env
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd or self.root)
            return stdio_client(params, errlog=_errlog())
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        assert config.url is not None
        http = await stack.enter_async_context(create_mcp_http_client(headers=dict(config.headers)))
        return streamable_http_client(config.url, http_client=http)

    async def _run(self) -> None:
        from mcp import Client
        from mcp_types import Implementation
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        from .._version import __version__

        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(
                    transport,
                    mode="auto",
                    cache=None,
                    message_handler=self._on_message,
                    client_info=Implementation(name="entropic-mcp", version=__version__),
                )
                await stack.enter_async_context(client)
                capabilities = client.server_capabilities
                if (
                    client.protocol_version in MODERN_PROTOCOL_VERSIONS
                    and capabilities.tools is not None
                    and capabilities.tools.list_changed
                ):
                    # 2026-07-28 delivers list changes only on a subscriptions/listen stream.
                    group = await stack.enter_async_context(anyio.create_task_group())
                    group.start_soon(self._listen, client)
                    stack.callback(group.cancel_scope.cancel)
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            self.break_(self._describe_start(exc))
        finally:
            self.closed = True
            self._ready.set()
            self._cancel_operations()
            self._gone.set()

    def _describe_start(self, exc: BaseException) -> str:
        inner = exc
        while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
            inner = inner.exceptions[0]
        if isinstance(inner, OSError) and self.client is None and self.config.transport == "stdio":
            # uvloop's spawn errors carry no file name: name the configured command ourselves.
            return f"cannot start {self.config.command!r}: {inner.strerror or inner}"
        return describe(exc)

    async def _listen(self, client: Any) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._on_tools_changed(self)
        except Exception as exc:  # the connection's own failure is seen by its operations
            log.debug("list-change subscription of %s ended: %s", self.config.name, describe(exc))

    async def _on_message(self, message: Any) -> None:
        import mcp_types

        if isinstance(message, Exception):
            self.break_(f"sent output that is not JSON-RPC ({describe(message)})")
        elif isinstance(message, mcp_types.ToolListChangedNotification):
            from mcp_types.version import MODERN_PROTOCOL_VERSIONS

            client = self.client
            if client is None or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                self._on_tools_changed(self)  # 2026-07-28 events arrive through _listen instead

    def break_(self, reason: str) -> None:
        """Mark the connection failed: cancel what runs on it, close it, tell the pool once."""
        if self.broken is not None:
            return
        self.broken = reason
        self._cancel_operations()
        self._stop.set()
        if not self.closed or self.client is not None:
            try:
                self._on_broken(self)
            except Exception:
                log.warning("pool callback failed for %s", self.config.name, exc_info=True)

    def _cancel_operations(self) -> None:
        current = asyncio.current_task()
        for task in list(self._operations):
            # The operation that noticed the fault raises ClientBroken itself; cancelling its own
            # task would land on its next await, outside the operation.
            if task is not current and task not in self._cancelled:
                self._cancelled.add(task)
                task.cancel()

    def _watch(self) -> None:
        """Break the connection once an operation outlives its timeout; re-armed while any run."""
        now = asyncio.get_running_loop().time()
        for deadline, what, timeout in list(self._operations.values()):
            if deadline <= now:
                self.break_(f"{what} did not answer within {timeout:g} s")
                break
        if self._operations and self.broken is None:
            asyncio.get_running_loop().call_later(WATCH_SECONDS, self._watch)
        else:
            self._watching = False

    async def aclose(self) -> None:
        """Close the connection and wait (bounded) until the SDK has stopped the process."""
        self._stop.set()
        if self._task is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            await self._gone.wait()

    @property
    def usable(self) -> bool:
        return self.client is not None and self.broken is None and not self.closed

    # -- operations ----------------------------------------------------------------------------

    async def request(self, operation: Callable[[Any], Awaitable[T]], timeout: float | None, what: str) -> T:
        """Run ``operation(session)``; a fault of the connection raises ``ClientBroken``.

        An error the server answered (a JSON-RPC error) is not a fault and passes through.
        """
        if not self.usable:
            raise ClientBroken(self.broken or "the connection is closed")
        # No timer and no cancel scope per call (an anyio scope with a deadline costs about five
        # times this registration): break_ cancels the registered task, and one watchdog tick
        # per WATCH_SECONDS, armed only while operations run, enforces the timeouts.
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        cancelling = task.cancelling()
        self._operations[task] = [math.inf if timeout is None else loop.time() + timeout, what, timeout]
        if timeout is not None and not self._watching:
            self._watching = True
            loop.call_later(WATCH_SECONDS, self._watch)
        try:
            result = await operation(self.client.session)
        except asyncio.CancelledError:
            if task not in self._cancelled:
                raise
            self._cancelled.discard(task)
            if task.uncancel() > cancelling:
                raise  # the caller cancelled too: its cancellation wins
        except Exception as exc:
            self._fault(exc, what, timeout)
        else:
            if self.broken is None:
                return result
        finally:
            del self._operations[task]
            if task in self._cancelled:  # cancelled, but it ended some other way: take that back
                self._cancelled.discard(task)
                task.uncancel()
        raise ClientBroken(self.broken or f"{what} was cancelled by a connection failure")

    def _fault(self, exc: Exception, what: str, timeout: float | None) -> None:
        """Break the connection for a fault of it; re-raise anything the server answered."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        if isinstance(exc, MCPError):
            if exc.code == CONNECTION_CLOSED:
                self.break_(f"closed the connection during {what} (the process exited or crashed)")
            elif exc.code == REQUEST_TIMEOUT:
                self.break_(f"{what} did not answer within {timeout} s")
            else:
                raise exc
        elif isinstance(exc, ValidationError):
            self.break_(f"answered {what} with a malformed result ({exc.error_count()} problem(s))")
        elif isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)):
            self.break_(f"connection lost during {what}: {describe(exc)}")
        else:
            raise exc
        if self.broken is None:  # pragma: no cover - break_ always sets it
            raise exc

    async def list_tools(self, timeout: float | None) -> Listed:
        """Every page of ``tools/list``; anything short of the end raises ``ToolListIncompleteError``."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import PaginatedRequestParams

        tools: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        ttl: int | None = None
        scope = "public"
        pages = 0
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            try:
                page = await self.request(_lister(params), timeout, "tools/list")
            except (ClientBroken, MCPError) as exc:
                if pages:
                    reason = exc.reason if isinstance(exc, ClientBroken) else f"the server answered: {exc.message}"
                    raise ToolListIncompleteError(
                        f"the tool list of '{self.config.name}' could not be read to its end "
                        f"(page {pages + 1} failed: {reason})"
                    ) from exc
                raise
            pages += 1
            tools.extend(page.tools)
            if page.ttl_ms is not None:
                ttl = page.ttl_ms if ttl is None else min(ttl, page.ttl_ms)
            if page.cache_scope == "private":
                scope = "private"
            cursor = page.next_cursor
            if cursor is None:
                return Listed(tools, ttl, scope, pages)
            if cursor in seen or pages >= MAX_PAGES:
                raise ToolListIncompleteError(
                    f"the tool list of '{self.config.name}' never ends (a cursor repeated or over {MAX_PAGES} pages)"
                )
            seen.add(cursor)

    async def call_tool(self, name: str, args: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """``tools/call``; the result as the server sent it (a JSON object: a CallToolResult or an
        InputRequiredResult), validated once, by the SDK, against the negotiated version's schema."""
        import mcp_types

        request = mcp_types.CallToolRequest(params=mcp_types.CallToolRequestParams(name=name, arguments=args))
        # send_request, not session.call_tool: the latter re-lists tools to validate output schemas,
        # which would put unadmitted tools/list requests on the wire. send_request validates the
        # result against the negotiated version and then parses it into the adapter's model; the
        # pass-through adapter skips that second validation and the models nothing here reads.
        return await self.request(lambda s: s.send_request(request, _raw_adapter()), timeout, f"tools/call {name!r}")


def _lister(params: Any) -> Callable[[Any], Awaitable[Any]]:
    async def list_page(session: Any) -> Any:
        return await session.list_tools(params=params)

    return list_page


_RAW: Any = None


def _raw_adapter() -> Any:
    global _RAW
    if _RAW is None:
        from pydantic import TypeAdapter

        _RAW = TypeAdapter(Any)
    return _RAW
