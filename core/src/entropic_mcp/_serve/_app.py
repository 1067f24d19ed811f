"""The MCP server: a low-level ``mcp`` ``Server`` whose handlers run the ServerManager's pipeline."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import weakref
from collections.abc import Mapping
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, SERVER_INFO_META_KEY, CallToolRequestParams, PaginatedRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._config import ServeConfig
from .._context import CallContext
from .._envelope import dumps
from .._manager import ServerManager
from .._pipeline import CallOutcome
from .._pipeline._idempotency import key_in_meta
from .._version import __version__
from ._approval import (
    ANSWER_TIMEOUT,
    APPROVAL_MESSAGE,
    CURRENT,
    ElicitingChannel,
    PausedCalls,
    SuspendedCall,
    answer_from,
    supports_elicitation,
)
from ._listing import LIST_TTL_MS, InvalidCursor, Listing
from ._names import ToolNames, exposed_name
from ._oauth import PRINCIPAL_KEY, Principal
from ._progress import ProgressRelay, progress_token
from ._relay import CANCEL_POLL, OwnerGone, Relay, wire_responses
from ._results import CONVERSATION_KEY, DIRECTIVES_KEY, KIND_KEY, call_result
from ._sampling import Delegations, SamplingCall, SessionSampler, answer_for, declares_directives, sampling_of
from ._sampling import input_required as input_request_result
from ._tasks import EXTENSION as TASKS_EXTENSION
from ._tasks import TaskParams, Tasks, UpdateTaskParams, declares_tasks, missing_capability

log = logging.getLogger("entropic_mcp.serve")

INSTRUCTIONS = (
    "entropic-mcp: permissioned tools named {spelling} (every spelling of a name is accepted). Failed calls answer "
    "isError with a JSON message that says how to recover. Results carry _meta['entropic-mcp/kind'] and "
    "_meta['entropic-mcp/directives']; send _meta['entropic-mcp/conversation'] to keep one conversation's "
    "state (duplicates, read tracking, todos) apart from another's."
)
MAX_CONVERSATION_KEY = 256
#: On ``tools/list`` results: the external servers whose tools could not be discovered (down).
DISCOVERY_FAILED_KEY = "entropic-mcp/discovery_failed"


class ServeApp:
    """Everything one ``entropic-mcp serve`` process answers with.

    Args:
        manager: the ServerManager whose tools are served (its pipeline runs every call).
        settings: the ``[serve]`` table.
        transport: ``"stdio"`` or ``"http"`` (decides the default conversation key).
    """

    def __init__(self, manager: ServerManager, settings: ServeConfig, *, transport: str = "stdio") -> None:
        self.manager = manager
        self.settings = settings
        self.transport = transport
        tools = manager.list_tools()
        self.names = ToolNames.build([tool["name"] for tool in tools], settings.tool_names)
        self.names.report()
        self.delegations = Delegations(manager, self._exposed, lambda name: self.names.internal(name))
        self.host_context = frozenset(manager.tools_with("host_context"))
        self._build_listings(tools)
        self.declared = _declared(tools)
        self.display = self.names.exposed if self.names.style != "dotted" else None
        self.check_listing()
        self.process_conversation = f"stdio-{os.getpid()}-{secrets.token_hex(4)}"
        self.suspended: dict[str, SuspendedCall] = {}
        # Request states signed with the deployment's key; paused approvals kept in a store that
        # several workers share, so the retry may reach any of them.
        shared = manager.config.storage.shares_state
        self.paused = PausedCalls((lambda: manager.storage) if shared else (lambda: None), settings.state_key)
        # Questions asked mid-call, answered through whichever worker the retry reaches.
        self.relay = Relay((lambda: manager.storage) if shared else (lambda: None), ANSWER_TIMEOUT)
        self.watchers: set[asyncio.Task[None]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self.server: Server[Any] = Server(
            "entropic-mcp",
            version=__version__,
            title="entropic-mcp",
            instructions=INSTRUCTIONS.format(spelling=exposed_name("<server>.<tool>", settings.tool_names)),
            # Looked up through self: the listing is rebuilt when an external server's tools change.
            get_tool_input_schema=lambda name: self.listing.input_schema(name),
        )
        # Registered as wire-dict handlers: results are built as the wire form directly.
        self.server.add_request_handler("tools/list", PaginatedRequestParams, self.list_tools)
        self.server.add_request_handler("tools/call", CallToolRequestParams, self.call_tool)
        # MCP Tasks: records in the store, so any worker answers for a task another one runs.
        self.tasks = Tasks(lambda: manager.storage, after=settings.task_after_seconds)
        self.server.extensions[TASKS_EXTENSION] = {}
        self.server.add_request_handler("tasks/get", TaskParams, self.task_get)
        self.server.add_request_handler("tasks/cancel", TaskParams, self.task_cancel)
        self.server.add_request_handler("tasks/update", UpdateTaskParams, self.task_update)
        # After the OpenTelemetry middleware, so listing spans are still recorded.
        self.server.middleware.append(self._modern_listing)
        self.server.middleware.append(self._object_arguments)
        self._server_stamp = self.server.server_info_stamp
        self._watch_external_servers()

    # -- tools/list ---------------------------------------------------------------------------------

    def _exposed(self, name: str) -> str:
        return self.names.to_exposed.get(name, name)

    def _build_listings(self, tools: list[dict[str, Any]]) -> None:
        """The listing for each kind of client, and whether one answer fits them all."""
        self.listing = Listing(tools, self.names, self.settings.list_page_size)
        self.plain_listing = self._plain_listing(tools)
        self.sampling_listing = self._plain_listing(tools, delegation=True)
        # 2026-07-28 cacheScope: a shared cache may hand one client's listing to another only
        # when every client gets the same one.
        same = self.plain_listing is self.listing and self.sampling_listing is self.listing
        self.cache_scope = "public" if same else "private"

    def _plain_listing(self, tools: list[dict[str, Any]], *, delegation: bool = False) -> Listing:
        """The listing for a client that does not run directives: no tool that would do nothing for it.

        Host-context tools (``prune_context``, ``context_inspect``: they act on a conversation only
        a directive-running host holds) are left out, and so are the delegation tools unless
        ``delegation`` (the client samples, or the config opts in).
        """
        hidden = set(self.host_context)
        if not delegation:
            hidden |= self.delegations.tools
        if not hidden:
            return self.listing
        return Listing([t for t in tools if t["name"] not in hidden], self.names, self.settings.list_page_size)

    def _listing_for(self, ctx: Any) -> Listing:
        capabilities = ctx.session.client_capabilities
        if self._runs_directives(capabilities):
            return self.listing
        return self.sampling_listing if self.delegations.listed(capabilities) else self.plain_listing

    def _runs_directives(self, capabilities: Any) -> bool:
        """The client declared the entropic-mcp/directives extension, or the config says it runs them."""
        return declares_directives(capabilities) or self.delegations.plan.get("without_sampling") == "directives"

    def _watch_external_servers(self) -> None:
        """External servers' tools come and go: rebuild the listing and tell the clients each time.

        Handshake-era clients that listed tools get ``notifications/tools/list_changed``; 2026-07-28
        clients get it on their ``subscriptions/listen`` stream (served only when there are external
        servers, so the capability is only announced when the list can change).
        """
        self._listing_sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._tool_events: Any = None
        self._announcing: set[asyncio.Task[None]] = set()
        watched = [s for s in self.manager.servers.values() if hasattr(s, "add_listener")]
        if not watched:
            return
        from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
        from mcp_types import SubscriptionsListenRequestParams

        self._tool_events = InMemorySubscriptionBus()
        self.server.add_request_handler(
            "subscriptions/listen", SubscriptionsListenRequestParams, ListenHandler(self._tool_events)
        )
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None

        def changed() -> None:  # called on the pool's thread
            target = loop
            if target is None or target.is_closed():
                return
            target.call_soon_threadsafe(self.tools_changed)

        for server in watched:
            server.add_listener(changed)

    def initialization_options(self) -> Any:
        """The handshake answer; ``tools.listChanged`` when external servers can change the list."""
        from mcp.server.lowlevel.server import NotificationOptions

        return self.server.create_initialization_options(
            NotificationOptions(tools_changed=self._tool_events is not None)
        )

    def tools_changed(self) -> None:
        """Rebuild names and pages from the manager, then notify every client that may hold a copy."""
        self.manager.invalidate()
        tools = self.manager.list_tools()
        self.names = ToolNames.build([tool["name"] for tool in tools], self.settings.tool_names)
        self._build_listings(tools)
        self.declared = _declared(tools)
        self.display = self.names.exposed if self.names.style != "dotted" else None
        task = asyncio.get_running_loop().create_task(self._announce_tools_changed())
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)

    async def _announce_tools_changed(self) -> None:
        for session in list(self._listing_sessions):
            await _notify_quietly(session)
        if self._tool_events is not None:
            from mcp.server.subscriptions import ToolsListChanged

            await self._tool_events.publish(ToolsListChanged())

    async def list_tools(self, ctx: Any, params: PaginatedRequestParams | None) -> dict[str, Any]:
        if self._tool_events is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # The connection, not ctx.session: that is a proxy built per request.
            connection = getattr(ctx.session, "_connection", None)
            if connection is not None:
                self._listing_sessions.add(connection)
        cursor = params.cursor if params is not None else None
        try:
            page = self._listing_for(ctx).page(cursor)
        except InvalidCursor as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        if self._tool_events is not None:
            page = self._with_discovery_failures(page)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return {**page, "ttlMs": LIST_TTL_MS, "cacheScope": self.cache_scope, "resultType": "complete"}
        return page

    def _with_discovery_failures(self, page: dict[str, Any]) -> dict[str, Any]:
        """External servers that are down, in ``_meta["entropic-mcp/discovery_failed"]`` (never as tools)."""
        failed = [
            {"server": name, "event": "tools.discovery_failed", "message": pool.last_error or "not connected"}
            for name, server in self.manager.servers.items()
            if (pool := getattr(server, "pool", None)) is not None and pool.state == "disconnected"
        ]
        if not failed:
            return page
        return {**page, "_meta": {**page.get("_meta", {}), DISCOVERY_FAILED_KEY: failed}}

    async def _object_arguments(self, ctx: Any, call_next: Any) -> Any:
        """``tools/call`` whose ``arguments`` is not an object: a tool error the model can act on.

        The SDK would answer -32602 with no detail; a model sending ``"arguments": [..]`` or a
        string needs to be told what the call must look like.
        """
        params = ctx.params if ctx.method == "tools/call" else None
        if not isinstance(params, Mapping):
            return await call_next(ctx)
        arguments = params.get("arguments")
        name = params.get("name")
        if arguments is None or isinstance(arguments, Mapping) or not isinstance(name, str):
            return await call_next(ctx)
        if self.names.internal(name) is None:
            return await call_next(ctx)  # an unknown name: call_tool answers it with the nearest names
        got = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
            type(arguments), type(arguments).__name__
        )
        message = (
            f"The arguments of '{name}' must be a JSON object of named arguments, got {got}. Call it again with "
            'an object, e.g. {"path": "README.md"}; see the tool\'s inputSchema in tools/list.'
        )
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": dumps({"error": "invalid_args", "message": message})}],
            "isError": True,
            "_meta": {KIND_KEY: "rejected_schema", DIRECTIVES_KEY: []},
        }
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            result["resultType"] = "complete"
        return result

    async def _modern_listing(self, ctx: Any, call_next: Any) -> Any:
        """2026-07-28 ``tools/list`` straight from the page cache.

        The pages are built once and checked against the protocol's result model at start-up,
        so re-validating every tool of every page on every request (what the SDK would do) is
        skipped; handshake-era listings take the ordinary path.
        """
        if ctx.method != "tools/list" or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise MCPError(code=INVALID_PARAMS, message="Invalid request parameters: cursor must be a string")
        try:
            page = self._listing_for(ctx).page(cursor)
        except InvalidCursor as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        meta: dict[str, Any] = {SERVER_INFO_META_KEY: dict(self._server_stamp)}
        if self._tool_events is not None:
            meta.update(self._with_discovery_failures({}).get("_meta", {}))
        return {
            **page,
            "ttlMs": LIST_TTL_MS,
            "cacheScope": self.cache_scope,
            "resultType": "complete",
            "_meta": meta,
        }

    def check_listing(self) -> None:
        """Validate every cached page against the 2026-07-28 ``ListToolsResult`` (once, at start-up)."""
        from mcp_types import ListToolsResult

        cursor = None
        while True:
            page = self.listing.page(cursor)
            ListToolsResult.model_validate({**page, "ttlMs": LIST_TTL_MS, "cacheScope": "public"}, by_name=False)
            cursor = page.get("nextCursor")
            if cursor is None:
                return

    # -- tools/call ---------------------------------------------------------------------------------

    async def call_tool(self, ctx: Any, params: CallToolRequestParams) -> dict[str, Any]:
        internal = self.names.internal(params.name)
        if internal is None:
            return self._unknown_tool(ctx, params.name)
        if internal in self.host_context and not self._runs_directives(ctx.session.client_capabilities):
            return self._host_context_only(ctx, params.name)
        conversation = self.conversation(ctx)
        arguments = params.arguments if params.arguments is not None else {}
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if declares_tasks(ctx):
                return await self.tasks.run(
                    lambda: self._call_modern(ctx, params, internal, arguments, conversation),
                    conversation,
                    resume={"name": params.name, "arguments": arguments},
                )
            return await self._call_modern(ctx, params, internal, arguments, conversation)
        session = ctx.session
        channel = sampler = None
        if session.can_send_request and supports_elicitation(session.client_capabilities):
            channel = ElicitingChannel(session, ctx.request_id)
        sampling, tools = sampling_of(session.client_capabilities)
        if sampling and session.can_send_request:
            sampler = SessionSampler(session, ctx.request_id, tools=tools)
        return await self._call_inline(ctx, internal, arguments, conversation, channel, sampler)

    async def _run(
        self, ctx: Any, internal: str, arguments: dict[str, Any], call_ctx: CallContext, sampler: Any
    ) -> Any:
        """One call through the pipeline; a delegation directive's children run here when the client samples."""
        outcome = await self.manager.call(internal, arguments, call_ctx)
        if internal not in self.delegations.tools:
            return outcome
        if sampler is not None:
            return await self.delegations.carry_out(outcome, call_ctx, sampler)
        if not self.delegations.listed(ctx.session.client_capabilities) and not outcome.response.is_error:
            return self.delegations.refusal(outcome)
        return outcome

    def _host_context_only(self, ctx: Any, name: str) -> dict[str, Any]:
        message = (
            f"'{name}' acts on the conversation a directive-running host keeps, and this client runs no "
            "entropic-mcp directives, so it would do nothing here; it is not listed for this client. Carry on "
            "without it (the client manages its own context)."
        )
        return self._tool_error(ctx, "not_available", message)

    def _tool_error(self, ctx: Any, error: str, message: str) -> dict[str, Any]:
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": dumps({"error": error, "message": message})}],
            "isError": True,
            "_meta": {KIND_KEY: "rejected_schema" if error == "unknown_tool" else "error", DIRECTIVES_KEY: []},
        }
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            result["resultType"] = "complete"
        return result

    def _unknown_tool(self, ctx: Any, name: str) -> dict[str, Any]:
        """A tool error naming the nearest listed names: a model reads it and calls again.

        A protocol error (what MCP's examples show) reaches many hosts' models as a bare
        "Unknown tool" or not at all; the same answer as a tool result lets the model recover.
        """
        nearest = self.names.nearest(name)
        hint = (
            f"Did you mean {' or '.join(repr(n) for n in nearest)}?"
            if nearest
            else "List the tools with tools/list for the names this server serves."
        )
        message = f"There is no tool named {name[:100]!r}. {hint} Call it again with a listed name."
        return self._tool_error(ctx, "unknown_tool", message)

    async def _call_inline(
        self, ctx: Any, internal: str, arguments: dict[str, Any], conversation: str, channel: Any, sampler: Any = None
    ) -> dict[str, Any]:
        relay = ProgressRelay(ctx.session) if progress_token(ctx.params) is not None else None
        token = CURRENT.set(channel)
        try:
            outcome = await self._run(
                ctx,
                internal,
                arguments,
                self._call_context(ctx, conversation, relay),
                sampler,
            )
        except BaseException:
            if relay is not None:
                relay.abort()
            raise
        finally:
            CURRENT.reset(token)
            if channel is not None:
                channel.close()
        if relay is not None:
            await relay.close()
        return self._result(outcome, internal)

    async def _call_modern(
        self, ctx: Any, params: CallToolRequestParams, internal: str, arguments: dict[str, Any], conversation: str
    ) -> dict[str, Any]:
        """2026-07-28: the call runs in its own task so it can wait for an InputRequiredResult round."""
        state = params.request_state
        if state is not None:
            rerun = False
            call = self.suspended.get(state)
            if call is not None and (
                call.name != internal or call.arguments != arguments or call.conversation != conversation
            ):
                call = None
            if call is not None and call.relayed and not await _off_loop(self.relay.claim, _nonce(state)):
                call = None  # another worker's retry answered it first: this worker resumes it with that
            if call is not None:
                self.suspended.pop(state, None)
            else:
                message = await _off_loop(self.paused.take, state, internal, arguments, conversation)
                if message is not None:  # paused on another worker: run it here, with this answer
                    call = self._start_modern(ctx, internal, arguments, conversation)
                    call.preanswer = (message, answer_from(params.input_responses))
                    waiting, rerun = call.round, True
                else:  # asked mid-call by another worker: that one resumes it, this one relays
                    relayed = await self._hand_over(state, internal, arguments, conversation, params.input_responses)
                    if relayed is not None:
                        return relayed
            if call is None:
                raise MCPError(
                    code=INVALID_PARAMS,
                    message="Invalid or expired requestState: call the tool again",
                    data={"reason": "invalid_request_state"},
                )
            if not rerun:
                if call.relay is not None:
                    call.relay.target = ctx.session
                waiting = call.next_round()
                call.answer(answer_for(call, params.input_responses))
        elif not supports_elicitation(ctx.session.client_capabilities) and not self.delegations.wants(
            internal, ctx.session.client_capabilities
        ):
            # Nobody to ask: the call cannot pause, so it runs inline like a handshake-era one.
            return {**await self._call_inline(ctx, internal, arguments, conversation, None), "resultType": "complete"}
        else:
            call = self._start_modern(ctx, internal, arguments, conversation)
            waiting = call.round
        return await self._settle(call, waiting)

    async def _settle(self, call: SuspendedCall, waiting: Any) -> dict[str, Any]:
        """The wire answer once ``waiting`` resolves: the call's next question, or its result."""
        try:
            asked = await waiting
        except BaseException:
            call.cancel()
            if call.relay is not None:
                call.relay.abort()
            raise
        if asked is not None:
            # The first question, a tool-call approval: nothing has run yet, so any worker can run it again.
            first = isinstance(asked, tuple) and call.questions == 1 and asked[0].startswith(APPROVAL_MESSAGE)
            state, call.stored = await _off_loop(
                self.paused.pause, call.name, call.arguments, call.conversation, asked if first else None
            )
            if call.stored:
                # Whichever worker the answer reaches runs it again from the start (nothing of it
                # has run): no task waits here for an answer another worker may receive.
                call.cancel()
                if call.relay is not None:
                    call.relay.abort()
                return input_request_result(asked, state)
            self.suspended[state] = call
            assert call.task is not None
            call.task.add_done_callback(self._forget(state))
            # Asked mid-call: the call waits here; the question is kept in a shared store too, so
            # the worker the retry reaches can hand the answer over (_relay.py).
            call.relayed = await _off_loop(self.relay.open, _nonce(state), call.name, call.arguments, call.conversation)
            if call.relayed:
                watcher = asyncio.get_running_loop().create_task(self._watch(state, call))
                self.watchers.add(watcher)
                watcher.add_done_callback(self.watchers.discard)
                if self._heartbeat is None or self._heartbeat.done():
                    self._heartbeat = asyncio.get_running_loop().create_task(
                        self.relay.keep_alive(lambda: bool(self.watchers))
                    )
            return input_request_result(asked, state)
        assert call.task is not None
        outcome = call.task.result()
        if call.relay is not None:
            await call.relay.close()
        return {**self._result(outcome, call.name), "resultType": "complete"}

    async def _watch(self, state: str, call: SuspendedCall) -> None:
        """The owner's side of a relayed question: resume the call with the answer another worker got."""
        nonce = _nonce(state)
        answer = await self.relay.answer(nonce, lambda: self.suspended.get(state) is call)
        if answer is None:
            if self.suspended.get(state) is call and await self._withdrawn(nonce):
                # A relay counted this worker gone and told the client so, or the client cancelled
                # the retry that brought the answer: nobody will answer it.
                self.suspended.pop(state, None)
                call.cancel()
            return
        if self.suspended.pop(state, None) is not call:
            return
        if call.relay is not None:
            call.relay.abort()  # its progress has no request to go out on from here
        waiting = call.next_round()
        call.answer(answer_for(call, answer))
        settling = asyncio.ensure_future(self._settle(call, waiting))
        try:
            while not (await asyncio.wait({settling}, timeout=CANCEL_POLL))[0]:
                if await self._withdrawn(nonce):  # the relay's request was cancelled, or it gave up
                    settling.cancel()
                    await asyncio.wait({settling})
                    await _off_loop(self.relay.drop, nonce)
                    return
            result = settling.result()
        except asyncio.CancelledError:  # serve is stopping
            settling.cancel()
            await asyncio.wait({settling}, timeout=5)
            await _off_loop(self.relay.publish, nonce, _stopped(call.name))
            raise
        except Exception as exc:
            log.warning("a call resumed with a relayed answer failed", exc_info=True)
            result = _stopped(call.name, f"{type(exc).__name__}: {exc}")
        await _off_loop(self.relay.publish, nonce, result)

    async def _withdrawn(self, nonce: str) -> bool:
        try:
            return bool(await _off_loop(self.relay.withdrawn, nonce))
        except Exception as exc:  # the store failing: the call goes on, as on one worker
            log.debug("relayed question %s: the store did not answer: %s", nonce[:8], exc)
            return False

    async def _hand_over(
        self, state: str, internal: str, arguments: dict[str, Any], conversation: str, responses: Any
    ) -> dict[str, Any] | None:
        """Relay a retry's answers to the worker that asked (None: no question of this deployment's)."""
        nonce = await _off_loop(self.paused.verify, state, internal, conversation)
        if nonce is None:
            return None
        answer = wire_responses(responses)
        try:
            if not await _off_loop(self.relay.hand_over, nonce, internal, arguments, conversation, answer):
                return None
            return await self.relay.wait(nonce)
        except OwnerGone as gone:
            raise MCPError(
                code=INVALID_PARAMS, message=str(gone), data={"reason": "asking_worker_gone", "worker": gone.owner}
            ) from None

    # -- tasks (the io.modelcontextprotocol/tasks extension; _tasks.py) ----------------------------

    async def task_get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        if not declares_tasks(ctx):
            raise missing_capability()
        return await self.tasks.get(params.task_id, self.conversation(ctx))

    async def task_cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        if not declares_tasks(ctx):
            raise missing_capability()
        return await self.tasks.cancel(params.task_id, self.conversation(ctx))

    async def task_update(self, ctx: Any, params: UpdateTaskParams) -> dict[str, Any]:
        if not declares_tasks(ctx):
            raise missing_capability()
        return await self.tasks.update(
            params.task_id,
            self.conversation(ctx),
            params.input_responses,
            lambda resume, state, responses: self._resume_task(ctx, resume, state, responses),
        )

    async def _resume_task(self, ctx: Any, resume: dict[str, Any], state: str, responses: Any) -> dict[str, Any]:
        """A task's call again with the answers a ``tasks/update`` brought, as a retry with its request state."""
        params = CallToolRequestParams.model_validate(
            {
                "name": resume["name"],
                "arguments": resume["arguments"],
                "requestState": state,
                "inputResponses": responses,
            }
        )
        internal = self.names.internal(params.name)
        if internal is None:
            return self._unknown_tool(ctx, params.name)
        return await self._call_modern(ctx, params, internal, resume["arguments"], self.conversation(ctx))

    def _start_modern(self, ctx: Any, internal: str, arguments: dict[str, Any], conversation: str) -> SamplingCall:
        """A 2026-07-28 call started in its own task, able to pause for the client's answers."""
        sampling, tools = sampling_of(ctx.session.client_capabilities)
        call = SamplingCall(name=internal, arguments=arguments, conversation=conversation, tools=tools)
        if progress_token(ctx.params) is not None:
            call.relay = ProgressRelay(ctx.session)
        token = CURRENT.set(call if supports_elicitation(ctx.session.client_capabilities) else None)
        try:
            call.start(
                self._run(
                    ctx,
                    internal,
                    arguments,
                    self._call_context(ctx, conversation, call.relay),
                    call if sampling else None,
                )
            )
        finally:
            CURRENT.reset(token)
        return call

    def _result(self, outcome: CallOutcome, internal: str) -> dict[str, Any]:
        """The wire result: structured content for a tool declaring an outputSchema (or every object)."""
        return call_result(
            outcome,
            self.names.rename_mentions if self.display else None,
            declared=internal in self.declared,
            every_object=self.settings.structured_content == "json",
        )

    def _forget(self, state: str) -> Any:
        def forget(_task: object) -> None:
            self.suspended.pop(state, None)

        return forget

    # -- conversations -------------------------------------------------------------------------------

    def principal(self, ctx: Any) -> Principal | None:
        """Whose verified token the request carried (``[auth]`` over HTTP), else None.

        Only the Guard sets it, in the ASGI scope: no argument, ``_meta`` or header a client sends
        can name an identity or a subject.
        """
        scope = getattr(ctx.request, "scope", None)
        principal = scope.get(PRINCIPAL_KEY) if isinstance(scope, Mapping) else None
        return principal if isinstance(principal, Principal) else None

    def _call_context(self, ctx: Any, conversation: str, progress: Any) -> CallContext:
        """The call's context; under ``[auth]`` its identity (so access keys apply) and subject are the token's."""
        principal = self.principal(ctx)
        return CallContext(
            conversation_id=conversation,
            identity=principal.identity if principal is not None else None,
            subject=principal.subject if principal is not None else None,
            scope=principal.conversation_scope if principal is not None else None,
            progress=progress,
            tool_names=self.display,
            idempotency_key=key_in_meta(ctx.params),
            as_task=ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and declares_tasks(ctx),
        )

    def conversation(self, ctx: Any) -> str:
        """``_meta["entropic-mcp/conversation"]``, else one per stdio process / HTTP session / HTTP client.

        With a verified token (``[auth]``) the key lives inside the caller's own scope
        (``sub:<subject>/<key>``, or ``tenant:<tenant>/<key>`` with ``tenant_claim``): two people
        sending the same key never share a conversation's state, todo list or suspended calls.
        """
        principal = self.principal(ctx)
        owner = "" if principal is None else principal.conversation_scope + "/"
        params = ctx.params
        meta = params.get("_meta") if isinstance(params, Mapping) else None
        if isinstance(meta, Mapping):
            key = meta.get(CONVERSATION_KEY)
            # Printable: the key names state in the store and appears in logs and the audit trail.
            if isinstance(key, str) and len(key) <= MAX_CONVERSATION_KEY and key.strip() and key.isprintable():
                return owner + key
            if key is not None:
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=(
                        f"_meta['{CONVERSATION_KEY}'] must be a string of 1 to {MAX_CONVERSATION_KEY} printable "
                        f"characters, not only spaces (got {key!r:.60}); send e.g. a chat id"
                    ),
                )
        if self.transport == "stdio":
            return self.process_conversation
        request = ctx.request
        headers = getattr(request, "headers", None)
        session_id = headers.get("mcp-session-id") if headers is not None else None
        if session_id:
            key = f"{owner}http-session-{session_id}"
            self._end_with_connection(ctx, key)
            return key
        # 2026-07-28 requests are stateless: without a conversation key they share one per client.
        info = ctx.session.client_params.client_info if ctx.session.client_params is not None else None
        who = f"{getattr(info, 'name', '')}/{getattr(info, 'version', '')}"
        if principal is not None:  # the person, not the token: a refreshed token keeps the conversation
            return f"{owner}http-client-" + hashlib.sha256(who.encode()).hexdigest()[:16]
        auth = headers.get("authorization", "") if headers is not None else ""
        return "http-client-" + hashlib.sha256(f"{who}\x00{auth}".encode()).hexdigest()[:16]

    def _end_with_connection(self, ctx: Any, key: str) -> None:
        """Release the conversation's state when its HTTP session ends (once per connection)."""
        connection = getattr(ctx.session, "_connection", None)
        if connection is None or connection.state.get("entropic_mcp_conversation") == key:
            return
        connection.state["entropic_mcp_conversation"] = key
        connection.exit_stack.callback(self.manager.end_conversation, key)


