"""What a tool may use of its host: ``ctx.services``, a narrow view instead of the whole manager."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._definitions import result_cap
from ._errors import ConfigError, StorageError, ToolError
from ._storage import StateStore

if TYPE_CHECKING:
    from ._access import AccessLevel
    from ._config import Config
    from ._outside import OutsideRootRequest
    from ._protocols import CallFacts, Host, ServerView, ToolView
    from ._storage import StorageBackend


class ToolServices:
    """The host's services for one call: settings, storage, limits, approvals, introspection.

    Tools get it as ``ctx.services``. Everything here works whether the server runs under
    ``entropic-mcp serve``, in a host process, or bare in a test (then with defaults: no
    storage, no approver, no limit). Reaching into ``ctx.manager`` instead ties a plugin to
    the core's internals, which change between versions.

    Args:
        manager: the manager running the call, or None for a server used bare.
        ctx: the call's context (its conversation scopes introspection).
    """

    def __init__(self, manager: Host | None, ctx: CallFacts) -> None:
        self._manager = manager
        self._ctx = ctx

    # -- configuration ---------------------------------------------------------------------------

    @property
    def hosted(self) -> bool:
        """True when a host (a manager) runs the call; False for a server used bare."""
        return self._manager is not None

    @property
    def config(self) -> Config | None:
        """The host's loaded configuration, read-only (None for a server used bare)."""
        return None if self._manager is None else self._manager.config

    def access_keys(self, identity: str) -> dict[str, AccessLevel] | None:
        """An identity's access keys (plugin -> level), or None when it has no key set."""
        return None if self._manager is None else self._manager.access_keys.keys(identity)

    @property
    def root(self) -> Path | None:
        """The project root of the host's config (None for a server used bare)."""
        return None if self._manager is None else self._manager.config.root

    def settings(self, server: str) -> Mapping[str, Any]:
        """The ``[servers.<server>]`` table as the user wrote it (empty when there is none)."""
        return {} if self._manager is None else self._manager.config.server_table(server)

    @property
    def result_limit(self) -> int:
        """``[pipeline] max_result_bytes``, or the tool's own larger ``result_budget_bytes``: the
        pipeline cuts longer results (0: no limit)."""
        if self._manager is None:
            return 0
        return result_cap(self._manager.config.pipeline.max_result_bytes, self._ctx.result_budget)

    # -- storage and approvals ------------------------------------------------------------------------

    @property
    def storage(self) -> StorageBackend | None:
        """The configured store, opened on first use; None without one (``backend = "none"``).

        Raises:
            StorageError: the store exists but cannot be opened (say so to the model).
        """
        return None if self._manager is None else self._manager.storage

    def state_store(
        self,
        what: str,
        *,
        shared_only: bool = False,
        then: str = "Nothing was changed; fix [storage] in entropic-mcp.toml, then try again.",
    ) -> StateStore | None:
        """The store to keep a plugin's per-conversation state in (``update_document`` changes
        it); None: keep it in this process's memory.

        None without a host, without a store (``backend = "none"``) or when the backend is no
        ``StateStore``. ``shared_only``: None also unless several processes share the state
        (``StorageConfig.shares_state``), decided before the store is touched — state that must
        only agree between workers then costs nothing more than the configuration's look.

        Args:
            what: the state, for the model (``"the todo list"``).
            shared_only: use the store only when it is shared between processes.
            then: the message's end: what did not happen and what to do.

        Raises:
            ToolError: ``storage_unavailable``, a store is configured but cannot be opened.
        """
        manager = self._manager
        if manager is None or (shared_only and not manager.config.storage.shares_state):
            return None
        try:
            storage = manager.storage
        except (ConfigError, StorageError) as exc:
            raise ToolError(
                "storage_unavailable", f"{what} lives in the store, which could not be opened: {exc}. {then}"
            ) from None
        # ``is None`` first: the runtime-checkable Protocol's isinstance walks its members (~8 us a call).
        return None if storage is None or not isinstance(storage, StateStore) else storage

    @property
    def storage_if_open(self) -> StorageBackend | None:
        """The configured store if something has opened it already, else None — for clean-up
        (a conversation ending), which must not open a store, or create one, to find nothing."""
        manager = self._manager
        return manager.storage if manager is not None and manager.storage_is_open else None

    def approve_outside_root(self, request: OutsideRootRequest) -> bool | None:
        """Ask the host's approvers about one path outside the root (None: nobody answered)."""
        return None if self._manager is None else self._manager.approve_outside_root(request)

    def path_refused(self, access: Literal["read", "write"], path: str, *, also: Iterable[str] = ()) -> str | None:
        """The deny or ask rule matching one file a walking tool would open (None: not refused)."""
        if self._manager is None:
            return None
        return self._manager.permissions.path_refused(access, path, also=also)

    def write_refused(self, path: str, *, also: Iterable[str] = ()) -> str | None:
        """Why a tool must not change one file without asking, or None.

        The deny or ask rule matching a write of ``path``; ``"a protected policy file"`` for
        entropic-mcp's own policy files — by name, and the files the host actually loaded
        whatever their names (only an allow rule naming the file opens them); ``"entropic-mcp's
        store or data directory"`` inside those. Also without a host: a bare server still
        protects the policy files by name.
        """
        from ._pipeline._rules import REFUSALS, path_part

        part = path_part("write", path, also=also, neutral=True)
        if self._manager is None:
            return REFUSALS["protected"] if part.protected else None
        verdict = self._manager.permissions.verdict(part, read_only=False)
        if verdict.decision == "deny" and verdict.kind in REFUSALS:
            return REFUSALS[verdict.kind]
        if verdict.decision in ("deny", "ask") and verdict.rule is not None:
            return verdict.rule
        return None

    @property
    def private_dirs(self) -> tuple[Path, ...]:
        """Directories no tool may read or write (the store, entropic-mcp's per-user data), for
        a tool that walks a tree without asking about every entry. Empty without a host."""
        if self._manager is None:
            return ()
        protected = self._manager.permissions.protected
        return () if protected is None else protected.private

    def rules(self, kind: Literal["allow", "ask", "deny"]) -> tuple[str, ...]:
        """The host's current rules of one kind, for a tool that screens many paths at once
        (e.g. to skip per-file checks when no rule can match). Empty without a host."""
        if self._manager is None:
            return ()
        return tuple(self._manager.permissions.lists.get(kind, ()))

    def call_hook(self, hook: str, **kwargs: Any) -> list[Any]:
        """Every non-None answer to a hook a plugin declared (``entropic_mcp_add_hookspecs``).

        An implementation that raises is skipped and logged, like every hook of the core.
        """
        return [] if self._manager is None else self._manager.hooks.declared_answers(hook, kwargs)

    def first_answer(self, hook: str, arguments: Mapping[str, Any]) -> Any:
        """The first non-None answer to a hook a plugin declared, in pluggy's call order.

        Unlike ``call_hook``, an implementation that raises is not skipped: its exception
        propagates (with the plugin named in a note), so the caller can say why there is no
        answer. None when nobody implements the hook or every answer is None.
        """
        return None if self._manager is None else self._manager.hooks.first_answer(hook, arguments)

    # -- introspection (the caller's own conversation only) ----------------------------------------------

    def history(self) -> list[dict[str, Any]]:
        """This conversation's recent calls, argument names only."""
        return [] if self._manager is None else self._manager.pipeline.history_of(self._ctx.conversation_id)

    def metrics(self) -> dict[str, dict[str, int]]:
        """Per tool, how this conversation's recent calls ended (counts by result kind)."""
        return {} if self._manager is None else self._manager.pipeline.metrics_of(self._ctx.conversation_id)

    def tools(self) -> list[dict[str, Any]]:
        """Every tool of the host, as MCP tool objects named ``<server>.<tool>``."""
        return [] if self._manager is None else list(self._manager.list_tools())

    def servers(self) -> list[tuple[str, str]]:
        """(server name, providing plugin) for every server of the host."""
        if self._manager is None:
            return []
        return [(name, self._manager.providers.get(name, "host")) for name in self._manager.servers]

    def server_objects(self) -> list[tuple[ServerView, str]]:
        """(server, providing plugin) for every server of the host (empty without one)."""
        manager = self._manager
        if manager is None:
            return []
        return [(server, manager.providers.get(name, "host")) for name, server in manager.servers.items()]

    def resolve(self, name: str) -> tuple[ServerView, ToolView] | None:
        """The (server, tool) a ``server.tool`` name calls, or None (also without a host)."""
        return None if self._manager is None else self._manager.resolve(name)

    def skip_duplicate_check(self, server: ServerView, tool: str) -> bool:
        """Whether the pipeline lets this tool repeat an identical call (False without a host)."""
        return False if self._manager is None else self._manager.skip_duplicate_check(server, tool)
