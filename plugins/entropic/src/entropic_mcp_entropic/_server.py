"""EntropicServer: the orchestration tools, wired to the tiers of ``[servers.entropic]``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from entropic_mcp import AccessLevel, CallContext, MCPServerBase
from entropic_mcp.storage import StateStore

from ._control import CompleteTool, PhaseChangeTool, PruneContextTool
from ._delegation_tools import DelegateTool, PipelineTool, ResumeDelegationTool
from ._followup import FollowupTool
from ._inspection import ContextInspectTool, DiagnoseTool, InspectTool
from ._tiers import Tiers
from ._todo import TodoLists, TodoTool

DELEGATION_TOOLS = ("delegate", "pipeline", "resume_delegation")
NO_TIERS = (
    'no tiers configured: set [servers.entropic] tiers = ["lead", "researcher", ...] in entropic-mcp.toml '
    "to name the tiers a conversation can delegate to"
)


class EntropicServer(MCPServerBase):
    """Delegation, pipelines, follow-up recall, todo, completion and the engine's state.

    The delegation tools exist only when tiers are configured; ``unavailable_tools()`` says why
    they are missing otherwise.
    """

    name: ClassVar[str] = "entropic"
    config_keys: ClassVar[frozenset[str]] = frozenset(
        {"tiers", "requires_context", "max_turns_limit", "profiles", "delegation_deadline", "without_sampling"}
    )

    def __init__(self, name: str | None = None, *, root: str | Path | None = None) -> None:
        super().__init__(name, root=root)
        self.todo_lists = TodoLists()
        self.tiers = Tiers()
        self._register_tools()

    def _register_tools(self) -> None:
        # configure() runs after construction and changes the tier enums, so the whole set is
        # rebuilt in the documented order rather than patched.
        self._tools = {}
        if self.tiers.names:
            for tool_class in (DelegateTool, PipelineTool, ResumeDelegationTool):
                self.register_tool(tool_class(self.tiers))
        self.register_tool(FollowupTool())
        self.register_tool(TodoTool(self.todo_lists))
        self.register_tool(CompleteTool())
        self.register_tool(PhaseChangeTool())
        self.register_tool(PruneContextTool())
        self.register_tool(DiagnoseTool(self))
        self.register_tool(InspectTool(self))
        self.register_tool(ContextInspectTool(self))

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.tiers = Tiers.from_config(config)
        self._register_tools()

    def unavailable_tools(self) -> dict[str, str]:
        """Tools this server would offer but does not, with the reason (for ``entropic-mcp tools``)."""
        if self.tiers.names:
            return {}
        return {tool: NO_TIERS for tool in DELEGATION_TOOLS}

    def sampling_plan(self) -> dict[str, Any]:
        """How ``entropic-mcp serve`` runs this server's delegations through the client's sampling.

        ``{"tiers": {tier: profile}, "deadline": seconds, "without_sampling": "hide" | "directives"}``
        (see docs/plugins/entropic.md, "Delegation under serve").
        """
        return self.tiers.sampling_plan()

    def skip_duplicate_check(self, tool_name: str) -> bool:
        # Every WRITE tool here only returns directives: a repeat is a new request to the host
        # (delegate again, re-add an item, switch back a phase), never a loop to cut short.
        tool = self.get_tool(tool_name)
        return tool is not None and tool.required_access_level >= AccessLevel.WRITE

    def end_conversation(self, conversation_id: str) -> None:
        self.todo_lists.release(conversation_id)

    def conversation_ended(self, ctx: CallContext) -> None:
        # The list may live in the store (shared by every worker): delete it there too — if the
        # store is open; a process that never opened it has stored no list of its own.
        store = ctx.services.storage_if_open
        self.todo_lists.release(ctx.conversation_id, store if isinstance(store, StateStore) else None)
