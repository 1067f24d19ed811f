"""``tools/list``: the manager's tools in a fixed order, cut into pages once and served from memory."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from ._names import ToolNames

#: How long (ms) a 2026-07-28 client may cache the listing: the tools only change when serve restarts.
LIST_TTL_MS = 60_000


class InvalidCursor(ValueError):
    """A ``cursor`` this server did not hand out."""


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"entropic-mcp:{offset}".encode()).decode().rstrip("=")


def _offset(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, number = text.partition(":")
        if prefix != "entropic-mcp" or not number.isdigit():
            raise ValueError(cursor)
        return int(number)
    except (ValueError, UnicodeDecodeError):
        raise InvalidCursor(f"invalid cursor {cursor[:64]!r}: pass back a nextCursor from tools/list") from None


class Listing:
    """Deterministic pages of MCP tool objects with wire names."""

    def __init__(self, tools: Sequence[Mapping[str, Any]], names: ToolNames, page_size: int) -> None:
        self.names = names
        self.page_size = max(1, page_size)
        ordered = sorted(tools, key=lambda tool: tool["name"])
        self.tools = [
            {
                **tool,
                "name": names.to_exposed[tool["name"]],
                "description": names.rename_mentions(tool.get("description", "")),
            }
            for tool in ordered
        ]
        self.schemas = {tool["name"]: tool.get("inputSchema") for tool in self.tools}
        self._pages: dict[int, dict[str, Any]] = {}
        for offset in range(0, max(len(self.tools), 1), self.page_size):
            page: dict[str, Any] = {"tools": self.tools[offset : offset + self.page_size]}
            if offset + self.page_size < len(self.tools):
                page["nextCursor"] = _cursor(offset + self.page_size)
            self._pages[offset] = page

    def page(self, cursor: str | None) -> dict[str, Any]:
        """The page a cursor points at (the first for None); raises InvalidCursor."""
        offset = 0 if cursor is None else _offset(cursor)
        page = self._pages.get(offset)
        if page is None:
            raise InvalidCursor(f"invalid cursor {cursor!r}: pass back a nextCursor from tools/list")
        return page

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        return self.schemas.get(name)
