"""Default host-side handlers for ``delegate``, ``pipeline`` and ``complete``.

Registered as the built-in plugin ``builtin-delegation`` (``entropic_mcp_directive_handlers``),
so ``ServerManager.directive_processor()`` gives a host working delegation records without
writing any. The handlers create and finish the records; running the child conversation is the
host's job (``entropic_mcp.host`` is a reference loop that does it).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ._directives import Complete, Delegate, DirectiveHandlerSpec, Pipeline
from ._errors import StorageError

if TYPE_CHECKING:
    from ._protocols import Host
    from ._storage import StorageBackend

STATUSES = ("completed", "failed")


def _strings(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


def _dicts(value: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(dict(item) for item in value)


@attrs.define(kw_only=True)
class DirectiveContext:
    """What the default handlers need to know about the conversation the directives came from.

    ``storage`` defaults to ``manager.storage``; ``delegation_id`` is set when the conversation
    is itself a delegation's child (its ``complete`` then finishes that record). A
    ``CallContext`` works too (``delegation_id`` is read from ``meta``).
    """

    conversation_id: str
    identity: str | None = None
    delegation_id: str | None = None
    storage: StorageBackend | None = None
    manager: Host | None = attrs.field(default=None, repr=False)


@attrs.frozen(kw_only=True)
class DelegationStarted:
    """The ``delegate`` handler's answer: the records it made and what the child should start from.

    ``persisted`` is False when there is no storage: the ids are then fresh UUIDs the host can
    still use, but nothing was recorded.
    """

    delegation_id: str
    child_conversation_id: str
    parent_conversation_id: str
    delegating_tier: str
    target: str
    task: str
    max_turns: int = -1
    context: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=_dicts)
    resume_from: str = ""
    seed_messages: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=_dicts)
    persisted: bool = True


@attrs.frozen(kw_only=True)
class PipelineStarted:
    """The ``pipeline`` handler's answer: the stages to run in order (each via ``start_delegation``)."""

    stages: tuple[str, ...] = attrs.field(converter=_strings)
    task: str
    context: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=_dicts)
    parent_conversation_id: str
    delegating_tier: str


@attrs.frozen(kw_only=True)
class Completion:
    """The ``complete`` handler's answer; ``recorded`` when it finished the delegation record."""

    summary: str
    coverage_gap: bool = False
    gap_description: str = ""
    suggested_files: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    delegation_id: str | None = None
    recorded: bool = False


def _facts(context: Any) -> tuple[StorageBackend | None, str, str, str | None]:
    """(storage, conversation id, identity, own delegation id) from a DirectiveContext or CallContext."""
    conversation_id = getattr(context, "conversation_id", None)
    if not isinstance(conversation_id, str) or not conversation_id:
        raise TypeError(
            "the default delegation handlers need a context with the conversation_id the directives came "
            "from: pass DirectiveContext(conversation_id=..., identity=..., manager=...) to processor.process()"
        )
    storage = getattr(context, "storage", None)
    from ._context import host_of

    manager = host_of(context)
    if storage is None and manager is not None:
        storage = manager.storage
    delegation_id = getattr(context, "delegation_id", None)
    if delegation_id is None:
        meta = getattr(context, "meta", None)
        if isinstance(meta, Mapping):
            delegation_id = meta.get("delegation_id")
    # The store needs a delegating tier; a host that set no identity delegated as itself.
    return storage, conversation_id, getattr(context, "identity", None) or "host", delegation_id


def start_delegation(
    storage: StorageBackend | None,
    *,
    parent_id: str,
    delegating_tier: str,
    target: str,
    task: str,
    max_turns: int = -1,
    context: Sequence[Mapping[str, Any]] = (),
    resume_from: str = "",
) -> DelegationStarted:
    """Create the delegation record and its child conversation (status ``running``).

    With ``resume_from``, the earlier delegation's child messages are loaded to seed the new
    child. Raises ``StorageError`` when the store refuses (an unknown parent, an unknown
    ``resume_from``) — never a record silently missing.
    """
    seed: list[dict[str, Any]] = []
    if resume_from:
        if storage is None:
            raise StorageError(f"cannot resume delegation {resume_from!r}: no storage backend is configured")
        seed = [dict(m) for m in storage.load_delegation_with_messages(resume_from).get("messages") or []]
    if storage is None:
        delegation_id, child_id, persisted = str(uuid.uuid4()), str(uuid.uuid4()), False
    else:
        delegation_id, child_id = storage.create_delegation(
            parent_id, delegating_tier, target, task, max_turns, [dict(c) for c in context]
        )
        persisted = True
    return DelegationStarted(
        delegation_id=delegation_id,
        child_conversation_id=child_id,
        parent_conversation_id=parent_id,
        delegating_tier=delegating_tier,
        target=target,
        task=task,
        max_turns=max_turns,
        context=context,
        resume_from=resume_from,
        seed_messages=seed,
        persisted=persisted,
    )


def finish_delegation(storage: StorageBackend | None, delegation_id: str, status: str, summary: str) -> bool:
    """Store how a child ended (``completed`` | ``failed``); False when there is no storage."""
    if status not in STATUSES:
        raise ValueError(f"a delegation ends 'completed' or 'failed', not {status!r}")
    if storage is None:
        return False
    storage.complete_delegation(delegation_id, status, summary)
    return True


def completion_summary(directive: Complete) -> str:
    """The summary stored for a ``complete``: the text, plus the coverage gap when there is one."""
    if directive.coverage_gap and directive.gap_description:
        return f"{directive.summary}\n\nCoverage gap: {directive.gap_description}"
    return directive.summary


def handle_delegate(directive: Delegate, context: Any) -> DelegationStarted:
    storage, conversation_id, identity, _ = _facts(context)
    return start_delegation(
        storage,
        parent_id=conversation_id,
        delegating_tier=identity,
        target=directive.target,
        task=directive.task,
        max_turns=directive.max_turns,
        context=directive.context,
        resume_from=directive.resume_from,
    )


def handle_pipeline(directive: Pipeline, context: Any) -> PipelineStarted:
    _, conversation_id, identity, _ = _facts(context)
    return PipelineStarted(
        stages=directive.stages,
        task=directive.task,
        context=directive.context,
        parent_conversation_id=conversation_id,
        delegating_tier=identity,
    )


def handle_complete(directive: Complete, context: Any) -> Completion:
    storage, _, _, delegation_id = _facts(context)
    recorded = False
    if delegation_id:
        recorded = finish_delegation(storage, delegation_id, "completed", completion_summary(directive))
    return Completion(
        summary=directive.summary,
        coverage_gap=directive.coverage_gap,
        gap_description=directive.gap_description,
        suggested_files=directive.suggested_files,
        delegation_id=delegation_id,
        recorded=recorded,
    )


def default_handlers() -> list[DirectiveHandlerSpec]:
    return [
        DirectiveHandlerSpec(type=Delegate.type, handler=handle_delegate),  # type: ignore[arg-type]
        DirectiveHandlerSpec(type=Pipeline.type, handler=handle_pipeline),  # type: ignore[arg-type]
        DirectiveHandlerSpec(type=Complete.type, handler=handle_complete),  # type: ignore[arg-type]
    ]
