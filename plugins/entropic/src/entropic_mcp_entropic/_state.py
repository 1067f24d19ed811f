"""What the inspection tools read: the host's state provider and the storage backend."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from entropic_mcp import CallContext, ConfigError, ToolError
from entropic_mcp.storage import DEFAULT_SCOPE, StorageError

if TYPE_CHECKING:
    from entropic_mcp.storage import StorageBackend

log = logging.getLogger("entropic_mcp.entropic")

HOOK = "entropic_mcp_engine_state"


def _messages(value: Sequence[Mapping[str, Any]] | None) -> tuple[dict[str, Any], ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(f"messages must be a list of message objects, got {type(value).__name__}")
    if not all(isinstance(m, Mapping) for m in value):
        raise TypeError("messages must be a list of message objects (role, content, ...)")
    return tuple(dict(m) for m in value)


def _mapping(value: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping, got {type(value).__name__}")
    return dict(value)


@attrs.frozen(kw_only=True)
class EngineState:
    """What a host's ``entropic_mcp_engine_state`` implementation reports.

    Every field is optional: ``state`` (free-form engine facts: phase, tier, turn, …),
    ``identities`` (by name), ``config`` (the host's own settings), and ``messages`` (the
    conversation's messages, each with ``role`` and ``content``; ``None`` when not provided).
    """

    state: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    identities: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    config: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    messages: tuple[dict[str, Any], ...] | None = attrs.field(default=None, converter=_messages)


def engine_state(ctx: CallContext) -> tuple[EngineState | None, str | None]:
    """The provider's report for this call, and the reason there is none when it failed.

    Asked through ``ctx.services.first_answer``: the first provider's answer, and a provider
    that raises is reported (``state_provider_error``), not skipped.
    """
    try:
        value = ctx.services.first_answer(HOOK, {"conversation_id": ctx.conversation_id, "identity": ctx.identity})
        if value is None or isinstance(value, EngineState):
            return value, None
        if isinstance(value, Mapping):
            return EngineState(**value), None
        raise TypeError(f"returned {type(value).__name__}; expected an EngineState or None")
    except Exception as exc:  # a broken provider must not take diagnose down with it
        log.warning("the engine-state provider failed", exc_info=True)
        return None, f"{HOOK} failed: {type(exc).__name__}: {exc}"


def storage_of(ctx: CallContext, tool: str) -> StorageBackend:
    """The configured backend, or a ``storage_unavailable`` ToolError saying how to get one."""
    services = ctx.services
    if services.root is None:  # a server used bare: no host, so no store to open
        raise ToolError(
            "storage_unavailable",
            f"'entropic.{tool}' needs a storage backend and this call has no ServerManager to reach it; "
            'call it through a ServerManager configured with [storage] backend = "tinydb".',
        )
    try:
        storage = services.storage
    except (ConfigError, StorageError) as exc:
        raise ToolError(
            "storage_unavailable",
            f"the storage backend could not be opened: {exc}. Fix [storage] in entropic-mcp.toml; "
            f"'entropic.{tool}' works once it opens.",
        ) from None
    if storage is None:
        raise ToolError(
            "storage_unavailable",
            f'no storage backend is configured ([storage] backend = "none"), so there are no delegation '
            f"records for 'entropic.{tool}'. Set [storage] backend = \"tinydb\" in entropic-mcp.toml to keep them.",
        )
    return storage


def caller_scope(storage: StorageBackend, ctx: CallContext) -> str:
    """The scope whose delegations this call may see: its conversation's, when the store holds that
    conversation (a host's conversation or a delegation's child); else the default scope (an MCP
    client's conversation key names no stored conversation; under serve's ``[auth]``, the caller's
    own scope). Raises StorageError."""
    scope = storage.scope_of(ctx.conversation_id)
    if scope is not None:
        return scope
    return getattr(ctx, "scope", None) or DEFAULT_SCOPE
