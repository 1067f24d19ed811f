"""ServerManager: the registry of servers and the front door of the pipeline.

Hook calls go through ``_hooks.Hooks`` (typed, isolated), calls through ``_pipeline.Pipeline``,
model turns through ``_batch.run_batch``; this module keeps the registry and the queries the
stages ask.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _tracing
from ._access import AccessLevel
from ._assembly import Assembly
from ._calls import OutsideRootRequest
from ._config import Config, config_from_dict
from ._context import CallContext
from ._directives import DirectiveProcessor
from ._envelope import ServerResponse
from ._errors import DuplicateNameError
from ._isolation import reraise_host_stop
from ._pipeline._hooks import HookRefusal, Hooks
from ._pipeline._keys import AccessKeys
from ._pipeline._outcome import BatchOutcome, CallOutcome
from ._pipeline._permission import PermissionStage
from ._pipeline._rules import PermissionRules, ProtectedPaths
from ._plugins import Plugins
from ._server import MCPServerBase
from ._tools import ToolBase

if TYPE_CHECKING:
    from ._pipeline._idempotency import Idempotency
    from ._pipeline._spine import CallPipeline
    from ._storage import StorageBackend

_STORAGE_OPENING = threading.Lock()
log = logging.getLogger("entropic_mcp")


class ServerManager:
    """Every server of a host, and the one pipeline every call goes through.

    Build one with ``ServerManager.from_config(config)`` (plugins from entry points) or
    ``ServerManager(config, servers=[...])`` (servers given directly, e.g. in tests).
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        plugins: Plugins | None = None,
        servers: Iterable[MCPServerBase] = (),
        storage: StorageBackend | None = None,
    ) -> None:
        self.config = config if config is not None else config_from_dict({}, root=Path.cwd())
        self.plugins = plugins if plugins is not None else Plugins()
        self.servers: dict[str, MCPServerBase] = {}
        self.providers: dict[str, str] = {}
        self.hooks = Hooks(self.plugins, self.providers)
        self.access_keys = AccessKeys({n: i.keys for n, i in self.config.identities.items()})
        self.permissions = PermissionRules(
            self.config.permissions, self.config.local_path, protected=ProtectedPaths.of(self.config)
        )
        self.permission = PermissionStage(self.permissions, self.hooks)
        if storage is not None:  # a store the host hands in goes behind the argument rules too
            from ._storage._checked import checked

            storage = checked(storage)
        self._storage: StorageBackend | None = storage
        self._storage_opened = storage is not None
        self._audit_unavailable = False
        self._assembly = Assembly(self.config, self.plugins)
        self._tool_list: list[dict[str, Any]] | None = None
        self._closed = False
        self.pipeline = self._pipeline()  # the traced one when a tracer provider is set
        self.idempotency = self._idempotency()
        for server in servers:
            self.add_server(server)

    def _pipeline(self) -> CallPipeline:
        config = self.config
        # Guard state goes through the store only when several processes share it (not the
        # embedded tinydb store, not none): one process keeps it in memory, as fast as ever.
        return _tracing.pipeline(
            config.pipeline,
            servers=self.servers,
            hooks=self.hooks,
            permission=self.permission,
            access_keys=self.access_keys,
            audit=self.audit,
            delegation_tool=self.delegation_tool,
            store=(lambda: self.storage) if config.storage.shares_state else None,
            host=self,
        )

    def _idempotency(self) -> Idempotency:
        """Keys' records where guard state is: in the store several workers share, else in memory."""
        from ._pipeline._idempotency import Idempotency

        config = self.config
        return Idempotency(
            (lambda: self.storage) if config.storage.shares_state else None,
            keep_seconds=config.pipeline.idempotency_seconds,
            wait_seconds=config.pipeline.idempotency_wait_seconds,
        )

    # -- building ----------------------------------------------------------------------------

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        plugins: Plugins | None = None,
        load_entry_points: bool = True,
        check_config: bool = True,
    ) -> ServerManager:
        """Load plugins (entry points, one at a time), collect and configure their servers.

        With ``check_config`` (the default), config that names nothing real is an error now,
        not at first use: a ``[servers.<name>]`` table no server reads (a typo), or a
        ``[storage] backend`` no plugin offers. A host that adds its own servers after this
        call, with tables of their own, passes ``check_config=False``.
        """
        if plugins is None:
            plugins = Plugins()
            if load_entry_points:
                plugins.load_entry_points(config.plugins)
        manager = cls(config, plugins=plugins)
        manager.build_servers()
        if check_config:
            manager.check_config()
        return manager

    def check_config(self) -> None:
        """Raise ConfigError for server tables no server reads and an unknown storage backend."""
        self._assembly.check_config(self.servers, storage_given=self._storage_opened)

    def build_servers(self) -> None:
        """Add every plugin's servers (``_assembly.Assembly.build_servers``: a plugin that fails is
        recorded as failed and skipped)."""
        for plugin_name, server in self._assembly.build_servers():
            self.add_server(server, provider=plugin_name)
            self.plugins.note_servers(plugin_name, [server.name])

    def add_server(self, server: MCPServerBase, *, provider: str = "host") -> None:
        if server.name in self.servers:
            raise DuplicateNameError(
                f"server {server.name!r} is already provided by {self.providers[server.name]!r}; "
                f"{provider!r} cannot add another with that name"
            )
        self.servers[server.name] = server
        self.providers[server.name] = provider
        self.invalidate()

    def remove_server(self, name: str) -> MCPServerBase | None:
        server = self.servers.pop(name, None)
        self.providers.pop(name, None)
        self.invalidate()
        return server

    def invalidate(self) -> None:
        """Forget the cached listing, compiled schemas and permission parts (a server changed)."""
        self._tool_list = None
        self.permission.forget()
        self.hooks.reset()
        if hasattr(self, "pipeline"):
            self.pipeline.forget_plans()

    # -- listing and queries ------------------------------------------------------------------

    def list_tools(self) -> list[dict[str, Any]]:
        """One flat list of MCP tool objects named ``<server>.<tool>``; cached."""
        if self._tool_list is None:
            self._tool_list = [
                tool.to_mcp(f"{server.name}.{tool.name}")
                for server in self.servers.values()
                for tool in server.tools.values()
            ]
        return self._tool_list

    def resolve(self, name: str) -> tuple[MCPServerBase, ToolBase] | None:
        server_name, _, tool_name = name.partition(".")
        server = self.servers.get(server_name)
        tool = server.get_tool(tool_name) if server is not None else None
        return None if tool is None else (server, tool)  # type: ignore[return-value]

    def tools_with(self, capability: str) -> list[str]:
        """The tools (``server.tool``) that declare ``capability`` (see ``ToolBase.capabilities``)."""
        return [
            f"{server.name}.{tool.name}"
            for server in self.servers.values()
            for tool in server.tools.values()
            if capability in tool.capabilities
        ]

    def delegation_tool(self) -> str | None:
        """The tool that hands work to another tier, if a plugin provides one."""
        found = self.tools_with("delegate")
        return found[0] if found else None

    def runs_last(self, name: str) -> bool:
        """Whether a batch runs this tool after every other call of the turn."""
        found = self.resolve(name)
        return found is not None and bool(found[1].runs_last)

    def tool_schema(self, name: str) -> Mapping[str, Any] | None:
        found = self.resolve(name)
        return None if found is None else found[1].definition.input_schema

    def access_level(self, name: str) -> AccessLevel:
        found = self.resolve(name)
        return AccessLevel.WRITE if found is None else found[1].required_access_level

    def permission_pattern(self, name: str, args: Mapping[str, Any]) -> str:
        found = self.resolve(name)
        if found is None:
            return name
        try:
            return self.permission.parts(found[0], name.partition(".")[2], dict(args))[1]
        except HookRefusal:
            return name

    def skip_duplicate_check(self, server: MCPServerBase | str, tool: str = "") -> bool:
        if isinstance(server, str):
            name = server
            found = self.resolve(name)
            if found is None:
                return False
            server, tool = found[0], name.partition(".")[2]
        return self.hooks.skip_duplicate_check(server, tool, [])

    # -- hooks, typed (isolated: see _hooks) ------------------------------------------------------

    def approve_outside_root(self, request: OutsideRootRequest) -> bool | None:
        return self.hooks.approve_outside_root(request)

    def directive_processor(self) -> DirectiveProcessor:
        """A processor with every handler the plugins provide (later ones replace earlier ones)."""
        return self.hooks.directive_processor()

    # -- storage -----------------------------------------------------------------------------------

    @property
    def storage(self) -> StorageBackend | None:
        """The configured storage backend, opened on first use; None when ``backend = "none"``."""
        if not self._storage_opened:
            # Concurrent calls (a batch) must not see "no storage" while another opens it, and a
            # store that failed to open must keep failing loudly, not turn into "none".
            with _STORAGE_OPENING:
                if not self._storage_opened:
                    from ._storage import open_storage

                    self._storage = open_storage(self.config, self.plugins)
                    self._storage_opened = True
        return self._storage

    @property
    def storage_is_open(self) -> bool:
        """Whether the configured store has been opened (or was given); ``storage`` opens it."""
        return self._storage_opened

    def audit(self, outcome: CallOutcome) -> None:
        """Write the outcome whole to the audit trail of the configured store (opened on first use)."""
        if self._storage_opened:
            storage = self._storage
        elif self._audit_unavailable or self.config.storage.backend == "none":
            return
        else:
            try:
                storage = self.storage
            except BaseException as exc:  # the tools that need storage report it; the audit only warns once
                reraise_host_stop(exc)
                self._audit_unavailable = True
                log.warning("no audit trail: the store could not be opened: %s", exc)
                return
        if storage is not None:
            try:
                from ._storage._records import ToolCallRecord

                storage.record_tool_call(ToolCallRecord.from_outcome(outcome))
            except BaseException as exc:  # a backend's SystemExit must not stop the host either
                reraise_host_stop(exc)
                log.warning("could not record %s in the audit trail", outcome.name, exc_info=True)

    # -- calls ---------------------------------------------------------------------------------------

    async def call(self, name: str, args: object = None, ctx: CallContext | None = None) -> CallOutcome:
        """Run one call through the whole pipeline (once per ``ctx.idempotency_key``, when it has one)."""
        ctx = ctx if ctx is not None else CallContext()
        if ctx.idempotency_key is None:
            return await self.pipeline.run(name, args, ctx)
        return await self.idempotency.run(self.pipeline.run, name, args, ctx)

    async def execute(self, name: str, args: object = None, ctx: CallContext | None = None) -> ServerResponse:
        return (await self.call(name, args, ctx)).response

    def call_sync(self, name: str, args: object = None, ctx: CallContext | None = None) -> CallOutcome:
        """``call`` for synchronous hosts (runs its own event loop)."""
        import anyio

        return anyio.run(self.call, name, args, ctx)

    async def execute_batch(self, calls: Sequence[tuple[str, object]], ctx: CallContext | None = None) -> BatchOutcome:
        """A model turn: READ tools side by side, tools that run last at the end, stop on stop directives."""
        from ._pipeline._batch import run_batch

        return await run_batch(self, calls, ctx if ctx is not None else CallContext())

    # -- lifecycle -------------------------------------------------------------------------------------

    def set_working_dir(self, path: str | Path) -> bool:
        """Re-root every directory-aware server; False if ``path`` is not a directory."""
        if not Path(path).is_dir():
            return False
        return all([server.set_working_dir(path) for server in self.servers.values()])

    def end_conversation(self, conversation_id: str, *, servers: Iterable[str] | None = None) -> None:
        """The conversation is over: release what the pipeline and the servers keep for it.

        With ``servers``, only those servers release their state (the pipeline's is kept).
        A server failing to release is logged; the others still release theirs.
        """
        if servers is None:
            self.pipeline.end_conversation(conversation_id)
        ctx = CallContext(conversation_id=conversation_id, manager=self)
        for name, server in self.servers.items():
            if servers is not None and name not in servers:
                continue
            try:
                server.conversation_ended(ctx)
            except BaseException as exc:
                reraise_host_stop(exc)
                log.warning("server %s failed to end conversation %r", server.name, conversation_id, exc_info=True)

    def close(self) -> None:
        """Close every server, then storage; idempotent."""
        if self._closed:
            return
        self._closed = True
        for server in reversed(list(self.servers.values())):
            try:
                server.close()
            except BaseException as exc:
                reraise_host_stop(exc)
                log.warning("server %s failed to close", server.name, exc_info=True)
        if self._storage is not None:
            try:
                self._storage.close()
            except BaseException as exc:
                reraise_host_stop(exc)
                log.warning("storage failed to close", exc_info=True)

    def __enter__(self) -> ServerManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
