"""CallContext: what the pipeline and a tool know about the caller."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from ._protocols import Host
    from ._services import ToolServices

DEFAULT_CONVERSATION = "default"
#: ToolServices, imported on the first ``ctx.services`` (most calls never ask) and kept: an import
#: statement run on every call cost 3 µs of the 3.3 µs ``ctx.services`` took.
_SERVICES: type[ToolServices] | None = None
_CREATE_LOCK = threading.Lock()

ProgressReporter = Callable[[float, "float | None", "str | None"], None]


@attrs.define(kw_only=True)
class CallContext:
    """Per-call facts: conversation (state is kept per conversation), identity, deadline.

    ``cancelled`` is set when the call is cancelled or its deadline passes, so synchronous
    tools running in a worker thread can stop; ``partial`` may be set by a tool to the output
    it has so far, returned if the call times out.
    """

    conversation_id: str = DEFAULT_CONVERSATION
    identity: str | None = None
    #: The person behind the call: the OAuth token's subject (``serve`` with ``[auth]``), else None.
    subject: str | None = None
    #: The storage scope (tenant) of the caller's conversations when the store holds none named
    #: ``conversation_id`` (``serve`` with ``[auth]``: ``sub:<subject>`` or ``tenant:<tenant>``).
    scope: str | None = None
    iteration: int = 0
    deadline: float | None = None
    progress: ProgressReporter | None = None
    #: The manager running the call (set by the pipeline). Core-internal: tools use ``services``;
    #: ``CallContext(manager=...)`` still builds one with a host.
    _host: Host | None = attrs.field(default=None, repr=False, alias="manager")
    _cancelled: threading.Event | None = attrs.field(default=None, repr=False, alias="cancelled")
    partial: str | None = attrs.field(default=None, repr=False)
    #: The running tool's ``result_budget_bytes``, set by the pipeline before it runs the tool.
    result_budget: int | None = attrs.field(default=None, repr=False)
    meta: dict[str, Any] = attrs.field(factory=dict, repr=False)
    #: The caller's name for this call (``serve``: ``_meta["entropic-mcp/idempotency-key"]``): a
    #: retry with the same key, tool and arguments gets the first call's outcome, not a second run.
    idempotency_key: str | None = attrs.field(default=None, repr=False)
    #: The caller takes an MCP task handle for a long call (``serve``: the client declared the
    #: ``io.modelcontextprotocol/tasks`` extension): a tool that starts long work may follow it to
    #: its end and answer its outcome, rather than answer at once with a handle of its own.
    as_task: bool = attrs.field(default=False, repr=False)
    #: Set by the pipeline once the arguments passed the tool's schema, before the tool runs: a
    #: server's ``execute`` then trusts them; a call without the pipeline is checked there.
    validated: bool = attrs.field(default=False, repr=False)
    #: How the caller names tools (``serve`` with ``tool_names = "underscored"``): messages use it.
    tool_names: Callable[[str], str] | None = attrs.field(default=None, repr=False)
    #: (the argument dict judged, what the server's ``permission_parts`` prepared for it): set by
    #: the permission stage, read through ``prepared_for``. One slot for both keeps the call's cost.
    _prepared: tuple[object, Any] | None = attrs.field(default=None, repr=False, init=False)

    @property
    def services(self) -> ToolServices:
        """The host's services for this call (settings, storage, limits, approvals, introspection)."""
        return (_SERVICES or _services_type())(self._host, self)

    @property
    def manager(self) -> Host | None:
        """Deprecated (removed in the next release): the manager running the call.

        Use ``ctx.services``; the manager is the core's internals and changes between versions.
        """
        warnings.warn(
            "CallContext.manager is deprecated and will be removed in the next release; use ctx.services",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._host

    @manager.setter
    def manager(self, value: Host | None) -> None:
        warnings.warn(
            "setting CallContext.manager is deprecated; pass manager= to CallContext() or let the pipeline set it",
            DeprecationWarning,
            stacklevel=2,
        )
        self._host = value

    @property
    def prepared(self) -> Any:
        """What the server's ``permission_parts`` found for this call (``PreparedParts.prepared``), or None.

        Set by the permission stage before the tool runs; None when the server prepared nothing
        or the call did not go through the pipeline. A tool should ask ``prepared_for(args)``,
        which also checks that it was prepared for these very arguments.
        """
        kept = self._prepared
        return None if kept is None else kept[1]

    def prepared_for(self, args: object) -> Any:
        """``prepared`` when the permission stage judged exactly ``args`` (the same dict), else None.

        A tool that uses what its permission check found (a canonical path, an environment)
        uses what was judged rather than working it out again, so nothing can change in between;
        a context reused for another call, or a call made without the pipeline, gets None and
        works it out itself.
        """
        kept = self._prepared
        return kept[1] if kept is not None and kept[0] is args else None

    def display(self, name: str) -> str:
        """``name`` (``server.tool``) as the caller knows it."""
        return name if self.tool_names is None else self.tool_names(name)

    @property
    def cancelled(self) -> threading.Event:
        """Set when the call is cancelled or times out (created on first use: most calls never ask)."""
        event = self._cancelled
        if event is None:
            with _CREATE_LOCK:
                event = self._cancelled
                if event is None:
                    event = self._cancelled = threading.Event()
        return event

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None when there is none)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress is not None:
            self.progress(progress, total, message)


def host_of(ctx: object) -> Host | None:
    """The manager behind a CallContext or DirectiveContext (None without one): core-internal."""
    if isinstance(ctx, CallContext):
        return ctx._host
    return getattr(ctx, "manager", None)


def bind_host(ctx: CallContext, manager: Host | None) -> None:
    """Set the manager running ``ctx``'s call (the pipeline does, before any stage): core-internal."""
    ctx._host = manager


def set_prepared(ctx: CallContext, args: object, prepared: Any) -> None:
    """Hand the tool what the permission stage found for ``args`` (None: nothing): core-internal."""
    ctx._prepared = None if prepared is None else (args, prepared)


def _services_type() -> type[ToolServices]:
    global _SERVICES
    from ._services import ToolServices

    _SERVICES = ToolServices
    return ToolServices
