"""Argument checks shared by the tools: each failure is an ``invalid_args`` ToolError saying how to fix it.

The pipeline validates arguments against the schema before a tool runs, but a server can be
executed directly (``server.execute(...)``), so every tool checks what it uses itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entropic_mcp import ToolError


def invalid(tool: str, message: str) -> ToolError:
    return ToolError("invalid_args", f"{message}. Fix the arguments of 'entropic.{tool}' and call it again.")


def require_object(args: object, tool: str) -> Mapping[str, Any]:
    if not isinstance(args, Mapping):
        raise invalid(tool, f"arguments must be a JSON object, got {type(args).__name__}")
    return args


def text(args: Mapping[str, Any], name: str, tool: str, *, required: bool = False) -> str | None:
    """A non-blank string argument (stripped), or None when absent and optional."""
    value = args.get(name)
    if value is None:
        if required:
            raise invalid(tool, f"Missing required argument: {name}")
        return None
    if not isinstance(value, str):
        raise invalid(tool, f"'{name}' must be a string, got {type(value).__name__}")
    value = value.strip()
    if not value:
        if required:
            raise invalid(tool, f"'{name}' must not be empty")
        return None
    return value


def integer(
    args: Mapping[str, Any], name: str, tool: str, *, default: int, minimum: int, maximum: int | None = None
) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema counts 3.0 as an integer, so the pipeline lets it through
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(tool, f"'{name}' must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise invalid(tool, f"'{name}' must be {bounds}, got {value}")
    return value


def boolean(args: Mapping[str, Any], name: str, tool: str, *, default: bool = False) -> bool:
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(tool, f"'{name}' must be true or false, got {value!r}")
    return value


def strings(args: Mapping[str, Any], name: str, tool: str) -> list[str]:
    value = args.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(tool, f"'{name}' must be a list of strings")
    return [v for v in (s.strip() for s in value) if v]


def file_context(args: Mapping[str, Any], tool: str) -> list[dict[str, str]]:
    """``context`` as ``[{path, lines, note}]`` (every key present); entries need a non-empty path."""
    value = args.get("context")
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(tool, "'context' must be a list of {path, lines?, note?} objects")
    entries = []
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise invalid(tool, f"context[{index}] must be an object with a 'path'")
        path = item.get("path")
        if not isinstance(path, str) or not path.strip():
            raise invalid(tool, f"context[{index}] needs a non-empty 'path'")
        entry = {"path": path.strip(), "lines": "", "note": ""}
        for key in ("lines", "note"):
            extra = item.get(key)
            if extra is None:
                continue
            if not isinstance(extra, str):
                raise invalid(tool, f"context[{index}].{key} must be a string")
            entry[key] = extra.strip()
        unknown = sorted(set(item) - {"path", "lines", "note"})
        if unknown:
            raise invalid(
                tool, f"context[{index}] has unknown key(s) {', '.join(map(repr, unknown))}; allowed: path, lines, note"
            )
        entries.append(entry)
    return entries
