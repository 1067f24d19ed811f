"""Schema validation (JSON Schema 2020-12, compiled once per tool) with messages a model can act on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson


def _where(path: list[Any]) -> str:
    return ".".join(str(p) for p in path) if path else ""


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


class SchemaValidator:
    """One compiled validator for one tool's ``inputSchema``."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        import jsonschema_rs

        self.schema = schema
        self._validator = jsonschema_rs.validator_for(dict(schema))
        #: Whether the arguments are the schema's, as they are (the compiled check, no message).
        self.is_valid = self._validator.is_valid
        self._string_props = {
            name
            for name, prop in (schema.get("properties") or {}).items()
            if isinstance(prop, Mapping) and prop.get("type") == "string"
        }
        #: Whether ``coerce`` can change anything (the schema has string properties).
        self.coerces = bool(self._string_props)

    def coerce(self, args: dict[str, Any]) -> dict[str, Any]:
        """Numbers given where the schema says string become their text (models do this)."""
        if not self._string_props:
            return args
        changed = None
        for name in self._string_props:
            value = args.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if changed is None:
                    changed = dict(args)
                changed[name] = str(value)
        return args if changed is None else changed

    def validate(self, args: dict[str, Any]) -> str | None:
        """None when valid, else one message naming the argument and how to fix the call."""
        if self._validator.is_valid(args):
            return None
        error = next(iter(self._validator.iter_errors(args)))
        return self._message(error, args)

    def _message(self, error: Any, args: dict[str, Any]) -> str:
        kind = type(error.kind).__name__
        where = _where(error.instance_path)
        if kind == "Required":
            missing = error.message.split('"')[1] if '"' in error.message else error.message
            prefix = f"{where}." if where else ""
            return f"Missing required argument: {prefix}{missing}"
        if kind == "Type":
            expected = "/".join(error.kind.types) if hasattr(error.kind, "types") else "another type"
            return f"Type mismatch for '{where}': expected {expected}"
        if kind == "Enum":
            options = error.kind.options if hasattr(error.kind, "options") else None
            if options is None:
                options = self._enum_at(error.schema_path)
            return f"Invalid value for '{where}': {_json(error.instance)}. Must be one of: {_json(options)}"
        if kind == "AdditionalProperties":
            unexpected = getattr(error.kind, "unexpected", None)
            names = ", ".join(map(repr, unexpected)) if unexpected else error.message
            allowed = sorted((self.schema.get("properties") or {}).keys())
            return f"Unknown argument(s) {names}; allowed arguments: {', '.join(allowed) or 'none'}"
        target = f"'{where}'" if where else "the arguments"
        return f"Invalid value for {target}: {error.message}"

    def _enum_at(self, schema_path: list[Any]) -> Any:
        node: Any = self.schema
        for part in schema_path:
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                return None
        return node
