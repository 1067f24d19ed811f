"""Tool definitions (loaded from package data) and the ToolBase class."""

from __future__ import annotations

import abc
import json
import re
from collections.abc import Awaitable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ._access import AccessLevel
from ._errors import ToolDefinitionError

if TYPE_CHECKING:
    from ._context import CallContext
    from ._envelope import ToolResult
    from ._schema import SchemaValidator

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _check_name(instance: object, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str) or not TOOL_NAME.match(value):
        raise ToolDefinitionError(
            f"invalid tool name {value!r}: names match ^[A-Za-z0-9_-]{{1,64}}$ (the server prefix is added for you)"
        )


def _check_schema(instance: object, attribute: attrs.Attribute, value: Mapping) -> None:
    if not isinstance(value, Mapping) or value.get("type") != "object":
        raise ToolDefinitionError(f'inputSchema must be an object schema ({{"type": "object", ...}}), got {value!r}')


@attrs.frozen(kw_only=True)
class ToolDefinition:
    """How a tool is described to clients; ``input_schema`` is serialised as ``inputSchema``."""

    name: str = attrs.field(validator=_check_name)
    description: str = attrs.field(validator=attrs.validators.instance_of(str))
    input_schema: Mapping[str, Any] = attrs.field(validator=_check_schema)
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None
    #: Where the definition came from (``<package>/tools/<name>.json``), for error messages.
    source: str | None = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> ToolDefinition:
        if not isinstance(data, Mapping):
            raise ToolDefinitionError(f"{source}: a tool definition must be a JSON object")
        missing = [key for key in ("name", "inputSchema") if key not in data]
        if missing:
            raise ToolDefinitionError(f"{source}: missing required key(s) {', '.join(missing)}")
        try:
            return cls(
                name=data["name"],
                description=data.get("description", ""),
                input_schema=data["inputSchema"],
                source=source,
                title=data.get("title"),
                output_schema=data.get("outputSchema"),
            )
        except (ToolDefinitionError, TypeError) as exc:
            raise ToolDefinitionError(f"{source}: {exc}") from None

    def to_mcp(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
        }
        if self.title is not None:
            data["title"] = self.title
        if self.output_schema is not None:
            data["outputSchema"] = dict(self.output_schema)
        return data


def result_cap(limit: int, budget: int | None) -> int:
    """The cap on one call's result: ``max_result_bytes`` (``limit``), raised to the tool's budget."""
    return budget if budget is not None and 0 < limit < budget else limit


def load_tool_definition(package: str, tool: str) -> ToolDefinition:
    """Load ``tools/<tool>.json`` from ``package``'s data; errors name the file."""
    source = f"{package}/tools/{tool}.json"
    try:
        text = resources.files(package).joinpath("tools", f"{tool}.json").read_text("utf-8")
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError) as exc:
        raise ToolDefinitionError(f"{source}: tool definition file not found ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolDefinitionError(f"{source}: invalid JSON: {exc}") from None
    definition = ToolDefinition.from_dict(data, source=source)
    if definition.name != tool:
        raise ToolDefinitionError(f"{source}: 'name' is {definition.name!r}, expected {tool!r}")
    return definition


class ToolBase(abc.ABC):
    """A tool: owns its definition, declares its access level, executes calls.

    Subclasses set ``definition`` (usually ``load_tool_definition(__package__, "name")``) or
    pass it to ``__init__``, and implement ``execute(args, ctx)`` — plain or ``async``. It
    returns a string or a ``ToolResult``; raising ``ToolError`` refuses the call with a code.
    """

    definition: ToolDefinition
    required_access_level: ClassVar[AccessLevel] = AccessLevel.WRITE
    destructive: ClassVar[bool | None] = None
    idempotent: ClassVar[bool | None] = None
    open_world: ClassVar[bool | None] = None
    #: A model turn's batch runs this tool after every other call (e.g. handing work to another tier).
    runs_last: ClassVar[bool] = False
    #: What the tool does, for hosts that look tools up by role (``"delegate"``, ``"todo"``, ...).
    capabilities: ClassVar[frozenset[str]] = frozenset()
    #: This tool's own result budget in bytes: its results may be this long even when
    #: ``[pipeline] max_result_bytes`` is lower (a reader's pages). None: the configured cap.
    #: It only raises the cap; ``max_result_bytes = 0`` (no cap) stays no cap.
    result_budget_bytes: ClassVar[int | None] = None

    def __init__(self, definition: ToolDefinition | None = None) -> None:
        if definition is not None:
            self.definition = definition
        if not isinstance(getattr(self, "definition", None), ToolDefinition):
            raise ToolDefinitionError(
                f"{type(self).__name__} has no ToolDefinition: set the class attribute "
                "'definition' or pass one to __init__"
            )

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def validator(self) -> SchemaValidator:
        """The tool's ``inputSchema``, compiled once (the pipeline and a bare server share it)."""
        validator = self.__dict__.get("_validator")
        if validator is None or validator.schema is not self.definition.input_schema:
            from ._schema import SchemaValidator

            validator = self.__dict__["_validator"] = SchemaValidator(self.definition.input_schema)
        return validator

    @abc.abstractmethod
    def execute(self, args: dict[str, Any], ctx: CallContext) -> str | ToolResult | Awaitable[str | ToolResult]:
        """Run the call; may be ``async def`` in a subclass."""

    def anchor_key(self, args: dict[str, Any]) -> str | None:
        """A key under which the host keeps this tool's latest result pinned; None for no anchor."""
        return None

    def annotations(self) -> dict[str, Any]:
        """MCP tool annotations derived from the access level and the declared hints."""
        read_only = self.required_access_level <= AccessLevel.READ
        data: dict[str, Any] = {"readOnlyHint": read_only}
        if not read_only:
            if self.destructive is not None:
                data["destructiveHint"] = self.destructive
            if self.idempotent is not None:
                data["idempotentHint"] = self.idempotent
        if self.open_world is not None:
            data["openWorldHint"] = self.open_world
        if self.definition.title:
            data["title"] = self.definition.title
        return data

    def to_mcp(self, name: str | None = None) -> dict[str, Any]:
        data = self.definition.to_mcp()
        if name is not None:
            data["name"] = name
        data["annotations"] = self.annotations()
        return data
