"""Schema-valid tool arguments for the conformance checks, as hypothesis strategies.

``hypothesis-jsonschema`` is tried first; it has broken on every object schema with some
hypothesis releases (0.23 against hypothesis ≥ 6.170.10: ``'many' object has no attribute
'more'``), so a small built-in generator covers the subset tool schemas use. Every value either
produces is validated against the schema before a tool sees it: the generators are helpers, the
schema is the judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MISSING_KIT = "the plugin-author kit needs hypothesis: pip install entropic-mcp[testing]"


class UnsupportedSchema(ValueError):
    """The built-in generator does not know how to satisfy part of a schema."""


def require_hypothesis() -> None:
    """Import hypothesis or fail with the install hint (it is an optional dependency)."""
    try:
        import hypothesis  # noqa: F401
    except ImportError as exc:
        raise ImportError(MISSING_KIT) from exc


_SIMPLE_JSON: Any = None


def _json_values() -> Any:
    global _SIMPLE_JSON
    if _SIMPLE_JSON is None:
        from hypothesis import strategies as st

        _SIMPLE_JSON = st.none() | st.booleans() | st.integers(-(2**31), 2**31) | st.text(max_size=20)
    return _SIMPLE_JSON


def schema_strategy(schema: object) -> Any:
    """A hypothesis strategy for values of ``schema`` (the subset tools use).

    Supported: ``type`` (one or a list), ``enum``, ``const``, ``default``, ``anyOf``/``oneOf``,
    ``minimum``/``maximum`` (and the exclusive forms), ``multipleOf`` for integers,
    ``minLength``/``maxLength``, ``pattern`` (through ``from_regex``), ``items``,
    ``minItems``/``maxItems``/``uniqueItems``, ``properties``/``required``. Raises
    ``UnsupportedSchema`` for what it cannot satisfy, so the caller reports it.
    """
    from hypothesis import strategies as st

    if schema is True or schema == {}:
        return _json_values()
    if schema is False:
        raise UnsupportedSchema("the schema `false` admits no value")
    if not isinstance(schema, Mapping):
        raise UnsupportedSchema(f"a schema is an object or a boolean, got {schema!r}")
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        choices = list(schema["enum"])
        if not choices:
            raise UnsupportedSchema("an empty enum admits no value")
        return st.sampled_from(choices)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            base = {k: v for k, v in schema.items() if k not in (key, "default")}
            options = [schema_strategy({**base, **branch}) for branch in schema[key] if isinstance(branch, Mapping)]
            if not options:
                raise UnsupportedSchema(f"{key} has no object branch")
            return _with_default(st.one_of(options), schema)
    kind = schema.get("type")
    if kind is None:
        kind = _implied_type(schema)
    if isinstance(kind, list):
        if not kind:
            raise UnsupportedSchema("an empty type list admits no value")
        return _with_default(st.one_of([schema_strategy({**schema, "type": k}) for k in kind]), schema)
    builder = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if builder is None:
        raise UnsupportedSchema(f"unknown type {kind!r}")
    return _with_default(builder(schema), schema)


def _with_default(strategy: Any, schema: Mapping[str, Any]) -> Any:
    from hypothesis import strategies as st

    return st.just(schema["default"]) | strategy if "default" in schema else strategy


def _implied_type(schema: Mapping[str, Any]) -> str | None:
    keys = set(schema)
    if keys & {"properties", "required", "additionalProperties"}:
        return "object"
    if keys & {"items", "minItems", "maxItems"}:
        return "array"
    if keys & {"minLength", "maxLength", "pattern"}:
        return "string"
    if keys & {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}:
        return "number"
    return None


def _bounds(schema: Mapping[str, Any], integer: bool) -> tuple[Any, Any]:
    low = schema.get("minimum")
    high = schema.get("maximum")
    ex_low = schema.get("exclusiveMinimum")
    ex_high = schema.get("exclusiveMaximum")
    for name, value in (
        ("minimum", low),
        ("maximum", high),
        ("exclusiveMinimum", ex_low),
        ("exclusiveMaximum", ex_high),
    ):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UnsupportedSchema(f"{name} must be a number, got {value!r}")
    if integer:
        if low is not None:
            low = math.ceil(low)
        if ex_low is not None:
            low = max(low, math.floor(ex_low) + 1) if low is not None else math.floor(ex_low) + 1
        if high is not None:
            high = math.floor(high)
        if ex_high is not None:
            high = min(high, math.ceil(ex_high) - 1) if high is not None else math.ceil(ex_high) - 1
    elif ex_low is not None or ex_high is not None:
        low = ex_low if ex_low is not None and (low is None or ex_low >= low) else low
        high = ex_high if ex_high is not None and (high is None or ex_high <= high) else high
    if low is not None and high is not None and low > high:
        raise UnsupportedSchema(f"the bounds admit no number ({low} > {high})")
    return low, high


def _integer(schema: Mapping[str, Any]) -> Any:
    from hypothesis import strategies as st

    low, high = _bounds(schema, integer=True)
    # Unbounded sides stay within what JSON parsers of every client keep exact.
    strategy = st.integers(-(2**53) if low is None else low, 2**53 if high is None else high)
    step = schema.get("multipleOf")
    if isinstance(step, int) and not isinstance(step, bool) and step > 0:
        strategy = strategy.map(lambda n: n - n % step).filter(lambda n: low is None or n >= low)
    return strategy


def _number(schema: Mapping[str, Any]) -> Any:
    from hypothesis import strategies as st

    low, high = _bounds(schema, integer=False)
    floats = st.floats(
        min_value=low,
        max_value=high,
        allow_nan=False,
        allow_infinity=False,
        exclude_min="exclusiveMinimum" in schema and low == schema["exclusiveMinimum"],
        exclude_max="exclusiveMaximum" in schema and high == schema["exclusiveMaximum"],
    )
    try:
        return floats | _integer(schema)
    except UnsupportedSchema:  # no integer between the bounds: floats only
        return floats


def _string(schema: Mapping[str, Any]) -> Any:
    from hypothesis import strategies as st

    low = schema.get("minLength", 0)
    high = schema.get("maxLength")
    for name, value in (("minLength", low), ("maxLength", high)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise UnsupportedSchema(f"{name} must be a non-negative integer, got {value!r}")
    if high is not None and low > high:
        raise UnsupportedSchema(f"minLength {low} > maxLength {high}")
    pattern = schema.get("pattern")
    if pattern is None:
        return st.text(min_size=low, max_size=high if high is not None else max(low, 40))
    if not isinstance(pattern, str):
        raise UnsupportedSchema(f"pattern must be a string, got {pattern!r}")
    import jsonschema_rs

    # JSON Schema patterns are unanchored ECMA-262 searches: from_regex without fullmatch makes
    # strings that contain a match; Python's ``$`` also matches before a final newline, which
    # ECMA's does not, so the schema's own validator has the last word.
    matches = jsonschema_rs.validator_for({"type": "string", "pattern": pattern}).is_valid
    return st.from_regex(pattern).filter(lambda s: low <= len(s) and (high is None or len(s) <= high) and matches(s))


def _boolean(schema: Mapping[str, Any]) -> Any:
    from hypothesis import strategies as st

    return st.booleans()


def _null(schema: Mapping[str, Any]) -> Any:
    from hypothesis import strategies as st

    return st.none()


def _array(schema: Mapping[str, Any]) -> Any:
    from hypothesis import strategies as st

    items = schema.get("items", True)
    if isinstance(items, list):  # draft-04 tuple form
        return st.tuples(*(schema_strategy(item) for item in items)).map(list)
    low = schema.get("minItems", 0)
    high = schema.get("maxItems")
    if high is None:
        high = max(low, 5)
    return st.lists(
        schema_strategy(items),
        min_size=low,
        max_size=high,
        unique_by=_unique_key if schema.get("uniqueItems") else None,
    )


def _unique_key(value: Any) -> str:
    import orjson

    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # integers beyond 64 bits, from the library's generator
        return repr(value)


def _object(schema: Mapping[str, Any]) -> Any:
    from hypothesis import strategies as st

    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise UnsupportedSchema(f"properties must be an object, got {properties!r}")
    required = schema.get("required", [])
    missing = [name for name in required if name not in properties]
    fixed = {name: schema_strategy(properties.get(name, True)) for name in required}
    fixed.update({name: _json_values() for name in missing})
    optional = {name: schema_strategy(sub) for name, sub in properties.items() if name not in fixed}
    return st.fixed_dictionaries(fixed, optional=optional)


_BUILDERS = {
    "integer": _integer,
    "number": _number,
    "string": _string,
    "boolean": _boolean,
    "null": _null,
    "array": _array,
    "object": _object,
}


def library_strategy(schema: Mapping[str, Any]) -> Any:
    """``hypothesis-jsonschema``'s strategy, or None when it is missing or cannot build one."""
    try:
        from hypothesis_jsonschema import from_schema
    except ImportError:
        return None
    try:
        return from_schema(dict(schema))
    except Exception:
        return None


