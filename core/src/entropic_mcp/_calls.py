"""Records passed to and returned from the call hooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ._access import AccessLevel
from ._outside import OutsideRootRequest as OutsideRootRequest

if TYPE_CHECKING:
    from ._context import CallContext


class ReadOnlyArguments(TypeError):
    """A hook tried to change the arguments it was shown (they are a read-only copy)."""


_READ_ONLY = (
    "the call's arguments are read-only for hooks: the rules judged these arguments and these run. "
    "Return ReplaceArgs(args=...) from entropic_mcp_before_tool_call to run a call with other arguments"
)


def _refuse(self: object, *args: object, **kwargs: object) -> Any:
    raise ReadOnlyArguments(_READ_ONLY)


class FrozenDict(dict):  # type: ignore[type-arg]
    """A dict hooks can read, serialise (json, orjson) and copy, but not change.

    Every mutating method raises ``ReadOnlyArguments``; ``copy()``, ``dict(view)`` and
    ``copy.deepcopy`` give an ordinary, changeable dict.
    """

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce_ex__(self, protocol: object) -> Any:
        return (dict, (thawed(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'FrozenDict'")


class FrozenList(list):  # type: ignore[type-arg]
    """A list hooks can read but not change (see ``FrozenDict``)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce_ex__(self, protocol: object) -> Any:
        return (list, (thawed(self),))


def frozen(value: Any) -> Any:
    """A deep, read-only copy of JSON-shaped data (what hooks are shown of a call's arguments)."""
    if isinstance(value, (FrozenDict, FrozenList)):
        return value
    if isinstance(value, Mapping):
        view = FrozenDict()
        for key, item in value.items():
            dict.__setitem__(view, key, frozen(item))
        return view
    if isinstance(value, (list, tuple)):
        items = FrozenList()
        list.extend(items, (frozen(item) for item in value))
        return items
    return value


def thawed(value: Any) -> Any:
    """A deep, ordinary (changeable) copy of JSON-shaped data."""
    if isinstance(value, Mapping):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thawed(item) for item in value]
    return value


@attrs.frozen(kw_only=True)
class ToolCall:
    """One call as the hooks see it: ``name`` is ``<server>.<tool>``.

    ``args`` is a read-only deep copy: a hook that changes it raises ``ReadOnlyArguments`` (the
    call is then refused), and nothing a hook does to it changes what runs.
    """

    name: str
    server: str
    tool: str
    args: Mapping[str, Any] = attrs.field(converter=frozen)
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
    args: Mapping[str, Any] = attrs.field(converter=frozen)  # read-only, as ToolCall.args
    pattern: str
    patterns: tuple[str, ...] = ()
    access: AccessLevel = AccessLevel.WRITE
    identity: str | None = None
    #: The person asked for (the OAuth token's subject): "always" answers are theirs alone.
    subject: str | None = None
    conversation_id: str = "default"
    reason: str = ""
    always: bool = True


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    """An approver's answer, with optional feedback shown to the model."""

    answer: Answer = attrs.field(validator=attrs.validators.in_(ANSWERS))
    feedback: str = ""
    #: The person closed the question without answering (MCP elicitation ``cancel``): refused
    #: once, and the model is told to ask them rather than that they said no.
    dismissed: bool = False

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
