"""What every filesystem tool shares: a handle on its server, MCP hints, the truncation entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import orjson
from entropic_mcp import ToolBase, ToolDefinition

if TYPE_CHECKING:
    from ._server import FilesystemServer


class FilesystemTool(ToolBase):
    """A tool of the filesystem server; ``self.fs`` is the server (root, settings, tracker)."""

    open_world: ClassVar[bool | None] = False

    def __init__(self, fs: FilesystemServer) -> None:
        super().__init__()
        self.fs = fs


def truncation(note: str, next_offset: int | None = None) -> dict[str, Any]:
    """The final entry of a cut-short list result (with where the next page starts, if given)."""
    if next_offset is None:
        return {"truncated": True, "note": note}
    return {"truncated": True, "note": note, "next_offset": next_offset}


def walk_note(limit: int, what: str) -> str:
    return (
        f"the walk stopped after {limit} entries (max_walk_entries) before {what} was complete; "
        "narrow the search with 'path' (a sub-directory) or a more specific pattern"
    )


def fit_list(results: list[Any], cap: int, note: str, *, offset: int | None = None) -> list[Any]:
    """``results`` cut (from the end) so that their JSON fits ``cap`` bytes, with a final note.

    ``offset``: where this page of entries started; the note then carries ``next_offset``, the
    first entry cut (notes, dictionaries without a ``path``, are not entries).
    """
    if not cap or len(orjson.dumps(results)) <= cap:
        return results
    items = results[:-1] if results and isinstance(results[-1], dict) and results[-1].get("truncated") else results
    text = f"the result was cut to fit max_result_bytes ({cap} bytes); {note}"

    def marker(kept: int) -> dict[str, Any]:
        entry = truncation(text)
        if offset is not None:
            entry["next_offset"] = offset + sum(
                1 for item in items[:kept] if not (isinstance(item, dict) and "path" not in item)
            )
        return entry

    low, high = 0, len(items)
    while low < high:
        middle = (low + high + 1) // 2
        if len(orjson.dumps([*items[:middle], marker(middle)])) <= cap:
            low = middle
        else:
            high = middle - 1
    return [*items[:low], marker(low)]


def described(definition: ToolDefinition, settings: Any) -> ToolDefinition:
    """``definition`` with each ``${key}`` in its descriptions replaced by the setting's value
    (numbers with thousands separators), so a model reads "2,000 lines", not a config key."""
    import attrs

    if "${" not in definition.description and "${" not in orjson.dumps(definition.input_schema).decode():
        return definition
    from string import Template

    values = {
        field.name: f"{value:,}"
        if isinstance(value, int) and not isinstance(value, bool)
        else str(value).lower()
        if isinstance(value, bool)  # as the model would write it in the arguments
        else str(value)
        for field in attrs.fields(type(settings))
        for value in [getattr(settings, field.name)]
    }
    read_bytes = getattr(settings, "max_read_bytes", None)
    if isinstance(read_bytes, int):  # the page size a reader really gets by default
        from ._settings import READ_RESULT_BYTES

        values["read_page_bytes"] = f"{min(read_bytes, READ_RESULT_BYTES):,}"

    def render(node: Any) -> Any:
        if isinstance(node, str):
            return Template(node).substitute(values)
        if isinstance(node, dict):
            return {
                key: render(value) if key == "description" or isinstance(value, dict) else value
                for key, value in node.items()
            }
        return node

    return attrs.evolve(
        definition, description=render(definition.description), input_schema=render(dict(definition.input_schema))
    )
