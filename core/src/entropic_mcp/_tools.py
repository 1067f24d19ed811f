"""The ToolBase class (tool definitions and result budgets live in ``_definitions``, re-exported here)."""

from __future__ import annotations

import abc
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar

from ._access import AccessLevel
from ._definitions import TOOL_NAME as TOOL_NAME
from ._definitions import ToolDefinition as ToolDefinition
from ._definitions import load_tool_definition as load_tool_definition
from ._definitions import result_cap as result_cap
from ._errors import ToolDefinitionError

if TYPE_CHECKING:
    from ._context import CallContext
    from ._envelope import ToolResult
    from ._schema import SchemaValidator


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
