"""delegate, pipeline, resume_delegation: validate the request, return the directive the host runs."""

from __future__ import annotations

import copy
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolBase, ToolDefinition, ToolError, ToolResult, load_tool_definition
from entropic_mcp.directives import Delegate, Pipeline, StopProcessing
from entropic_mcp.storage import StorageError

from ._args import file_context, integer, invalid, require_object, text
from ._state import caller_scope, storage_of
from ._tiers import Tiers


def definition_with_tiers(tool: str, tiers: Tiers) -> ToolDefinition:
    """The JSON definition with the tier enums and the ``max_turns`` cap filled in from config."""
    base = load_tool_definition(__package__, tool)
    schema: dict[str, Any] = copy.deepcopy(dict(base.input_schema))
    props = schema["properties"]
    names = list(tiers.names)
    if "target" in props:
        props["target"]["enum"] = names
    if "stages" in props:
        props["stages"]["items"]["enum"] = names
    if "max_turns" in props:
        props["max_turns"]["maximum"] = tiers.max_turns_limit
    return ToolDefinition(
        name=base.name,
        description=base.description,
        input_schema=schema,
        title=base.title,
        output_schema=base.output_schema,
    )


class _TierTool(ToolBase):
    required_access_level = AccessLevel.WRITE
    # Handing work to another tier waits for the turn's other calls (their results go along).
    runs_last = True
    capabilities = frozenset({"delegate"})
    idempotent = False
    destructive = False
    tool_name = ""

    def __init__(self, tiers: Tiers) -> None:
        super().__init__(definition_with_tiers(self.tool_name, tiers))
        self.tiers = tiers

    def max_turns(self, args: dict[str, Any]) -> int:
        return integer(args, "max_turns", self.tool_name, default=-1, minimum=1, maximum=self.tiers.max_turns_limit)


class DelegateTool(_TierTool):
    """``entropic.delegate``: one child conversation on another tier."""

    tool_name = "delegate"

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "delegate"))
        target = text(args, "target", "delegate", required=True)
        task = text(args, "task", "delegate", required=True)
        assert target is not None and task is not None
        self.tiers.check_known(target, "delegate", "target")
        max_turns = self.max_turns(args)
        context = file_context(args, "delegate")
        self.tiers.check_not_self(target, ctx.identity, "delegate")
        self.tiers.check_context(target, context, "delegate")
        return ToolResult.json(
            {
                "status": "delegating",
                "target": target,
                "task": task,
                "max_turns": max_turns,
                "context_files": [c["path"] for c in context],
                "next": f"The host now runs '{target}'; its summary comes back to you when it completes.",
            },
            directives=[Delegate(target=target, task=task, max_turns=max_turns, context=context), StopProcessing()],
        )


class PipelineTool(_TierTool):
    """``entropic.pipeline``: stages run in order, each fed the previous output."""

    tool_name = "pipeline"

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "pipeline"))
        stages = args.get("stages")
        if not isinstance(stages, list) or not all(isinstance(s, str) for s in stages):
            raise invalid("pipeline", "'stages' must be a list of tier names")
        stages = [s.strip() for s in stages]
        # The order is the contract: too few stages, then an unknown stage, then a stage needing context.
        if len(stages) < 2:
            raise invalid(
                "pipeline",
                f"a pipeline needs at least 2 stages, got {len(stages)}; use entropic.delegate for a single tier",
            )
        for index, stage in enumerate(stages):
            self.tiers.check_known(stage, "pipeline", f"stages.{index}")
        task = text(args, "task", "pipeline", required=True)
        assert task is not None
        context = file_context(args, "pipeline")
        for stage in stages:
            self.tiers.check_context(stage, context, "pipeline", "stages")
        for stage in stages:
            self.tiers.check_not_self(stage, ctx.identity, "pipeline")
        return ToolResult.json(
            {
                "status": "pipeline",
                "stages": stages,
                "task": task,
                "context_files": [c["path"] for c in context],
                "next": "The host now runs the stages in order; the last stage's summary comes back to you.",
            },
            directives=[Pipeline(stages=stages, task=task, context=context), StopProcessing()],
        )


class ResumeDelegationTool(_TierTool):
    """``entropic.resume_delegation``: a new child seeded with an earlier child's messages."""

    tool_name = "resume_delegation"

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "resume_delegation"))
        task = text(args, "task", "resume_delegation", required=True)
        delegation_id = text(args, "delegation_id", "resume_delegation")
        target = text(args, "target", "resume_delegation")
        max_turns = self.max_turns(args)
        assert task is not None
        if delegation_id is None and target is None:
            raise invalid(
                "resume_delegation",
                "give delegation_id (from entropic.followup) or target (resumes "
                "the latest completed delegation to that tier)",
            )
        if target is not None:
            self.tiers.check_known(target, "resume_delegation", "target")
        storage = storage_of(ctx, "resume_delegation")
        try:
            scope = caller_scope(storage, ctx)
        except StorageError as exc:
            raise ToolError(
                "storage_unavailable",
                f"could not look up this conversation's delegations: {exc}. Try again later.",
            ) from None
        if delegation_id is None:
            assert target is not None
            try:
                delegation_id = storage.latest_delegation_for_target(target, scope)
            except StorageError as exc:
                raise ToolError(
                    "storage_unavailable",
                    f"could not look up delegations to '{target}': {exc}. "
                    "Try again later or start a new entropic.delegate.",
                ) from None
            if not delegation_id:
                raise ToolError(
                    "no_completed_delegation",
                    f"there is no completed delegation to '{target}' to resume. Use entropic.delegate "
                    "to start one, or entropic.followup to find another delegation's id.",
                    target=target,
                )
        try:
            record = storage.load_delegation_with_messages(delegation_id)
            if record.get("scope", scope) != scope:
                # Another tenant's delegation: answered exactly like an unknown id, so its existence
                # is not disclosed either.
                raise StorageError(
                    f"unknown delegation {delegation_id!r}; it was never created or its conversation was deleted"
                )
        except StorageError as exc:
            raise ToolError(
                "unknown_delegation",
                f"delegation '{delegation_id}' could not be loaded ({exc}). Find the id with "
                "entropic.followup, or resume by target instead.",
                delegation_id=delegation_id,
            ) from None
        record_target = str(record.get("target_tier", ""))
        if target is not None and record_target != target:
            raise invalid(
                "resume_delegation",
                f"delegation '{delegation_id}' went to '{record_target}', not "
                f"'{target}'; give only one of delegation_id and target",
            )
        if record.get("status") == "running":
            raise ToolError(
                "delegation_running",
                f"delegation '{delegation_id}' to '{record_target}' is still running; wait for its "
                "summary, then resume it.",
                delegation_id=delegation_id,
            )
        if record_target not in self.tiers.names:
            raise ToolError(
                "unknown_tier",
                f"delegation '{delegation_id}' went to '{record_target}', which is no longer a configured "
                f"tier ({', '.join(self.tiers.names)}); start a new entropic.delegate instead.",
                valid_tiers=list(self.tiers.names),
            )
        self.tiers.check_not_self(record_target, ctx.identity, "resume_delegation")
        messages = record.get("messages") or []
        return ToolResult.json(
            {
                "status": "resuming",
                "delegation_id": delegation_id,
                "target": record_target,
                "task": task,
                "max_turns": max_turns,
                "prior_messages": len(messages),
                "prior_summary": record.get("summary") or "",
                "next": f"The host now runs '{record_target}' again with its earlier conversation.",
            },
            directives=[Delegate(target=record_target, task=task, max_turns=max_turns, resume_from=delegation_id)],
        )
