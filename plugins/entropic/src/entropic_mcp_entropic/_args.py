"""Argument checks shared by the tools: each failure is an ``invalid_args`` ToolError saying how to fix it.

The pipeline validates arguments against the schema before a tool runs, but a tool can be
executed directly, so every tool checks what it uses itself. Strings, integers, flags and choices
are read with ``entropic_mcp.toolkit`` (one rule for every plugin: ``3.0`` is the integer 3,
``3.5`` and booleans are not; no NUL bytes or lone surrogates in text); its errors get this
plugin's wording, naming the tool to call again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from entropic_mcp import ToolError, toolkit

#: The toolkit's own recovery hint; ``invalid`` says it with the tool's name instead.
_TOOLKIT_HINT = "; fix the argument and call again"


def invalid(tool: str, message: str) -> ToolError:
    return ToolError("invalid_args", f"{message}. Fix the arguments of 'entropic.{tool}' and call it again.")


@contextmanager
def _worded(tool: str) -> Iterator[None]:
    """A toolkit reader's ``invalid_args`` error, reworded as ``invalid`` words it."""
    try:
        yield
    except ToolError as exc:
        if exc.code != "invalid_args":
            raise
        raise invalid(tool, exc.message.removesuffix(_TOOLKIT_HINT)) from None


def require_object(args: object, tool: str) -> Mapping[str, Any]:
    if not isinstance(args, Mapping):
        raise invalid(tool, f"arguments must be a JSON object, got {type(args).__name__}")
    return args


def text(args: Mapping[str, Any], name: str, tool: str, *, required: bool = False) -> str | None:
    """A non-blank string argument (stripped), or None when absent, or blank and optional."""
    with _worded(tool):
        value = toolkit.text(args, name, required=required, strip=True, allow_empty=not required)
    return value or None


def integer(
    args: Mapping[str, Any], name: str, tool: str, *, default: int, minimum: int, maximum: int | None = None
) -> int:
    """An integer argument within the bounds (``3.0`` counts as 3), or ``default`` when absent."""
    with _worded(tool):
        return toolkit.integer(args, name, default=default, minimum=minimum, maximum=maximum)


def boolean(args: Mapping[str, Any], name: str, tool: str, *, default: bool = False) -> bool:
    with _worded(tool):
        return toolkit.flag(args, name, default=default)


def choice(
    args: Mapping[str, Any], name: str, tool: str, options: Sequence[str], *, required: bool = False
) -> str | None:
    """One of ``options``, or None when absent and optional."""
    if args.get(name) is None:
        if required:
            raise invalid(tool, f"missing required argument '{name}' (one of {', '.join(map(repr, options))})")
        return None
    with _worded(tool):
        return toolkit.choice(args, name, options, default=options[0])


def strings(args: Mapping[str, Any], name: str, tool: str) -> list[str]:
    """A list of strings, each stripped; blank entries are dropped (``toolkit.strings`` refuses them)."""
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
