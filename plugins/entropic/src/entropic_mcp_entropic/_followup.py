"""followup: recall what earlier delegations found, from storage search."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolBase, ToolError, ToolResult, load_tool_definition
from entropic_mcp.storage import StorageError

from ._args import integer, invalid, require_object
from ._state import caller_scope, storage_of

RESULT_FIELDS = ("delegation_id", "target_tier", "task", "summary", "completed_at")


class FollowupTool(ToolBase):
    """``entropic.followup``: ``{"results": [...]}``; READ; never any directives."""

    definition = load_tool_definition(__package__, "followup")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "followup"))
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise invalid(
                "followup",
                '\'query\' is required: a non-empty string of words to look for (e.g. {"query": "cache invalidation"})',
            )
        max_results = integer(args, "max_results", "followup", default=3, minimum=1, maximum=10)
        storage = storage_of(ctx, "followup")
        try:
            found = storage.search_delegations(query.strip(), max_results, caller_scope(storage, ctx))
        except StorageError as exc:
            raise ToolError(
                "storage_unavailable",
                f"the delegation search failed: {exc}. Try again, or continue without earlier results.",
            ) from None
        results = [{field: row.get(field) for field in RESULT_FIELDS} for row in found[:max_results]]
        return ToolResult.json({"results": results})
