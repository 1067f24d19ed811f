"""What a call and a batch came to: the records the pipeline returns."""

from __future__ import annotations

import time
from collections.abc import Mapping
from time import time as _time
from typing import Any

import attrs

from .._envelope import ServerResponse


# Not slotted: the pipeline builds one per call with ``made`` (one dict), where a slotted frozen
# class sets each of its 14 fields through ``object.__setattr__`` (P1).
@attrs.frozen(kw_only=True, slots=False)
class CallOutcome:
    """What one call came to: the envelope plus how it got there.

    Attributes:
        name: the internal tool name (``server.tool``).
        response: the envelope the caller gets.
        kind: a :class:`ResultKind` value (``ok``, ``error``, ``rejected_permission``, ...).
        elapsed_ms: time spent in the pipeline.
        conversation_id: the conversation the call belonged to.
        identity: the caller's identity, if any.
        subject: the person behind the call (the OAuth token's subject), if known.
        args: the arguments, after any hook replacement.
        permission: the permission decision (``allow``, ``ask->allow``, ``deny``, ...).
        pattern: what "always" answers store for the call.
        consecutive_duplicates: how many calls just before this one had the same arguments and
            got the same answer (0: this answer is not a repeat).
        same_tool_calls: the length of the current run of one WRITE tool, this call included.
        hook_faults: hooks that raised or answered with the wrong type during this call,
            as ``"<plugin>: <hook>: <problem>"``.
        time: when the call started (Unix seconds).
    """

    name: str
    response: ServerResponse
    kind: str
    elapsed_ms: float
    conversation_id: str
    identity: str | None = None
    subject: str | None = None
    args: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    permission: str | None = None
    pattern: str | None = None
    consecutive_duplicates: int = 0
    same_tool_calls: int = 0
    hook_faults: tuple[str, ...] = ()
    time: float = attrs.field(factory=time.time)

    @property
    def duplicate(self) -> bool:
        """True when the answer repeats the previous identical call's answer (flagged, not refused)."""
        return self.consecutive_duplicates > 0

    def summary(self) -> dict[str, Any]:
        """The history form: argument names only, never values."""
        data = {
            "tool": self.name,
            "kind": str(self.kind),
            "is_error": self.response.is_error,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "arg_names": sorted(self.args),
            "conversation_id": self.conversation_id,
            "identity": self.identity,
            "permission": self.permission,
            "time": self.time,
        }
        if self.hook_faults:
            data["hook_faults"] = list(self.hook_faults)
        return data

    def to_record(self) -> dict[str, Any]:
        """The audit form: everything."""
        return {
            **self.summary(),
            "args": dict(self.args),
            "pattern": self.pattern,
            "response": self.response.to_dict(),
            "consecutive_duplicates": self.consecutive_duplicates,
            "hook_faults": list(self.hook_faults),
        }


_new = object.__new__
_set = object.__setattr__


def made(
    name: str,
    response: ServerResponse,
    kind: str,
    elapsed_ms: float,
    conversation_id: str,
    identity: str | None,
    subject: str | None,
    args: Mapping[str, Any],
    permission: str | None,
    pattern: str | None,
    consecutive_duplicates: int,
    same_tool_calls: int,
    hook_faults: tuple[str, ...],
) -> CallOutcome:
    """``CallOutcome(...)`` with every field given, for the per-call path: no keyword dict, no
    per-field ``__setattr__`` (the fields have no validators or converters to skip)."""
    outcome = _new(CallOutcome)
    _set(
        outcome,
        "__dict__",
        {
            "name": name,
            "response": response,
            "kind": kind,
            "elapsed_ms": elapsed_ms,
            "conversation_id": conversation_id,
            "identity": identity,
            "subject": subject,
            "args": args,
            "permission": permission,
            "pattern": pattern,
            "consecutive_duplicates": consecutive_duplicates,
            "same_tool_calls": same_tool_calls,
            "hook_faults": hook_faults,
            "time": _time(),
        },
    )
    return outcome


@attrs.frozen(kw_only=True)
class BatchOutcome:
    """A model turn's calls: what ran, what was left over, and whether the batch stopped early.

    ``outcomes`` holds every call that ran, in the order of ``calls`` as the batch ordered them
    (tools that run last at the end); ``surplus`` names the calls that never started.
    """

    outcomes: tuple[CallOutcome, ...]
    surplus: tuple[str, ...] = ()
    stopped: str | None = None  # stop_processing | complete | duplicate_stop
