"""Calling one tool directly, bounded: a tool that never returns is abandoned, never waited for.

Each call runs in its own daemon thread (an ``async`` tool on its own event loop there), so a
tool that blocks — even an ``async`` one that blocks its loop — cannot hold up the check or the
process's exit. When the limit passes, ``ctx.cancelled`` is set (and an ``async`` tool's task
cancelled), the tool gets a short grace to stop, and the check moves on either way.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import attrs

from .._context import CallContext
from .._pipeline._deadlines import StepTimer
from .._tools import ToolBase

GRACE_SECONDS = 1.0


@attrs.frozen(kw_only=True)
class DirectOutcome:
    """What a direct call came to: a value, an exception, or a timeout."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    stopped_when_cancelled: bool = False
    #: The longest stretch (seconds) an ``async`` tool ran without awaiting: it held its event loop.
    loop_held: float = 0.0


def call_tool(tool: ToolBase, args: dict[str, Any], ctx: CallContext, limit: float) -> DirectOutcome:
    """Run ``tool.execute(args, ctx)`` for at most ``limit`` seconds (plus a grace after cancelling)."""
    done = threading.Event()
    box: dict[str, Any] = {}
    is_async = inspect.iscoroutinefunction(tool.execute)

    async def run_async() -> Any:
        box["loop"] = asyncio.get_running_loop()
        box["task"] = asyncio.current_task()
        timer = box["timer"] = StepTimer(tool.execute(args, ctx))
        return await timer

    def target() -> None:
        try:
            box["value"] = asyncio.run(run_async()) if is_async else tool.execute(args, ctx)
        except BaseException as exc:  # everything is reported, including SystemExit from a tool
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, name=f"entropic-mcp-check-{tool.name}", daemon=True)
    thread.start()
    if not done.wait(limit):
        ctx.cancelled.set()
        loop, task = box.get("loop"), box.get("task")
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop closed in between: the call just finished
                pass
        stopped = done.wait(min(GRACE_SECONDS, limit))
        return DirectOutcome(timed_out=True, stopped_when_cancelled=stopped)
    timer = box.get("timer")
    return DirectOutcome(
        value=box.get("value"), error=box.get("error"), loop_held=timer.longest if timer is not None else 0.0
    )
