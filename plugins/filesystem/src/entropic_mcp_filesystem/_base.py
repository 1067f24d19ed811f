"""What every filesystem tool shares: a handle on its server, MCP hints, the truncation entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from entropic_mcp import ToolBase

if TYPE_CHECKING:
    from ._server import FilesystemServer


class FilesystemTool(ToolBase):
    """A tool of the filesystem server; ``self.fs`` is the server (root, settings, tracker)."""

    open_world: ClassVar[bool | None] = False

    def __init__(self, fs: FilesystemServer) -> None:
        super().__init__()
        self.fs = fs


def truncation(note: str) -> dict[str, Any]:
    """The final entry of a cut-short list result."""
    return {"truncated": True, "note": note}


def walk_note(limit: int, what: str) -> str:
    return (f"the walk stopped after {limit} entries (max_walk_entries) before {what} was complete; "
            "narrow the search with 'path' (a sub-directory) or a more specific pattern")

