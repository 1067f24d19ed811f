"""ServerManager: owns every server, answers the pipeline's queries, runs calls."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._access import AccessLevel
from ._calls import ApprovalDecision, ApprovalRequest, OutsideRootRequest, Refuse, ReplaceArgs, ToolCall
from ._config import Config, PluginConfig, config_from_dict
from ._context import CallContext
from ._directives import DirectiveHandlerSpec, DirectiveProcessor
from ._envelope import ServerResponse
from ._errors import ConfigError, DuplicateNameError, PluginError
from ._keys import AccessKeys
from ._permissions import PermissionPart, PermissionRules
from ._pipeline import DEFERRED, BatchOutcome, CallOutcome, Pipeline, approval_from, stops_batch
from ._plugins import Plugins
from ._schema import SchemaValidator
from ._server import MCPServerBase
from ._tools import ToolBase

if TYPE_CHECKING:
    from ._storage import StorageBackend

_STORAGE_OPENING = threading.Lock()
log = logging.getLogger("entropic_mcp")


def _as_list(value: object) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        return [value]
    return list(value)


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
        self.access_keys = AccessKeys({n: i.keys for n, i in self.config.identities.items()})
        self.permissions = PermissionRules(self.config.permissions, self.config.local_path)
        self._storage = storage
        self._storage_opened = storage is not None
        self._audit_unavailable = False
        self._validators: dict[str, SchemaValidator] = {}
        self._parts: dict[str, list[PermissionPart]] = {}
        self._tool_list: list[dict[str, Any]] | None = None
        self._closed = False
        self._refresh_hook_flags()
        self.pipeline = Pipeline(self)
        for server in servers:
            self.add_server(server)

    # -- building ----------------------------------------------------------------------------

    @classmethod
    def from_config(
        cls, config: Config, *, plugins: Plugins | None = None, load_entry_points: bool = True
    ) -> ServerManager:
        """Load plugins (entry points, one at a time), collect and configure their servers."""
        if plugins is None:
            plugins = Plugins()
            if load_entry_points:
                plugins.load_entry_points(config.plugins)
        manager = cls(config, plugins=plugins)
        manager.build_servers()
        return manager

    def build_servers(self) -> None:
        """Ask every plugin for its servers; a plugin that raises is recorded and skipped."""
        plugin_config = PluginConfig(root=self.config.root, settings=self.config)
        found: dict[str, list[tuple[str, MCPServerBase]]] = {}
        for plugin_name, function in self.plugins.implementations("entropic_mcp_servers"):
            try:
                results = _as_list(function(config=plugin_config))
                bad = [r for r in results if not isinstance(r, MCPServerBase)]
                if bad:
                    raise TypeError(
                        f"entropic_mcp_servers returned {type(bad[0]).__name__}, expected MCPServerBase instances"
                    )
                for server in results:
                    server.configure(self.config.server_table(server.name))
            except ConfigError:
                raise
            except Exception as exc:
                self.plugins.fail(plugin_name, f"entropic_mcp_servers raised {type(exc).__name__}: {exc}")
                continue
            for server in results:
                found.setdefault(server.name, []).append((plugin_name, server))
        conflicts = {name: entries for name, entries in found.items() if len(entries) > 1}
        if conflicts:
            lines = [
                f"server {name!r} is provided by: "
                + ", ".join(
                    f"{p} ({self.plugins.infos[p].distribution or 'in-process'})" if p in self.plugins.infos else p
                    for p, _ in entries
                )
                for name, entries in sorted(conflicts.items())
            ]
            raise PluginError(
                "two plugins register the same server name — "
                + "; ".join(lines)
                + ". Uninstall one, or block it with ENTROPIC_MCP_DISABLED_PLUGINS or [entropic_mcp] plugins."
            )
        order = {name: i for i, name in enumerate(self.config.plugins or ())}
        for name in sorted(found, key=lambda n: (order.get(n, len(order)), n)):
            plugin_name, server = found[name][0]
            self.add_server(server, provider=plugin_name)
            self.plugins.note_servers(plugin_name, [name])

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
        """Forget the cached listing and compiled schemas (a server changed)."""
        self._tool_list = None
        self._validators.clear()
        self._refresh_hook_flags()

    def _refresh_hook_flags(self) -> None:
        def implemented(hook: str, *, beyond_builtins: bool = False) -> bool:
            impls = getattr(self.plugins.hook, hook).get_hookimpls()
            if beyond_builtins:
                impls = [
                    i
                    for i in impls
                    if not (self.plugins.infos.get(i.plugin_name) and self.plugins.infos[i.plugin_name].builtin)
                ]
            return bool(impls)

        self.has_before_hooks = implemented("entropic_mcp_before_tool_call")
        self.has_after_hooks = implemented("entropic_mcp_after_tool_call")
        self.has_pattern_hooks = implemented("entropic_mcp_permission_pattern", beyond_builtins=True)
        self.has_duplicate_hooks = implemented("entropic_mcp_skip_duplicate_check", beyond_builtins=True)

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

    def tool_schema(self, name: str) -> Mapping[str, Any] | None:
        found = self.resolve(name)
        return None if found is None else found[1].definition.input_schema

    def access_level(self, name: str) -> AccessLevel:
        found = self.resolve(name)
        return AccessLevel.WRITE if found is None else found[1].required_access_level

    def validator(self, name: str, tool: ToolBase) -> SchemaValidator:
        validator = self._validators.get(name)
        if validator is None:
            validator = self._validators[name] = SchemaValidator(tool.definition.input_schema)
        return validator

    def permission_pattern(self, name: str, args: Mapping[str, Any]) -> str:
        found = self.resolve(name)
        if found is None:
            return name
        return self.permission_parts(found[0], name.partition(".")[2], dict(args))[1]

    def permission_parts(
        self, server: MCPServerBase, tool: str, args: dict[str, Any]
    ) -> tuple[list[PermissionPart], str]:
        """The parts rules are matched against, and the call's pattern (hook first, then the server)."""
        full = f"{server.name}.{tool}"
        if self.has_pattern_hooks:
            pattern = self.plugins.hook.entropic_mcp_permission_pattern(server=server, tool=tool, args=args)
            if isinstance(pattern, str) and pattern:
                return [PermissionPart(names=(full, pattern), store=pattern)], pattern
        parts_of = getattr(server, "permission_parts", None)
        if parts_of is not None:
            parts = list(parts_of(tool, args))
            return parts, parts[0].store if parts else full
        pattern = server.permission_pattern(tool, args)
        cached = self._parts.get(pattern)
        if cached is None:
            if len(self._parts) > 4096:
                self._parts.clear()
            names = (full,) if pattern == full else (full, pattern)
            cached = self._parts[pattern] = [PermissionPart(names=names, store=pattern)]
        return cached, pattern

    def skip_duplicate_check(self, server: MCPServerBase | str, tool: str = "") -> bool:
        if isinstance(server, str):
            name = server
            found = self.resolve(name)
            if found is None:
                return False
            server, tool = found[0], name.partition(".")[2]
        if self.has_duplicate_hooks:
            answer = self.plugins.hook.entropic_mcp_skip_duplicate_check(server=server, tool=tool)
            if isinstance(answer, bool):
                return answer
        return bool(server.skip_duplicate_check(tool))

    # -- hooks, typed -----------------------------------------------------------------------------

    def before_tool_call(self, call: ToolCall) -> tuple[object, str | None]:
        args: object = call.args
        for value in self.plugins.hook.entropic_mcp_before_tool_call(call=call):
            if isinstance(value, Refuse):
                return args, value.reason
            if isinstance(value, ReplaceArgs):
                args = dict(value.args)
            elif value is not None:
                log.warning("entropic_mcp_before_tool_call returned %r for %s; ignored", value, call.name)
        return args, None

    def after_tool_call(self, call: ToolCall, outcome: CallOutcome) -> str | None:
        text = None
        for value in self.plugins.hook.entropic_mcp_after_tool_call(call=call, outcome=outcome):
            if isinstance(value, str):
                text = value
        return text

    async def approve_tool_call(self, request: ApprovalRequest) -> ApprovalDecision | None:
        for _, function in self.plugins.implementations("entropic_mcp_approve_tool_call"):
            try:
                value = function(request=request)
                if inspect.isawaitable(value):
                    value = await value
            except Exception:
                log.warning("an approver raised; treated as no answer", exc_info=True)
                continue
            decision = approval_from(value)
            if decision is not None:
                return decision
        return None

    def approve_outside_root(self, request: OutsideRootRequest) -> bool | None:
        try:
            answer = self.plugins.hook.entropic_mcp_approve_outside_root(request=request)
        except Exception:
            log.warning("an outside-root approver raised; treated as no answer", exc_info=True)
            return None
        return answer if isinstance(answer, bool) else None

    def directive_processor(self) -> DirectiveProcessor:
        """A processor with every handler the plugins provide (later ones replace earlier ones)."""
        processor = DirectiveProcessor()
        for value in self.plugins.hook.entropic_mcp_directive_handlers():
            for spec in _as_list(value):
                if isinstance(spec, DirectiveHandlerSpec):
                    processor.register(spec.type, spec.handler)
        return processor

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

    def audit(self, outcome: CallOutcome) -> None:
        """Write the outcome whole to the audit trail of the configured store (opened on first use)."""
        if self._storage_opened:
            storage = self._storage
        elif self._audit_unavailable or self.config.storage.backend == "none":
            return
        else:
            try:
                storage = self.storage
            except Exception as exc:  # the tools that need storage report it; the audit only warns once
                self._audit_unavailable = True
                log.warning("no audit trail: the store could not be opened: %s", exc)
                return
        if storage is not None:
            try:
                storage.record_tool_call(outcome)
            except Exception:
                log.warning("could not record %s in the audit trail", outcome.name, exc_info=True)

    # -- calls ---------------------------------------------------------------------------------------

    async def call(self, name: str, args: object = None, ctx: CallContext | None = None) -> CallOutcome:
        """Run one call through the whole pipeline."""
        return await self.pipeline.run(name, args, ctx if ctx is not None else CallContext())

    async def execute(self, name: str, args: object = None, ctx: CallContext | None = None) -> ServerResponse:
        return (await self.call(name, args, ctx)).response

    def call_sync(self, name: str, args: object = None, ctx: CallContext | None = None) -> CallOutcome:
        """``call`` for synchronous hosts (runs its own event loop)."""
        import anyio

        return anyio.run(self.call, name, args, ctx)

    async def execute_batch(self, calls: Sequence[tuple[str, object]], ctx: CallContext | None = None) -> BatchOutcome:
        """A model turn: READ tools side by side, delegation last, stop on stop directives."""
        import anyio

        ctx = ctx if ctx is not None else CallContext()
        limit = self.config.pipeline.max_tool_calls_per_turn
        ordered = [c for c in calls if c[0] not in DEFERRED] + [c for c in calls if c[0] in DEFERRED]
        ordered, surplus = ordered[:limit], tuple(name for name, _ in ordered[limit:])
        stop_after = self.config.pipeline.duplicate_stop_after
        outcomes: list[CallOutcome] = []
        i = 0
        while i < len(ordered):
            group = [ordered[i]]
            if self._concurrent(ordered[i][0]):
                while i + len(group) < len(ordered) and self._concurrent(ordered[i + len(group)][0]):
                    group.append(ordered[i + len(group)])
            results: list[CallOutcome | None] = [None] * len(group)

            async def run(index: int, name: str, args: object, results: list[CallOutcome | None] = results) -> None:
                child = CallContext(
                    conversation_id=ctx.conversation_id,
                    identity=ctx.identity,
                    iteration=ctx.iteration,
                    progress=ctx.progress,
                    meta=ctx.meta,
                )
                results[index] = await self.call(name, args, child)

            if len(group) == 1:
                await run(0, *group[0])
            else:
                async with anyio.create_task_group() as tg:
                    for index, (name, args) in enumerate(group):
                        tg.start_soon(run, index, name, args)
            i += len(group)
            for outcome in results:
                assert outcome is not None
                outcomes.append(outcome)
                stopped = stops_batch(outcome, stop_after)
                if stopped:
                    rest = tuple(name for name, _ in ordered[i:])
                    return BatchOutcome(outcomes=tuple(outcomes), surplus=rest + surplus, stopped=stopped)
        return BatchOutcome(outcomes=tuple(outcomes), surplus=surplus)

    def _concurrent(self, name: str) -> bool:
        found = self.resolve(name)
        return found is not None and found[1].required_access_level <= AccessLevel.READ

    # -- lifecycle -------------------------------------------------------------------------------------

    def set_working_dir(self, path: str | Path) -> bool:
        """Re-root every directory-aware server; False if ``path`` is not a directory."""
        if not Path(path).is_dir():
            return False
        return all([server.set_working_dir(path) for server in self.servers.values()])

    def end_conversation(self, conversation_id: str) -> None:
        self.pipeline.end_conversation(conversation_id)
        for server in self.servers.values():
            server.end_conversation(conversation_id)

    def close(self) -> None:
        """Close every server, then storage; idempotent."""
        if self._closed:
            return
        self._closed = True
        for server in reversed(list(self.servers.values())):
            try:
                server.close()
            except Exception:
                log.warning("server %s failed to close", server.name, exc_info=True)
        if self._storage is not None:
            try:
                self._storage.close()
            except Exception:
                log.warning("storage failed to close", exc_info=True)

    def __enter__(self) -> ServerManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
