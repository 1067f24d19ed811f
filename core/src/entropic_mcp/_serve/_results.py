"""A pipeline outcome as an MCP ``CallToolResult`` (wire dict)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

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


def call_result(outcome: CallOutcome, rename: Callable[[str], str] | None = None) -> dict[str, Any]:
    """One text block with the envelope's result, ``isError``, structured content for objects, ``_meta``.

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
    structured = response.structured
    if structured is None and response.result[:1] == "{":
        try:
            parsed = orjson.loads(response.result)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            structured = parsed
    if isinstance(structured, Mapping):
        result["structuredContent"] = dict(structured)
    return result
