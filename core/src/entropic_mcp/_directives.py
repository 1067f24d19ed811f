"""Directives: what a tool asks the host to do, each carrying its payload on the wire."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import attrs

log = logging.getLogger("entropic_mcp")


def _tuple_of_dicts(value: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(dict(v) for v in value)


@attrs.frozen(kw_only=True)
class Directive:
    """Base of every directive; ``type`` is the wire name."""

    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        for field in attrs.fields(type(self)):
            value = getattr(self, field.name)
            data[field.name] = list(value) if isinstance(value, tuple) else value
        return data


@attrs.frozen(kw_only=True)
class StopProcessing(Directive):
    type: ClassVar[str] = "stop_processing"


@attrs.frozen(kw_only=True)
class TierChange(Directive):
    type: ClassVar[str] = "tier_change"
    tier: str
    reason: str = ""


@attrs.frozen(kw_only=True)
class Delegate(Directive):
    type: ClassVar[str] = "delegate"
    target: str
    task: str
    max_turns: int = -1
    context: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=_tuple_of_dicts)
    resume_from: str = ""


@attrs.frozen(kw_only=True)
class Pipeline(Directive):
    type: ClassVar[str] = "pipeline"
    stages: tuple[str, ...] = attrs.field(converter=tuple)
    task: str
    context: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=_tuple_of_dicts)


@attrs.frozen(kw_only=True)
class Complete(Directive):
    type: ClassVar[str] = "complete"
    summary: str
    coverage_gap: bool = False
    gap_description: str = ""
    suggested_files: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen(kw_only=True)
class ClearSelfTodos(Directive):
    type: ClassVar[str] = "clear_self_todos"


@attrs.frozen(kw_only=True)
class InjectContext(Directive):
    type: ClassVar[str] = "inject_context"
    content: str
    role: str = "user"


@attrs.frozen(kw_only=True)
class PruneMessages(Directive):
    type: ClassVar[str] = "prune_messages"
    keep_recent: int = 2


@attrs.frozen(kw_only=True)
class ContextAnchor(Directive):
    type: ClassVar[str] = "context_anchor"
    key: str
    content: str = ""


@attrs.frozen(kw_only=True)
class PhaseChange(Directive):
    type: ClassVar[str] = "phase_change"
    phase: str


@attrs.frozen(kw_only=True)
class NotifyPresenter(Directive):
    type: ClassVar[str] = "notify_presenter"
    key: str
    data: Any = None


@attrs.frozen(kw_only=True)
class UnknownDirective(Directive):
    """A directive whose wire name this version does not know: passed through, never dropped."""

    name: str
    fields: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**self.fields, "type": self.name}


DIRECTIVE_TYPES: dict[str, type[Directive]] = {
    cls.type: cls
    for cls in (
        StopProcessing,
        TierChange,
        Delegate,
        Pipeline,
        Complete,
        ClearSelfTodos,
        InjectContext,
        PruneMessages,
        ContextAnchor,
        PhaseChange,
        NotifyPresenter,
    )
}


def directive_type(directive: Directive) -> str:
    return directive.name if isinstance(directive, UnknownDirective) else directive.type


def directive_from_dict(data: Mapping[str, Any]) -> Directive:
    """Build a directive from its wire form; unknown or malformed ones become UnknownDirective."""
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise ValueError(f"a directive must be an object with a string 'type', got {data!r}")
    name = data["type"]
    fields = {k: v for k, v in data.items() if k != "type"}
    cls = DIRECTIVE_TYPES.get(name)
    if cls is not None:
        try:
            return cls(**fields)
        except (TypeError, ValueError):
            log.warning("directive %r has unexpected fields %r; passed through as unknown", name, fields)
    return UnknownDirective(name=name, fields=fields)


def coerce_directive(value: object) -> Directive:
    if isinstance(value, Directive):
        return value
    if isinstance(value, Mapping):
        return directive_from_dict(value)
    raise TypeError(f"expected a Directive or a mapping, got {type(value).__name__}")


Handler = Callable[[Directive, Any], Any]


@attrs.frozen(kw_only=True)
class DirectiveHandlerSpec:
    """A host-side handler for one directive type (yielded by ``entropic_mcp_directive_handlers``)."""

    type: str
    handler: Handler


@attrs.frozen(kw_only=True)
class ProcessingResult:
    """What a DirectiveProcessor did with one batch of directives."""

    handled: tuple[tuple[str, Any], ...] = ()
    unhandled: tuple[Directive, ...] = ()
    stopped: bool = False


@attrs.define
class DirectiveProcessor:
    """Dispatch directives to host handlers by type; stop at ``stop_processing``.

    Directives without a handler are returned in ``unhandled`` so the host sees them.
    """

    handlers: dict[str, Handler] = attrs.field(factory=dict)

    def register(self, directive_type: str, handler: Handler) -> None:
        self.handlers[directive_type] = handler

    def process(self, directives: Iterable[Directive], context: Any = None) -> ProcessingResult:
        handled: list[tuple[str, Any]] = []
        unhandled: list[Directive] = []
        for directive in directives:
            name = directive_type(directive)
            if name == StopProcessing.type:
                handler = self.handlers.get(name)
                if handler is not None:
                    handled.append((name, handler(directive, context)))
                return ProcessingResult(handled=tuple(handled), unhandled=tuple(unhandled), stopped=True)
            handler = self.handlers.get(name)
            if handler is None:
                unhandled.append(directive)
            else:
                handled.append((name, handler(directive, context)))
        return ProcessingResult(handled=tuple(handled), unhandled=tuple(unhandled), stopped=False)
