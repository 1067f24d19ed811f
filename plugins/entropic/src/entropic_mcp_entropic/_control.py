"""complete, phase_change, prune_context: the directives that steer the host's loop."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolBase, ToolError, ToolResult, load_tool_definition
from entropic_mcp.directives import Complete, PhaseChange, PruneMessages, StopProcessing

from ._args import boolean, integer, require_object, strings, text


class CompleteTool(ToolBase):
    """``entropic.complete``: the task is done; ``complete`` + ``stop_processing``."""

    definition = load_tool_definition(__package__, "complete")
    required_access_level = AccessLevel.WRITE
    destructive = False

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "complete"))
        summary = text(args, "summary", "complete", required=True)
        coverage_gap = boolean(args, "coverage_gap", "complete")
        gap = text(args, "gap_description", "complete") or ""
        files = strings(args, "suggested_files", "complete")
        assert summary is not None
        if coverage_gap and not gap:
            raise ToolError(
                "missing_gap_description",
                "coverage_gap is true but gap_description is missing: say what was not covered and "
                "why, then call 'entropic.complete' again.",
            )
        data = {
            "status": "complete",
            "summary": summary,
            "coverage_gap": coverage_gap,
            "gap_description": gap,
            "suggested_files": files,
        }
        return ToolResult.json(
            data,
            directives=[
                Complete(summary=summary, coverage_gap=coverage_gap, gap_description=gap, suggested_files=files),  # type: ignore[arg-type]
                StopProcessing(),
            ],
        )


class PhaseChangeTool(ToolBase):
    """``entropic.phase_change``: switch the inference phase."""

    definition = load_tool_definition(__package__, "phase_change")
    required_access_level = AccessLevel.WRITE
    destructive = False
    idempotent = True

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "phase_change"))
        phase = text(args, "phase", "phase_change", required=True)
        assert phase is not None
        return ToolResult.json({"status": "phase_change", "phase": phase}, directives=[PhaseChange(phase=phase)])


class PruneContextTool(ToolBase):
    """``entropic.prune_context``: old tool results become stubs."""

    definition = load_tool_definition(__package__, "prune_context")
    required_access_level = AccessLevel.WRITE
    destructive = True
    idempotent = True
    #: Only a host holding the conversation does anything with it: serve lists it only for
    #: clients declaring the entropic-mcp/directives extension.
    capabilities = frozenset({"host_context"})

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "prune_context"))
        keep = integer(args, "keep_recent", "prune_context", default=2, minimum=0, maximum=1000)
        return ToolResult.json(
            {"status": "prune_messages", "keep_recent": keep}, directives=[PruneMessages(keep_recent=keep)]
        )
