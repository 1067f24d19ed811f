"""A pipeline outcome as an MCP ``CallToolResult`` (wire dict)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from .._pipeline import CallOutcome

DIRECTIVES_KEY = "entropic-mcp/directives"
KIND_KEY = "entropic-mcp/kind"
CONVERSATION_KEY = "entropic-mcp/conversation"


def call_result(outcome: CallOutcome) -> dict[str, Any]:
    """One text block with the envelope's result, ``isError``, structured content for objects, ``_meta``."""
    response = outcome.response
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": response.result}],
        "isError": response.is_error,
        "_meta": {
            DIRECTIVES_KEY: [directive.to_dict() for directive in response.directives],
            KIND_KEY: outcome.kind,
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
