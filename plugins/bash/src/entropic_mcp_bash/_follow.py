"""A background run followed to its end, for a caller that takes an MCP task handle.

``bash.execute run_in_background=true`` answers at once with a run id. A caller that declared the
``io.modelcontextprotocol/tasks`` extension (``CallContext.as_task``) holds a task handle for a
long call instead, so the call follows the run it started: it lasts as long as the run, and serve
turns it into a task once it outlasts ``[serve] task_after_seconds``. The task's status follows
the run (``working`` while it runs); its result is the run's final status with the output not yet
read through ``bash.output``; ``tasks/cancel`` (on any worker) cancels the call, which stops the
run's whole process group. The run stays a background run all along: ``bash.output``,
``bash.kill`` and ``bash.list`` see it on every worker, and a ``bash.kill`` ends the task with the
run ``killed``. A run outliving the call's own deadline goes on running; the task then completes
saying so, and ``bash.output`` reads the rest.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from . import _shared
from ._render import reply
from ._runs import _answer, _read

if TYPE_CHECKING:
    from entropic_mcp import CallContext, ToolResult
    from entropic_mcp.storage import StateStore

    from ._background import BackgroundRun
    from ._server import BashServer

#: Seconds between the call's looks at its run (the run's own thread does the watching).
POLL = 0.1


async def follow(
    server: BashServer,
    started: ToolResult,
    ctx: CallContext,
    store: StateStore | None,
    *,
    as_json: bool,
    margin: float,
) -> ToolResult:
    """Wait for the run ``started`` names to end (at most until ``margin`` before the call's
    deadline) and answer its final status and output; a cancelled call stops the run first."""
    assert started.structured is not None
    run = server.runs.get(ctx.conversation_id, started.structured["run_id"])
    remaining = ctx.remaining()
    end = None if remaining is None else time.monotonic() + max(0.0, remaining - server.grace - margin)
    try:
        while run.running and (end is None or time.monotonic() < end):
            await asyncio.sleep(POLL)
    except asyncio.CancelledError:
        run.stop()  # tasks/cancel (or serve stopping): TERM, then KILL, for the whole group
        await asyncio.to_thread(run.wait, 2 * server.grace + 1.0)
        raise
    data = await asyncio.to_thread(_final, server, run, ctx, store)
    if data.get("status") == "running":
        data["note"] = (
            f"{run.run_id} outlived this call's deadline and goes on running in the background; read the rest "
            "with bash.output and stop it with bash.kill"
        )
    return reply(data, json=as_json)


def _final(server: BashServer, run: BackgroundRun, ctx: CallContext, store: StateStore | None) -> dict[str, Any]:
    if store is None:
        return _read(run, None)
    if not run.running:  # the owner (this worker) records the end on its spool's next flush
        _shared.wait_ended(store, ctx.conversation_id, run.run_id, 2 * _shared.FLUSH_SECONDS + 1.0)
    record, output, dropped = server.runs.read_shared(store, ctx.conversation_id, run.run_id)
    return _answer(_shared.describe(record), output, dropped, None)
