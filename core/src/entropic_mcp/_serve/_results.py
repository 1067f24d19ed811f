"""A pipeline outcome as an MCP ``CallToolResult`` (wire dict)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._envelope import structured_object
from .._pipeline import CallOutcome

DIRECTIVES_KEY = "entropic-mcp/directives"
KIND_KEY = "entropic-mcp/kind"
CONVERSATION_KEY = "entropic-mcp/conversation"


def _wire_directive(directive: Any, result: str) -> dict[str, Any]:
    """A directive for ``_meta``; an anchor of the result itself says so instead of a second copy."""
    data = directive.to_dict()
    if data.get("type") == "context_anchor" and data.get("content") == result and result:
        del data["content"]
        data["content_from"] = "result"
    return data


def call_result(
    outcome: CallOutcome,
    rename: Callable[[str], str] | None = None,
    *,
    declared: bool = False,
    every_object: bool = False,
) -> dict[str, Any]:
    """One text block with the envelope's result, ``isError``, ``_meta``; ``structuredContent`` when due.

    The result goes over the wire once, as text: the form every client reads. A JSON object
    result is also sent as ``structuredContent`` when the tool declares an ``outputSchema``
    (``declared``; MCP's rule, the text block carrying the same JSON for clients that read only
    text) and succeeded — a failure's object is no instance of the schema — or, with
    ``every_object`` (``[serve] structured_content = "json"``), whenever it is one.

    ``rename`` rewrites tool names in error messages to the names the client calls.
    """
    response = outcome.response
    text = response.result
    if rename is not None and response.is_error:
        text = rename(text)
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": text}, *(dict(block) for block in response.content)],
        "isError": response.is_error,
        "_meta": {
            DIRECTIVES_KEY: [_wire_directive(directive, response.result) for directive in response.directives],
            KIND_KEY: str(outcome.kind),
        },
    }
    if every_object or (declared and not response.is_error):
        renamed = text != response.result  # an error whose tool names were renamed: the same words in both
        data = structured_object(None if renamed else response.structured, text)
        if data is not None:
            result["structuredContent"] = data
    return result
