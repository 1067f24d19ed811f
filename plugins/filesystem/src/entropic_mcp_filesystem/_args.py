"""File text as an argument: what ``entropic_mcp.toolkit.text`` would refuse but a file may hold.

Every other argument is read with the toolkit's readers. ``content``, ``old_string`` and
``new_string`` are the file's own text, where a NUL byte is data (``write_file`` writes it and
the file then reads as binary), so only the type and valid Unicode are checked here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entropic_mcp import ToolError


def file_text(args: Mapping[str, Any], name: str) -> str:
    """A required string argument holding file text (may be empty, may hold NUL bytes)."""
    value = args.get(name)
    if value is None:
        raise ToolError("invalid_args", f"missing required argument '{name}' (a string)")
    if not isinstance(value, str):
        raise ToolError("invalid_args", f"'{name}' must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("invalid_args", f"'{name}' contains characters that are not valid Unicode text") from None
    return value
