"""Issue 27: a background run started by a caller that takes an MCP task handle
(``CallContext.as_task``) is followed to its end; cancelling the call stops the run's group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from bash_helpers import gone, make_manager
from entropic_mcp import CallContext, ServerManager

PATIENCE = 20.0


@pytest.fixture
def manager(root: Path) -> Iterator[ServerManager]:
    manager, _ = make_manager(root, permissions={"default": "allow"}, bash={"max_background_runs": 3})
    yield manager
    manager.close()


def _call(manager: ServerManager, tool: str, args: dict[str, Any], *, as_task: bool = False) -> dict[str, Any]:
    ctx = CallContext(conversation_id="a", as_task=as_task)
    outcome = manager.call_sync(f"bash.{tool}", {"format": "json", **args}, ctx)
    assert outcome.kind in ("ok", "ok_empty"), outcome.response.result
    data = orjson.loads(outcome.response.result)
    assert isinstance(data, dict)
    return data


def test_a_task_caller_gets_the_runs_end_and_a_plain_one_its_id(manager: ServerManager) -> None:
    command = {"command": "echo one; sleep 0.3; echo two; exit 3", "run_in_background": True}
    followed = _call(manager, "execute", command, as_task=True)
    assert (followed["status"], followed["exit_code"], followed["output"]) == ("exited", 3, "one\ntwo\n")
    # Still a background run: bash.list knows it, ended.
    assert [run["status"] for run in _call(manager, "list", {})["runs"]] == ["exited"]
    started = _call(manager, "execute", command)
    assert started["status"] == "running" and "output" not in started


def test_cancelling_a_followed_run_stops_its_group(manager: ServerManager, root: Path) -> None:
    pid_file = root / "pid"
    command = {"command": f"sleep 300 & echo $! > {pid_file}; wait", "run_in_background": True, "format": "json"}

    async def cancelled() -> None:
        with anyio.move_on_after(PATIENCE) as scope:
            async with anyio.create_task_group() as group:
                ctx = CallContext(conversation_id="a", as_task=True)
                group.start_soon(manager.call, "bash.execute", command, ctx)
                end = time.monotonic() + PATIENCE
                while not (pid_file.exists() and pid_file.read_text().strip()):
                    assert time.monotonic() < end, "the run never started"
                    await anyio.sleep(0.02)
                group.cancel_scope.cancel()
        assert not scope.cancelled_caught

    anyio.run(cancelled)
    assert gone(int(pid_file.read_text()))
    runs = _call(manager, "list", {})["runs"]
    assert [run["status"] for run in runs] == ["killed"]
