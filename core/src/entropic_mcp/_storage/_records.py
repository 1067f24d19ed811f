"""The records the storage protocol takes from the rest of entropic-mcp."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .._pipeline import CallOutcome

#: The scope of conversations created without one, and of callers outside any stored conversation.
DEFAULT_SCOPE = "default"


def _frozen_dict(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})


@attrs.frozen(kw_only=True)
class ToolCallRecord:
    """One tool call as the audit trail keeps it (``StorageBackend.record_tool_call``).

    Build it from the pipeline's outcome with :meth:`from_outcome`; a host that runs tools some
    other way can build it directly. ``to_dict`` is the JSON form every backend stores.

    Attributes:
        tool: the internal tool name (``server.tool``).
        kind: how the call ended (``success``, ``error``, ``denied``, ``timeout``, ...).
        is_error: whether the response was an error.
        elapsed_ms: time spent in the pipeline.
        conversation_id: the conversation the call belonged to.
        identity: the caller's identity, if any.
        subject: the person behind the call (the OAuth token's subject), if known.
        permission: the permission decision (``allow``, ``ask->allow``, ``deny``, ...).
        pattern: the permission pattern the call was checked against.
        args: the arguments, whole.
        response: the response envelope as a JSON object.
        consecutive_duplicates: how many identical calls came just before this one.
        hook_faults: what plugin hooks failed while the call ran (each as text).
        time: when the call started (Unix seconds).
    """

    tool: str = attrs.field(validator=attrs.validators.instance_of(str))
    kind: str = attrs.field(validator=attrs.validators.instance_of(str))
    is_error: bool = False
    elapsed_ms: float = 0.0
    conversation_id: str = ""
    identity: str | None = None
    subject: str | None = None
    permission: str | None = None
    pattern: str | None = None
    args: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_dict)
    response: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_dict)
    consecutive_duplicates: int = 0
    hook_faults: tuple[str, ...] = attrs.field(default=(), converter=lambda faults: tuple(str(f) for f in faults))
    time: float = 0.0

    @classmethod
    def from_outcome(cls, outcome: CallOutcome) -> ToolCallRecord:
        """The record of one call the pipeline ran."""
        return cls(
            tool=outcome.name,
            kind=outcome.kind,
            is_error=outcome.response.is_error,
            elapsed_ms=round(outcome.elapsed_ms, 3),
            conversation_id=outcome.conversation_id,
            identity=outcome.identity,
            subject=getattr(outcome, "subject", None),
            permission=outcome.permission,
            pattern=outcome.pattern,
            args=outcome.args,
            response=outcome.response.to_dict(),
            consecutive_duplicates=outcome.consecutive_duplicates,
            hook_faults=getattr(outcome, "hook_faults", ()),
            time=outcome.time,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: every field, plus ``arg_names`` (the sorted argument names)."""
        return {
            "tool": self.tool,
            "kind": self.kind,
            "is_error": self.is_error,
            "elapsed_ms": self.elapsed_ms,
            "arg_names": sorted(self.args),
            "conversation_id": self.conversation_id,
            "identity": self.identity,
            "subject": self.subject,
            "permission": self.permission,
            "time": self.time,
            "args": dict(self.args),
            "pattern": self.pattern,
            "response": dict(self.response),
            "consecutive_duplicates": self.consecutive_duplicates,
            "hook_faults": list(self.hook_faults),
        }


def check_record(record: object) -> ToolCallRecord:
    """``record`` if it is a ToolCallRecord, else the StorageError every backend raises."""
    if not isinstance(record, ToolCallRecord):
        from .._errors import StorageError

        hint = " (build one with ToolCallRecord.from_outcome(outcome))" if hasattr(record, "to_record") else ""
        raise StorageError(f"record_tool_call expects a ToolCallRecord, got {type(record).__name__}{hint}")
    return record


def check_scope(scope: object, what: str, *, none_ok: bool) -> str | None:
    """A scope argument: a non-empty string (or None where "every scope" is allowed)."""
    if scope is None and none_ok:
        return None
    if not isinstance(scope, str) or not scope.strip():
        from .._errors import StorageError

        raise StorageError(f"{what}: scope must be a non-empty string, got {scope!r}")
    return scope
