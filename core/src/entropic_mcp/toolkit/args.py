"""Argument readers: each raises ``ToolError("invalid_args", ...)`` saying what to send instead.

One rule for numbers: ``3.0`` is the integer 3 (JSON Schema counts it as one, so the schema check
lets it through), ``3.5`` is not an integer, and ``true``/``false`` are never numbers.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

from .._errors import ToolError
from .._server import normalize_args
from ._numbers import as_integer

__all__ = ["choice", "flag", "integer", "normalize_args", "number", "strings", "text"]


def _invalid(name: str, expected: str, value: object) -> ToolError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ToolError("invalid_args", f"'{name}' must be {expected}, got {shown}; fix the argument and call again")


def _require(name: str, expected: str, required: bool) -> None:
    """Raise when a ``required`` argument is absent (or null); return when it may be left out."""
    if required:
        raise ToolError("invalid_args", f"missing required argument '{name}' ({expected})")


@overload
def text(
    args: Mapping[str, Any],
    name: str,
    *,
    default: str,
    allow_empty: bool = ...,
    strip: bool = ...,
    max_length: int | None = ...,
) -> str: ...
@overload
def text(
    args: Mapping[str, Any],
    name: str,
    *,
    default: None = ...,
    required: Literal[True],
    allow_empty: bool = ...,
    strip: bool = ...,
    max_length: int | None = ...,
) -> str: ...
@overload
def text(
    args: Mapping[str, Any],
    name: str,
    *,
    default: None = ...,
    required: bool = ...,
    allow_empty: bool = ...,
    strip: bool = ...,
    max_length: int | None = ...,
) -> str | None: ...
def text(
    args: Mapping[str, Any],
    name: str,
    *,
    default: str | None = None,
    required: bool = False,
    allow_empty: bool = False,
    strip: bool = False,
    max_length: int | None = None,
) -> str | None:
    """A string argument: no NUL byte, valid Unicode (no lone surrogates), non-empty unless allowed.

    Args:
        args: the call's arguments.
        name: the argument's name.
        default: the value when the argument is absent or null.
        required: absent (with no default) is an error instead of None.
        allow_empty: accept ``""`` (after stripping, when ``strip``).
        strip: remove surrounding whitespace first.
        max_length: the most characters accepted.
    """
    value = args.get(name)
    if value is None:
        if default is not None:
            return default
        _require(name, "a string", required)
        return None
    if not isinstance(value, str):
        raise _invalid(name, "a string", value)
    if strip:
        value = value.strip()
    if not value and not allow_empty:
        raise ToolError("invalid_args", f"'{name}' must not be empty")
    if "\x00" in value:
        raise ToolError("invalid_args", f"'{name}' contains a NUL byte; remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("invalid_args", f"'{name}' contains characters that are not valid Unicode text") from None
    if max_length is not None and len(value) > max_length:
        raise ToolError("invalid_args", f"'{name}' is {len(value)} characters; at most {max_length} are accepted")
    return value


@overload
def integer(
    args: Mapping[str, Any], name: str, *, default: int, minimum: int | None = ..., maximum: int | None = ...
) -> int: ...
@overload
def integer(
    args: Mapping[str, Any],
    name: str,
    *,
    default: None = ...,
    required: bool = ...,
    minimum: int | None = ...,
    maximum: int | None = ...,
) -> int | None: ...
def integer(
    args: Mapping[str, Any],
    name: str,
    *,
    default: int | None = None,
    required: bool = False,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    """An integer argument within ``minimum``..``maximum`` (``3.0`` counts as 3; booleans never do)."""
    value = args.get(name)
    if value is None:
        if default is None:
            _require(name, "an integer", required)
        return default
    number_ = as_integer(value)
    if number_ is None:
        raise _invalid(name, "an integer", value)
    _check_bounds(name, number_, minimum, maximum)
    return number_


def number(
    args: Mapping[str, Any],
    name: str,
    *,
    default: float | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float | None:
    """A finite number argument (an int or a float; booleans are not numbers)."""
    value = args.get(name)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or value in (float("inf"), float("-inf"))
    ):
        raise _invalid(name, "a finite number", value)
    _check_bounds(name, value, minimum, maximum)
    return float(value)


def _check_bounds(name: str, value: float, minimum: float | None, maximum: float | None) -> None:
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        if minimum is not None and maximum is not None:
            bounds = f"between {minimum} and {maximum}"
        elif minimum is not None:
            bounds = f"at least {minimum}"
        else:
            bounds = f"at most {maximum}"
        raise ToolError("invalid_args", f"'{name}' must be {bounds}, got {value}")


def flag(args: Mapping[str, Any], name: str, *, default: bool = False) -> bool:
    """A boolean argument: ``true`` or ``false`` only (not 0/1, not "yes")."""
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid(name, "true or false", value)
    return value


_C = TypeVar("_C", bound=str)


def choice(args: Mapping[str, Any], name: str, options: Sequence[_C], *, default: _C) -> _C:
    """One of ``options`` (strings), or ``default`` when absent."""
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, str) or value not in options:
        raise _invalid(name, f"one of {', '.join(map(repr, options))}", value)
    return typing.cast(_C, value)


def strings(
    args: Mapping[str, Any],
    name: str,
    *,
    required: bool = False,
    allow_empty_list: bool = True,
    max_items: int | None = None,
) -> list[str]:
    """A list of non-empty strings (each checked as ``text`` does); ``[]`` when absent."""
    value = args.get(name)
    if value is None:
        _require(name, "a list of strings", required)
        return []
    if not isinstance(value, list):
        raise _invalid(name, "a list of strings", value)
    if not value and not allow_empty_list:
        raise ToolError("invalid_args", f"'{name}' must list at least one string")
    if max_items is not None and len(value) > max_items:
        raise ToolError("invalid_args", f"'{name}' lists {len(value)} items; at most {max_items} are accepted")
    out = []
    for index, item in enumerate(value):
        checked = text({f"{name}[{index}]": item}, f"{name}[{index}]", required=True)
        out.append(checked)
    return out