def draw_values(strategy: Any, count: int) -> list[Any]:
    """``count`` values from ``strategy`` (deterministic); raises whatever generation raises."""
    from hypothesis import HealthCheck, given, settings

    values: list[Any] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        values.append(value)

    collect()
    return values


def valid_arguments(schema: Mapping[str, Any], count: int) -> tuple[list[Any], list[str]]:
    """Up to ``count`` schema-valid argument objects, and what went wrong generating them.

    The library is tried first and the built-in generator when it fails or yields nothing
    valid. No valid value at all is a problem the check reports: a tool no model can call
    correctly, or a schema the kit cannot read, both need the author's attention.
    """
    import jsonschema_rs

    require_hypothesis()
    try:
        validator = jsonschema_rs.validator_for(dict(schema))
    except Exception as exc:
        return [], [f"inputSchema cannot be compiled: {exc}"]
    notes: list[str] = []
    for source in ("hypothesis-jsonschema", "built-in generator"):
        try:
            strategy = library_strategy(schema) if source == "hypothesis-jsonschema" else schema_strategy(schema)
            if strategy is None:
                continue
            drawn = draw_values(strategy, count)
        except Exception as exc:
            notes.append(f"{source}: {type(exc).__name__}: {exc}")
            continue
        valid = [value for value in drawn if isinstance(value, dict) and validator.is_valid(value)]
        if valid:
            return _dedupe(valid), []
        notes.append(f"{source}: none of {len(drawn)} generated values is valid against the schema")
    return [], ["could not generate schema-valid arguments (" + "; ".join(notes) + ")"]


def _dedupe(values: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for value in values:
        key = _unique_key(value)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out
