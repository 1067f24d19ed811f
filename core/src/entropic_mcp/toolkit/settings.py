"""Server settings: a ``[servers.<name>]`` table turned into a frozen attrs record, every key checked."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs

from .._errors import ConfigError
from .._server import SERVER_BASE_KEYS
from ._numbers import as_integer

__all__ = ["SERVER_BASE_KEYS", "settings_from_table"]

_S = TypeVar("_S")


def settings_from_table(
    cls: type[_S],
    table: Mapping[str, Any],
    *,
    server: str,
    source: str | Path | None = None,
    extra_keys: frozenset[str] = frozenset(),
) -> _S:
    """Build the attrs record ``cls`` from a ``[servers.<server>]`` table, checking every key.

    Each field's annotation decides what is accepted: ``bool``, ``int`` (booleans refused; a
    float with no fraction accepted), ``float`` (an int accepted), ``str``, ``Path``,
    ``tuple[str, ...]`` (from a TOML array), ``Literal[...]`` and ``X | None``. A field's
    ``metadata={"min": n}`` / ``{"max": n}`` bound numbers. Unknown keys are errors
    (typos must not pass silently) except ``extra_keys`` and :data:`SERVER_BASE_KEYS`, which
    ``MCPServerBase.configure`` handles itself for every server (``timeout_seconds``,
    ``max_threads``) unless ``cls`` declares a field of that name.

    Raises:
        ConfigError: naming the file (``source``), the table and key, and what was expected.
    """
    if not attrs.has(cls):
        raise TypeError(f"settings_from_table needs an attrs class, got {cls!r}")
    where = f"{source}: " if source else ""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}[servers.{server}] must be a table, got {type(table).__name__}")
    fields = {field.alias or field.name: field for field in attrs.fields(cls) if field.init}
    extra_keys = extra_keys | (SERVER_BASE_KEYS - set(fields))
    unknown = sorted(set(table) - set(fields) - extra_keys)
    if unknown:
        raise ConfigError(
            f"{where}[servers.{server}] unknown key(s) {', '.join(map(repr, unknown))}; "
            f"expected one of: {', '.join(sorted(set(fields) | extra_keys))}"
        )
    values: dict[str, Any] = {}
    hints: dict[str, Any] | None = None
    for key, field in fields.items():
        if key not in table:
            continue
        if hints is None:  # evaluated only for a table that sets something: an empty one is most
            hints = typing.get_type_hints(cls)  # servers' at start-up, and each is an eval
        values[key] = _setting(table[key], hints.get(field.name, Any), field, f"{where}[servers.{server}] {key}")
    try:
        return typing.cast(_S, typing.cast(Any, cls)(**values))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where}[servers.{server}]: {exc}") from None


def _setting(value: Any, hint: Any, field: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        problems = []
        for option in options:
            try:
                return _setting(value, option, field, where)
            except ConfigError as exc:
                problems.append(str(exc).rpartition(": expected ")[2])
        raise ConfigError(f"{where}: expected {' or '.join(problems)}")
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed or isinstance(value, bool) != any(isinstance(a, bool) for a in allowed if a == value):
            raise ConfigError(f"{where}: expected one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    if origin is tuple:
        item = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected an array, got {value!r}")
        return tuple(_setting(v, item, field, f"{where}[{i}]") for i, v in enumerate(value))
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        number_ = as_integer(value)
        if number_ is None:
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return _bounded(number_, field, where)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return _bounded(float(value), field, where)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if hint is Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: expected a path (a string), got {value!r}")
        return Path(value)
    return value


def _bounded(value: float, field: Any, where: str) -> Any:
    low = field.metadata.get("min")
    high = field.metadata.get("max")
    if (low is not None and value < low) or (high is not None and value > high):
        wanted = " and ".join(
            part
            for part in (f"at least {low}" if low is not None else "", f"at most {high}" if high is not None else "")
            if part
        )
        raise ConfigError(f"{where}: expected a number {wanted}, got {value!r}")
    return value
