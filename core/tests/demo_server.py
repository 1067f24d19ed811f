"""A small server of tools with known behaviour, shared by the core's tests."""

from __future__ import annotations

import time

import anyio
from entropic_mcp import AccessLevel, MCPServerBase, ToolBase, ToolDefinition, ToolResult


def definition(name, properties=None, required=()):
    return ToolDefinition(
        name=name,
        description=f"the {name} tool",
        input_schema={
            "type": "object",
            "properties": properties or {},
            "required": list(required),
            "additionalProperties": False,
        },
    )


class Echo(ToolBase):
    definition = definition("echo", {"text": {"type": "string"}, "n": {"type": "integer"}}, ["text"])
    required_access_level = AccessLevel.READ

    async def execute(self, args, ctx):
        self.server.runs.append(("echo", dict(args), ctx.conversation_id))
        return args["text"] + getattr(self, "suffix", "")

    def anchor_key(self, args):
        return f"echo:{args.get('text')}"


class Write(ToolBase):
    definition = definition(
        "write", {"path": {"type": "string"}, "status": {"enum": ["pending", "in_progress", "completed"]}}, ["path"]
    )

    def execute(self, args, ctx):
        self.server.runs.append(("write", dict(args), ctx.conversation_id))
        return ToolResult.json({"written": args["path"]})


class Fail(ToolBase):
    definition = definition("fail", {"x": {"type": "integer"}, "code": {"type": "string"}})
    required_access_level = AccessLevel.READ

    def execute(self, args, ctx):
        self.server.runs.append(("fail", dict(args), ctx.conversation_id))
        return ToolResult.error(args.get("code", "broken"), "this tool always fails")


class Boom(ToolBase):
    definition = definition("boom")

    def execute(self, args, ctx):
        raise RuntimeError("kaboom")

    def anchor_key(self, args):
        return "boom"


class Slow(ToolBase):
    definition = definition("slow", {"seconds": {"type": "number"}})
    required_access_level = AccessLevel.READ

    async def execute(self, args, ctx):
        ctx.partial = "started"
        await anyio.sleep(args.get("seconds", 30))
        return "finished"


class SlowSync(ToolBase):
    definition = definition("slow_sync", {"seconds": {"type": "number"}})
    required_access_level = AccessLevel.READ

    def execute(self, args, ctx):
        end = time.monotonic() + args.get("seconds", 30)
        while time.monotonic() < end:
            if ctx.cancelled.wait(0.01):
                self.server.runs.append(("slow_sync_cancelled", {}, ctx.conversation_id))
                return "cancelled"
        return "finished"


class Big(ToolBase):
    definition = definition("big", {"size": {"type": "integer"}})
    required_access_level = AccessLevel.READ

    def execute(self, args, ctx):
        return "é" * args.get("size", 100_000)


class Empty(ToolBase):
    definition = definition("empty")
    required_access_level = AccessLevel.READ

    def execute(self, args, ctx):
        return "[]"


class DemoServer(MCPServerBase):
    name = "demo"
    default_timeout_seconds = 5.0

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.runs = []
        for tool in (Echo(), Write(), Fail(), Boom(), Slow(), SlowSync(), Big(), Empty()):
            tool.server = self
            self.register_tool(tool)

    def permission_pattern(self, tool_name, args):
        if tool_name == "write":
            return f"demo.write:{args.get('path', '')}"
        return super().permission_pattern(tool_name, args)


class OtherServer(MCPServerBase):
    name = "other"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        tool = Echo()
        tool.server = self
        self.runs = []
        self.register_tool(tool)
