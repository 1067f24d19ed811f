"""A server for the tracing tests (test_tracing.py), importable without OpenTelemetry."""

from __future__ import annotations

import os
from typing import Any

from entropic_mcp import AccessLevel, CallContext, MCPServerBase, ToolBase, ToolDefinition

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


class Echo(ToolBase):
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        return args["text"]


class Shell(ToolBase):
    """Runs ``true`` through the toolkit's process runner (what bash and git use)."""

    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        from entropic_mcp.toolkit import run_process

        done = await run_process(["true"], cwd=os.getcwd(), timeout=30)
        return f"exit {done.exit_code}"


class Note(ToolBase):
    required_access_level = AccessLevel.WRITE

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        return "noted"


class Traced(MCPServerBase):
    name = "traced"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.register_tool(Echo(ToolDefinition(name="echo", description="echo", input_schema=SCHEMA)))
        self.register_tool(Shell(ToolDefinition(name="shell", description="run true", input_schema={"type": "object"})))
        self.register_tool(Note(ToolDefinition(name="note", description="write", input_schema={"type": "object"})))
