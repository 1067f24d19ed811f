"""What a tool declares of itself: its definition (loaded from package data) and its result budget.

A leaf under the tool classes: the call context's services describe tools by these without
importing ``ToolBase`` (whose methods take a ``CallContext``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import attrs

from ._errors import ToolDefinitionError

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
        text = _read_data(package, "tools", f"{tool}.json")
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


def _read_data(package: str, *parts: str) -> str:
    """A data file of ``package`` as ``importlib.resources`` reads it.

    A package imported from a directory (a wheel's, an editable install's) is read from there:
    ``importlib.resources`` would bring ``tempfile``, ``zipfile`` and the compression modules into
    every start-up that lists tools. Any other loader (a zip, a namespace package) goes through it.
    """
    import importlib
    from importlib.machinery import SourceFileLoader, SourcelessFileLoader

    loader = getattr(importlib.import_module(package), "__loader__", None)
    if isinstance(loader, (SourceFileLoader, SourcelessFileLoader)):
        with open(os.path.join(os.path.dirname(loader.path), *parts), encoding="utf-8") as fh:
            return fh.read()
    from importlib import resources

    return resources.files(package).joinpath(*parts).read_text("utf-8")
