"""Reading tool arguments defensively: tools also run without the pipeline's schema check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entropic_mcp import ToolError


def text(args: Mapping[str, Any], name: str, *, default: str | None = None, allow_empty: bool = False) -> str:
    value = args.get(name, default)
    if value is None:
        raise ToolError("invalid_args", f"'{name}' is required (a string)")
    if not isinstance(value, str):
        raise ToolError("invalid_args", f"'{name}' must be a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise ToolError("invalid_args", f"'{name}' must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("invalid_args", f"'{name}' contains characters that are not valid Unicode text") from None
    return value


def integer(
    args: Mapping[str, Any], name: str, *, default: int | None, minimum: int = 0, maximum: int | None = None
) -> int | None:
    value = args.get(name, default)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError("invalid_args", f"'{name}' must be an integer, got {value!r:.40}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ToolError("invalid_args", f"'{name}' must be {bound}, got {value}")
    return value


def flag(args: Mapping[str, Any], name: str, *, default: bool = False) -> bool:
    value = args.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError("invalid_args", f"'{name}' must be true or false, got {value!r:.40}")
    return value


def choice(args: Mapping[str, Any], name: str, options: tuple[str, ...], *, default: str) -> str:
    value = args.get(name, default)
    if value is None:
        return default
    if value not in options:
        raise ToolError("invalid_args", f"'{name}' must be one of {', '.join(options)}, got {value!r:.40}")
    return str(value)