def _nonce(state: str) -> str:
    return state.partition(".")[0]


def _stopped(name: str, why: str = "the worker running it stopped") -> dict[str, Any]:
    """The tool error a relay answers with when the resumed call ended without an outcome."""
    message = f"'{name}' did not finish after the answer was handed over ({why}); call it again"
    return {
        "content": [{"type": "text", "text": dumps({"error": "call_stopped", "message": message})}],
        "isError": True,
        "_meta": {KIND_KEY: "error", DIRECTIVES_KEY: []},
        "resultType": "complete",
    }


def _declared(tools: list[dict[str, Any]]) -> frozenset[str]:
    """The (internal) names of the tools that declare an ``outputSchema``."""
    return frozenset(tool["name"] for tool in tools if tool.get("outputSchema") is not None)


async def _notify_quietly(session: Any) -> None:
    try:
        await session.send_tool_list_changed()
    except Exception:  # a client that went away misses nothing it could still use
        log.debug("could not send tools/list_changed", exc_info=True)


async def _off_loop(function: Any, *args: Any) -> Any:
    """Store I/O in a worker thread: the event loop carries every other call."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(function, *args)


async def cancel_suspended(app: ServeApp) -> None:
    """Cancel calls still waiting for an answer, and those running as tasks (serve is stopping)."""
    await app.tasks.close()
    watchers = list(app.watchers)
    for watcher in watchers:  # a call resumed for another worker's relay: that relay is told
        watcher.cancel()
    if watchers:
        await asyncio.wait(watchers, timeout=5)
    if app._heartbeat is not None:
        app._heartbeat.cancel()
    try:  # relays refuse this worker's questions at once, not after the heartbeat goes stale
        await _off_loop(app.relay.retire)
    except Exception as exc:
        log.warning("the relay heartbeat was not deleted (relays count this worker gone later): %s", exc)
    calls = list(app.suspended.values())
    app.suspended.clear()
    for call in calls:
        call.cancel()
    tasks = [call.task for call in calls if call.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=5)
