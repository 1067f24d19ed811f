"""A model turn's calls: READ tools side by side, tools that run last at the end, stops honoured."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import orjson

from .._context import CallContext
from ._outcome import BatchOutcome, CallOutcome
from ._spine import stops_batch

if TYPE_CHECKING:
    from .._config import Config
    from .._server import MCPServerBase
    from .._tools import ToolBase
    from ._guards import Guards


class _Pipeline(Protocol):
    @property
    def guards(self) -> Guards: ...


class BatchHost(Protocol):
    """What a batch needs of the manager that runs it (``ServerManager`` is one): the batch sits
    under the manager, which hands itself in, so neither imports the other."""

    @property
    def config(self) -> Config: ...

    @property
    def pipeline(self) -> _Pipeline: ...

    def runs_last(self, name: str) -> bool: ...

    def resolve(self, name: str) -> tuple[MCPServerBase, ToolBase] | None: ...

    async def call(self, name: str, args: object = None, ctx: CallContext | None = None) -> CallOutcome: ...


def _key(name: str, args: object) -> str:
    try:
        return name + "\x00" + orjson.dumps(args, option=orjson.OPT_SORT_KEYS, default=str).decode()
    except TypeError:
        return name + "\x00" + repr(args)


async def run_batch(manager: BatchHost, calls: Sequence[tuple[str, object]], ctx: CallContext) -> BatchOutcome:
    """Run a turn's calls; every call that ran is in the outcome, the ones that never started in ``surplus``.

    Consecutive READ calls run concurrently, except that an identical call waits for the first
    (so its repeat is flagged, as in sequence). The batch stops after a call whose directives
    include ``stop_processing`` or ``complete``, or after the STOP notice; calls already running
    beside it finish and are reported.
    """
    import anyio

    limit = manager.config.pipeline.max_tool_calls_per_turn
    ordered = [c for c in calls if not manager.runs_last(c[0])] + [c for c in calls if manager.runs_last(c[0])]
    ordered, surplus = ordered[:limit], tuple(name for name, _ in ordered[limit:])
    guards = manager.pipeline.guards
    outcomes: list[CallOutcome] = []
    i = 0
    while i < len(ordered):
        group = [ordered[i]]
        if _concurrent(manager, ordered[i][0]):
            keys = {_key(*ordered[i])}
            while i + len(group) < len(ordered) and _concurrent(manager, ordered[i + len(group)][0]):
                key = _key(*ordered[i + len(group)])
                if key in keys:
                    break
                keys.add(key)
                group.append(ordered[i + len(group)])
        results: list[CallOutcome | None] = [None] * len(group)

        async def run(index: int, name: str, args: object, results: list[CallOutcome | None] = results) -> None:
            child = CallContext(
                conversation_id=ctx.conversation_id,
                identity=ctx.identity,
                iteration=ctx.iteration,
                progress=ctx.progress,
                meta=ctx.meta,
                tool_names=ctx.tool_names,
            )
            results[index] = await manager.call(name, args, child)

        if len(group) == 1:
            await run(0, *group[0])
        else:
            async with anyio.create_task_group() as tg:
                for index, (name, args) in enumerate(group):
                    tg.start_soon(run, index, name, args)
        i += len(group)
        stopped = None
        for outcome in results:
            assert outcome is not None
            outcomes.append(outcome)
            stopped = stopped or stops_batch(outcome, guards)
        if stopped:
            rest = tuple(name for name, _ in ordered[i:])
            return BatchOutcome(outcomes=tuple(outcomes), surplus=rest + surplus, stopped=stopped)
    return BatchOutcome(outcomes=tuple(outcomes), surplus=surplus)


def _concurrent(manager: BatchHost, name: str) -> bool:
    from .._access import AccessLevel

    found = manager.resolve(name)
    return found is not None and found[1].required_access_level <= AccessLevel.READ
