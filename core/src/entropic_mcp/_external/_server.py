"""An external MCP server as an ``MCPServerBase``: its tools go through the same pipeline."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._access import AccessLevel
from .._config import ExternalServerConfig
from .._context import CallContext, host_of
from .._envelope import ServerResponse, dumps
from .._errors import ToolDefinitionError
from .._server import MCPServerBase, normalize_args
from .._tools import TOOL_NAME, ToolBase, ToolDefinition
from ._client import ClientBroken, ToolListIncompleteError
from ._loop import LocalLoop, PoolLoop, shared_loop
from ._pool import Binding, PoolError

if TYPE_CHECKING:
    from .._protocols import Host

log = logging.getLogger("entropic_mcp.external")

#: Extra seconds the pipeline allows beyond ``call_timeout_seconds``: the pool's own timeout ends
#: a hung call first (and disconnects the server), so the pipeline's is only a backstop.
PIPELINE_GRACE_SECONDS = 5.0
_CLOSING: set[Any] = set()


#: Hints about what a tool does that only a trusted server's word settles (``trust_annotations``).
UNTRUSTED_HINTS = ("destructiveHint", "idempotentHint")


class ExternalTool(ToolBase):
    """One tool of an external server: its definition and hints as the server listed them."""

    def __init__(
        self, definition: ToolDefinition, level: AccessLevel, hints: Mapping[str, Any], *, trusted: bool = False
    ) -> None:
        super().__init__(definition)
        self.required_access_level = level  # type: ignore[misc]  # per tool, from hints and config
        self.hints = dict(hints)
        self.trusted = trusted

    def execute(self, args: dict[str, Any], ctx: CallContext) -> str:  # pragma: no cover - ExternalServer runs calls
        raise RuntimeError("external tools are run by their ExternalServer")

    def annotations(self) -> dict[str, Any]:
        # What the tool does is our word (its access level), not the server's: a client that
        # auto-approves on readOnlyHint or destructiveHint must not act on an untrusted claim.
        untrusted = () if self.trusted else UNTRUSTED_HINTS
        data = {key: value for key, value in self.hints.items() if key != "readOnlyHint" and key not in untrusted}
        data["readOnlyHint"] = self.required_access_level <= AccessLevel.READ
        if self.definition.title and "title" not in data:
            data["title"] = self.definition.title
        return data

    def same_as(self, other: ExternalTool) -> bool:
        return (
            self.definition == other.definition
            and self.required_access_level == other.required_access_level
            and self.hints == other.hints
        )


def to_response(server: str, tool: str, result: Mapping[str, Any]) -> ServerResponse:
    """A ``tools/call`` result (its JSON object, as the SDK validated it) as the envelope: text →
    ``result``, ``isError`` kept, never directives.

    Whatever the server put in ``_meta``, in its text or in its structured content — including
    something shaped like entropic-mcp directives — stays data: the envelope's directives are
    always empty, so an external server can never steer the host.
    """
    if result.get("resultType") == "input_required":
        return ServerResponse.refusal(
            "input_required_unsupported",
            f"external server '{server}' asked for user input during '{server}.{tool}', which entropic-mcp does not "
            "relay to external servers; use the tool with arguments that need no further input",
            server=server,
        )
    parts: list[str] = []
    for block in result.get("content") or ():
        kind = block.get("type", "")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "resource":
            inner = block["resource"]
            text = inner.get("text")
            parts.append(
                text if isinstance(text, str) else f"[resource {inner['uri']} ({inner.get('mimeType') or 'binary'})]"
            )
        elif kind == "resource_link":
            parts.append(f"[resource link {block['uri']}]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.get('mimeType')}, {len(block.get('data', ''))} base64 characters]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    is_error = bool(result.get("isError"))
    structured = result.get("structuredContent")
    structured = structured if isinstance(structured, dict) else None
    text = "\n".join(parts)
    if not parts and structured is not None:
        text = dumps(structured)
    return ServerResponse._make(text, (), is_error, None if is_error else structured)


def bounded(response: ServerResponse, server: str, tool: str, limit: int) -> ServerResponse:
    """An external result within ``[pipeline] max_result_bytes``, structured content included.

    The pipeline cuts a long text; a cut JSON object is no structured content, and a client
    whose tool declares an ``outputSchema`` raises on a success without it. So structured
    content over the cap becomes an error saying so (errors carry no structured content), and
    a long text beside structured content that fits is replaced by that content's JSON (what
    MCP asks the text block to carry), which the pipeline then leaves whole.
    """
    structured = response.structured
    if limit <= 0 or structured is None or response.is_error:
        return response
    text = dumps(structured)
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        return ServerResponse.refusal(
            "result_too_large",
            f"external server '{server}' answered '{server}.{tool}' with {size} bytes of structured content, more "
            f"than [pipeline] max_result_bytes = {limit}; call it again asking for less (a narrower query, a "
            "filter or a smaller page)",
            server=server,
        )
    if len(response.result.encode("utf-8", errors="surrogatepass")) > limit:
        return ServerResponse._make(text, (), False, structured, response.content)
    return response


def _hints(tool: Any) -> dict[str, Any]:
    annotations = tool.annotations
    if annotations is None:
        return {}
    return annotations.model_dump(by_alias=True, exclude_none=True, mode="json")


class ExternalServer(MCPServerBase):
    """The tools of one ``[external.<name>]`` server, reached through its client pool.

    Its tools are read when it starts (``tools`` waits for that first listing, at most
    ``connect_timeout_seconds`` plus ``call_timeout_seconds``), withdrawn while it is down and
    restored when it is back; every change calls the registered listeners (a ServerManager's
    ``invalidate``, ``serve``'s change notification).
    """

    tools_at_start = False  # listed when it runs: loading the host never waits for it

    def __init__(
        self, config: ExternalServerConfig, *, root: str | Path | None = None, loop: PoolLoop | None = None
    ) -> None:
        super().__init__(config.name, root=root)
        from ._pool import Pool

        self.config = config
        self.default_timeout_seconds = config.call_timeout_seconds + PIPELINE_GRACE_SECONDS
        self._known: dict[str, ExternalTool] = {}
        self.skipped: dict[str, str] = {}
        self._listeners: list[Callable[[], None]] = []
        self._managers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._loop_choice = loop
        #: Servers configured together: the first one started in the background starts them all.
        self.siblings: list[ExternalServer] = [self]
        self.pool = Pool(config, self.root, None, self._on_listing)
        self._first: concurrent.futures.Future[None] | None = None
        #: The pending withdrawal of a server that went down (its grace period running).
        self._withdrawal: asyncio.TimerHandle | None = None

    # -- starting --------------------------------------------------------------------------------

    def _begin(self) -> concurrent.futures.Future[None]:
        """Start on the background pool loop unless already started (non-blocking)."""
        with self._lock:
            if self._first is None:
                loop = self._loop_choice or shared_loop()
                self.pool.loop = loop
                self._first = loop.submit(self.pool.start())
            return self._first

    async def start_here(self) -> None:
        """Adopt the running loop for this server's pool and run the first discovery on it.

        For hosts whose loop lives as long as the server (``serve`` does this): calls then need
        no hop to the background pool loop. Close with ``aclose`` before that loop ends.
        """
        with self._lock:
            first = self._first
            if first is None:
                self.pool.loop = LocalLoop(asyncio.get_running_loop())
                first = self._first = concurrent.futures.Future()
                adopted = True
            else:
                adopted = False
        if not adopted:
            if not first.done():
                await asyncio.wrap_future(first)
            if isinstance(self.pool.loop, PoolLoop) and not self.closed:
                await self._move_here()
            return
        try:
            await self.pool.start()
        finally:
            first.set_result(None)

    async def _move_here(self) -> None:
        """Move a pool started on the background loop (e.g. by a build-time check) to this loop.

        A new pool connects and lists here; calls keep using the old one until the new one is
        ready, then the old one's clients are closed. Costs one more connection at start-up, saves
        two thread hops on every call after.
        """
        from ._pool import Pool

        old = self.pool
        fresh = Pool(self.config, self.root, LocalLoop(asyncio.get_running_loop()), self._on_listing)
        fresh._outage_reported = old._outage_reported  # one warning per outage, not one per pool
        await fresh.start()
        if fresh.state != "connected" and old.state == "connected":
            await fresh.close()  # keep the working pool; the move is only an optimisation
            return
        self.pool = fresh
        assert old.loop is not None
        await old.loop.run(old.close())

    def wait_started(self, timeout: float | None = None) -> bool:
        """Start if need be and wait for the first discovery; False if it is still running."""
        first = self._first
        if first is None:
            for server in self.siblings:
                if server is self or not server.closed:  # a sibling left out (its name taken) never starts
                    server._begin()
            first = self._begin()
        if first.done():
            return True
        loop = self.pool.loop
        if loop is not None and threading.current_thread() is loop.thread:
            return False  # never block the loop the discovery runs on
        if timeout is None:
            timeout = self.config.connect_timeout_seconds + self.config.call_timeout_seconds
        try:
            first.result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        except Exception:  # the failure is the pool's to report (tools.discovery_failed)
            log.debug("first discovery of %s raised", self.name, exc_info=True)
        return True

    @property
    def tools(self) -> Mapping[str, ToolBase]:
        if self._first is None or not self._first.done():
            self.wait_started()
        return self._tools

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.to_mcp() for tool in self.tools.values()]

    def get_tool(self, tool_name: str) -> ToolBase | None:
        # While the server is down its tools are withdrawn from the listing, but a call by name
        # still finds it and is answered "disconnected" rather than "unknown tool".
        if self._first is None or not self._first.done():
            self.wait_started()
        return self._known.get(tool_name)

    def access_level(self, tool_name: str) -> AccessLevel:
        tool = self._known.get(tool_name)
        return tool.required_access_level if tool is not None else AccessLevel.WRITE

    def _level(self, name: str, hints: Mapping[str, Any]) -> AccessLevel:
        """``access`` / ``read_only_tools`` first; the server's own ``readOnlyHint`` only with
        ``trust_annotations = true`` (MCP: hints from an untrusted server are untrusted); else WRITE."""
        override = self.config.access.get(name)
        if override is not None:
            return override
        if self.config.trust_annotations and hints.get("readOnlyHint") is True:
            return AccessLevel.READ
        return AccessLevel.WRITE

    def _build(self, listed: list[Any]) -> dict[str, ExternalTool]:
        from .._schema import SchemaValidator

        tools: dict[str, ExternalTool] = {}
        skipped: dict[str, str] = {}
        for item in listed:
            name = item.name
            if not isinstance(name, str) or not TOOL_NAME.match(name):
                skipped[str(name)] = "the name is not usable in <server>.<tool> (letters, digits, '_', '-'; at most 64)"
                continue
            if name in tools:
                skipped[name] = "the server listed this name twice"
                continue
            try:
                schema = dict(item.input_schema)
                SchemaValidator(schema)
                definition = ToolDefinition(
                    name=name,
                    description=item.description or "",
                    input_schema=schema,
                    title=item.title,
                    output_schema=item.output_schema,
                )
            except (ToolDefinitionError, TypeError, ValueError) as exc:
                skipped[name] = f"unusable inputSchema: {exc}"
                continue
            hints = _hints(item)
            tools[name] = ExternalTool(
                definition, self._level(name, hints), hints, trusted=self.config.trust_annotations
            )
        for name, why in skipped.items():
            if self.skipped.get(name) != why:
                log.warning("external server %r: tool %r skipped: %s", self.name, name, why)
        self.skipped = skipped
        return tools

    def _on_listing(self, listed: list[Any] | None) -> None:
        """Called on the pool loop: a new list (``None``: the server went down).

        A server that went down keeps its tools listed for ``withdraw_after_seconds``: a model
        calling one meanwhile gets a tool error naming the server and when to retry, not a
        listing that changed under it (many hosts answer a vanished tool with a bare protocol
        error). Still down then, they are withdrawn (with a change notification) until it is back.
        """
        if listed is None:
            grace = self.config.withdraw_after_seconds
            if grace > 0 and self._tools:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    loop = None
                if loop is not None:
                    if self._withdrawal is None:
                        self._withdrawal = loop.call_later(grace, self._withdraw)
                    return
            self._withdraw()
            return
        if self._withdrawal is not None:
            self._withdrawal.cancel()
            self._withdrawal = None
        with self._lock:
            tools = self._build(listed)
            unchanged = tools.keys() == self._tools.keys() and all(
                t.same_as(self._tools[n])  # type: ignore[arg-type]
                for n, t in tools.items()
            )
            self._known = tools
            if unchanged:
                return
            self._tools = tools  # type: ignore[assignment]  # swapped whole: readers never see a half list
        self._changed()

    def _withdraw(self) -> None:
        self._withdrawal = None
        if self.pool.state == "connected":
            return  # back before the grace ran out (its new listing is already in place)
        with self._lock:
            if not self._tools:
                return
            self._tools = {}
        log.warning(
            "external server %r: still down after %g s; its tools are withdrawn until it is back",
            self.name,
            self.config.withdraw_after_seconds,
        )
        self._changed()

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                log.warning("a tool-list listener of %s raised", self.name, exc_info=True)

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` (from the pool's thread) whenever the tools change; returns a remover."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def attach(self, manager: Host) -> None:
        """Invalidate ``manager``'s cached listing whenever this server's tools change (idempotent)."""
        if manager in self._managers:
            return
        self._managers.add(manager)
        ref = weakref.ref(manager)

        def invalidate() -> None:
            target = ref()
            if target is not None:
                target.invalidate()

        self.add_listener(invalidate)

    # -- calls ---------------------------------------------------------------------------------

    async def execute(self, tool_name: str, raw_args: object, ctx: CallContext | None = None) -> ServerResponse:
        """Run one call on the caller's client; every failure is an envelope naming the server."""
        if ctx is None:
            ctx = CallContext()
        host = host_of(ctx)
        if host is not None:
            self.attach(host)
        if self._first is None or not self._first.done():
            await self._started_async()
        if self._known.get(tool_name) is None:
            return ServerResponse.failure(f"Error: unknown tool '{self.name}.{tool_name}'")
        args = normalize_args(raw_args)
        binding = Binding(ctx.conversation_id, ctx.identity)
        pool = self.pool
        loop = pool.loop
        assert loop is not None
        try:
            call = pool.call(binding, tool_name, args, ctx.deadline)
            # On the pool's own loop (serve's, adopted) the call is awaited in place: no hop.
            result = await (call if loop.here() else loop.run(call))
        except PoolError as exc:
            return ServerResponse.refusal(exc.code, exc.message, server=self.name, **exc.extra)
        except (ClientBroken, ToolListIncompleteError) as exc:
            reason = exc.reason if isinstance(exc, ClientBroken) else str(exc)
            return ServerResponse.refusal(
                "server_failed",
                f"external server '{self.name}' failed during '{self.name}.{tool_name}': {reason}. It was "
                "disconnected and is being reconnected; try again shortly.",
                server=self.name,
            )
        except Exception as exc:
            from mcp.shared.exceptions import MCPError  # here: a successful call pays no import

            if not isinstance(exc, MCPError):
                raise
            return ServerResponse.refusal(
                "server_error",
                f"external server '{self.name}' answered '{self.name}.{tool_name}' with an error: {exc.message}",
                server=self.name,
                rpc_code=exc.code,
            )
        return bounded(to_response(self.name, tool_name, result), self.name, tool_name, ctx.services.result_limit)

    async def list_for(self, ctx: CallContext) -> list[dict[str, Any]]:
        """The tools ``ctx``'s conversation may see now, named ``<server>.<tool>``, through the pool.

        Raises:
            PoolError: ``DiscoveryFailedError`` (code ``tools.discovery_failed``) or
                ``BindingChangedError`` — a failed discovery, never a tool result.
        """

        def resolve() -> Binding:
            return Binding(ctx.conversation_id, ctx.identity)

        if self._first is None or not self._first.done():
            await self._started_async()
        assert self.pool.loop is not None
        listed = await self.pool.loop.run(self.pool.list(resolve, ctx.deadline))
        tools = self._build(listed)
        return [tool.to_mcp(f"{self.name}.{name}") for name, tool in tools.items()]

    # -- lifetime --------------------------------------------------------------------------------

    async def _started_async(self) -> None:
        """Start in the background if need be and wait for the first discovery without blocking."""
        first = self._begin() if self._first is None else self._first
        if not first.done():
            await asyncio.wrap_future(first)

    def end_conversation(self, conversation_id: str) -> None:
        loop = self.pool.loop
        if not self.closed and loop is not None and loop.alive:
            loop.submit(self.pool.end_conversation(conversation_id))

    async def aclose(self) -> None:
        """Close every client from async code (on or off the pool's loop)."""
        if self.closed:
            return
        self.closed = True
        loop = self.pool.loop
        if loop is not None and loop.alive:
            await loop.run(self.pool.close())

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        loop = self.pool.loop
        if loop is None:
            return
        try:
            if not loop.alive:
                log.debug("external server %s: its loop has ended; its processes see their input close", self.name)
            elif threading.current_thread() is loop.thread:
                _CLOSING.add(loop.submit(self.pool.close()))  # cannot wait on the loop that does the work
            else:
                loop.run_sync(self.pool.close(), timeout=20)
        except Exception:
            log.warning("external server %s did not close cleanly", self.name, exc_info=True)

    def configure(self, config: Mapping[str, Any]) -> None:
        """``[servers.<name>]`` tables do not apply: an external server is configured in ``[external.<name>]``."""
        if config:
            from .._errors import ConfigError

            self.close()  # the manager stops building: the process started for this server must not leak
            raise ConfigError(
                f"[servers.{self.name}] does not apply to the external server {self.name!r}; "
                f"put its settings in [external.{self.name}]"
            )


@attrs.frozen(kw_only=True)
class DiscoveryFailure:
    """One server whose tools could not be discovered for a turn (``tools.discovery_failed``)."""

    server: str
    code: str
    message: str
    event: str = "tools.discovery_failed"


@attrs.frozen(kw_only=True)
class ToolDiscovery:
    """A turn's tool discovery: the tools the conversation may use, and the servers that failed."""

    tools: tuple[dict[str, Any], ...]
    failures: tuple[DiscoveryFailure, ...] = ()


async def discover_tools(manager: Host, ctx: CallContext | None = None) -> ToolDiscovery:
    """Every tool ``ctx``'s conversation may use this turn, external servers listed through the pool.

    A server whose listing fails or is refused is reported in ``failures`` (event
    ``tools.discovery_failed``) and contributes no tools — it never turns into a tool result.
    """
    ctx = ctx if ctx is not None else CallContext()
    externals = [s for s in manager.servers.values() if isinstance(s, ExternalServer)]
    for server in externals:
        server.attach(manager)
    results = await asyncio.gather(*(s.list_for(ctx) for s in externals), return_exceptions=True)
    by_server: dict[str, list[dict[str, Any]]] = {}
    failures: list[DiscoveryFailure] = []
    for server, result in zip(externals, results, strict=True):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result
            code = result.code if isinstance(result, PoolError) else "tools.discovery_failed"
            message = result.message if isinstance(result, PoolError) else str(result)
            log.warning("tools.discovery_failed: %s: %s", server.name, message)
            failures.append(DiscoveryFailure(server=server.name, code=code, message=message))
        else:
            by_server[server.name] = result
    tools: list[dict[str, Any]] = []
    for name, owner in manager.servers.items():
        if isinstance(owner, ExternalServer):
            tools.extend(by_server.get(name, ()))
        else:
            tools.extend(tool.to_mcp(f"{name}.{tool.name}") for tool in owner.tools.values())
    return ToolDiscovery(tools=tuple(tools), failures=tuple(failures))


async def start_external_servers(manager: Host) -> None:
    """Adopt the running loop for every external server of ``manager`` and discover them together.

    For a host whose loop outlives the servers (``serve``); pair with ``close_external_servers``
    before that loop ends.
    """
    servers = [s for s in manager.servers.values() if isinstance(s, ExternalServer)]
    for server in servers:
        server.attach(manager)
    await asyncio.gather(*(server.start_here() for server in servers))


async def close_external_servers(manager: Host) -> None:
    """Close every external server's clients (and stop their processes) from async code."""
    servers = [s for s in manager.servers.values() if isinstance(s, ExternalServer)]
    await asyncio.gather(*(server.aclose() for server in servers), return_exceptions=True)
