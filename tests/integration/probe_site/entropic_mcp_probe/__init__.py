"""A small server for the serve integration tests: every behaviour serve must carry, without the real plugins."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from entropic_mcp import AccessLevel, MCPServerBase, ToolBase, ToolError, ToolResult, hookimpl, load_tool_definition
from entropic_mcp.directives import NotifyPresenter

__all__ = ["ProbeServer"]


class Echo(ToolBase):
    definition = load_tool_definition(__package__, "echo")
    required_access_level = AccessLevel.READ
    open_world = False

    async def execute(self, args: dict[str, Any], ctx: Any) -> ToolResult:
        text = args["text"]
        return ToolResult(text=text, directives=[NotifyPresenter(key="echo", data={"length": len(text)})])


class Info(ToolBase):
    definition = load_tool_definition(__package__, "info")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> ToolResult:
        return ToolResult.json({"conversation": ctx.conversation_id, "pid": os.getpid()})


class Note(ToolBase):
    definition = load_tool_definition(__package__, "note")
    required_access_level = AccessLevel.WRITE
    destructive = False

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        root = ctx.services.root
        target = Path(root) / "notes.txt" if root is not None else Path("notes.txt")
        with target.open("a", encoding="utf-8") as fh:
            fh.write(args["text"] + "\n")
        return f"noted: {args['text']}"


class Fail(ToolBase):
    definition = load_tool_definition(__package__, "fail")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        raise ToolError("probe_failure", "The probe failed on purpose. Call probe.echo instead.")


class Sleep(ToolBase):
    """Runs ``sleep`` in its own process group, reporting progress; cancellation kills the group."""

    definition = load_tool_definition(__package__, "sleep")
    required_access_level = AccessLevel.WRITE

    async def execute(self, args: dict[str, Any], ctx: Any) -> str:
        seconds = float(args["seconds"])
        process = await asyncio.create_subprocess_exec(
            "sleep",
            str(seconds),
            start_new_session=True,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        marker = args.get("pgid_file")
        if marker:
            Path(marker).write_text(str(process.pid))
        try:
            for step in range(int(seconds * 10)):
                ctx.report_progress(step, seconds * 10, f"slept {step / 10:.1f} s")
                try:
                    await asyncio.wait_for(asyncio.shield(process.wait()), 0.1)
                    break
                except TimeoutError:
                    continue
            await process.wait()
        except BaseException:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await process.wait()
            raise
        return f"slept {seconds:g} s"


class SlowAsk(ToolBase):
    """Sleeps, then asks about a path outside the root: a question asked after the call began."""

    definition = load_tool_definition(__package__, "slow_ask")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: Any) -> str:
        import time

        from entropic_mcp import OutsideRootRequest

        time.sleep(float(args["seconds"]))
        request = OutsideRootRequest(
            path=Path(args["path"]),
            tool="probe.slow_ask",
            access="read",
            root=Path(ctx.services.root),
            conversation_id=ctx.conversation_id,
        )
        answer = ctx.services.approve_outside_root(request)
        return {True: "allowed", False: "refused", None: "unanswered"}[answer]


class Ended(ToolBase):
    """The conversations this server was told to release, as JSON."""

    definition = load_tool_definition(__package__, "ended")
    required_access_level = AccessLevel.READ

    def __init__(self, server: ProbeServer) -> None:
        super().__init__()
        self.server = server

    def execute(self, args: dict[str, Any], ctx: Any) -> ToolResult:
        return ToolResult.json({"ended": list(self.server.ended)})


class ProbeServer(MCPServerBase):
    name = "probe"
    default_timeout_seconds = 30.0

    def __init__(self, root: Any = None) -> None:
        super().__init__(root=root)
        self.ended: list[str] = []
        for tool in (Echo(), Info(), Note(), Fail(), Sleep(), SlowAsk(), Ended(self)):
            self.register_tool(tool)

    def end_conversation(self, conversation_id: str) -> None:
        self.ended.append(conversation_id)

    def permission_pattern(self, tool_name: str, args: Any) -> str:
        if tool_name == "note":
            return f"probe.note({args.get('text', '')})"
        return super().permission_pattern(tool_name, args)

    def skip_duplicate_check(self, tool_name: str) -> bool:
        return tool_name in ("info", "sleep", "ended")


@hookimpl
def entropic_mcp_servers(config: Any) -> ProbeServer:
    return ProbeServer(root=config.root)
