"""A plugin whose hook name is misspelled, marked optional so the host's unknown-hook check passes it."""

from __future__ import annotations

from typing import Any

from entropic_mcp import hookimpl


@hookimpl(optionalhook=True)
def entropic_mcp_permision_pattern(server: Any, tool: str, args: Any) -> str | None:
    return None
