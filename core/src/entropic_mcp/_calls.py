"""Records passed to and returned from the call hooks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ._access import AccessLevel

if TYPE_CHECKING:
    from ._context import CallContext


@attrs.frozen(kw_only=True)
class ToolCall:
    """One call as the hooks see it: ``name`` is ``<server>.<tool>``."""

    name: str
    server: str
    tool: str
    args: Mapping[str, Any]
    context: CallContext = attrs.field(repr=False, eq=False)


@attrs.frozen(kw_only=True)
class Refuse:
    """Returned by ``entropic_mcp_before_tool_call`` to refuse a call; ``reason`` is shown to the model."""

    reason: str = attrs.field(validator=attrs.validators.instance_of(str))


@attrs.frozen(kw_only=True)
class ReplaceArgs:
    """Returned by ``entropic_mcp_before_tool_call`` to run the call with other arguments."""

    args: Mapping[str, Any] = attrs.field(validator=attrs.validators.instance_of(Mapping))  # type: ignore[type-abstract]


Answer = Literal["allow_once", "deny_once", "always_allow", "always_deny"]
ANSWERS: tuple[str, ...] = ("allow_once", "deny_once", "always_allow", "always_deny")


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """An "ask" decision: ``pattern`` is what ``always_*`` would store.

    ``always`` is False when an "always" answer would not take effect (an explicit ``ask`` rule
    matched, or part of the call could not be analysed): approvers should offer only "once"
    answers then, and an "always" answer is taken as "once".
    """

    tool: str
    args: Mapping[str, Any]
    pattern: str
    patterns: tuple[str, ...] = ()
    access: AccessLevel = AccessLevel.WRITE
    identity: str | None = None
    conversation_id: str = "default"
    reason: str = ""
    always: bool = True


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    """An approver's answer, with optional feedback shown to the model."""

    answer: Answer = attrs.field(validator=attrs.validators.in_(ANSWERS))
    feedback: str = ""

    @classmethod
    def coerce(cls, value: object) -> ApprovalDecision | None:
        if value is None or isinstance(value, ApprovalDecision):
            return value
        if isinstance(value, str) and value in ANSWERS:
            return cls(answer=value)  # type: ignore[arg-type]
        if value is True:
            return cls(answer="allow_once")
        if value is False:
            return cls(answer="deny_once")
        raise TypeError(f"an approver returned {value!r}; expected one of {ANSWERS} or an ApprovalDecision")


@attrs.frozen(kw_only=True)
class OutsideRootRequest:
    """A path outside the project root that a tool wants to read or write."""

    path: Path
    tool: str
    access: Literal["read", "write"]
    root: Path
    conversation_id: str = "default"
