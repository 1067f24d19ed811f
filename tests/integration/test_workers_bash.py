"""Issue 27, bash's background runs: two `entropic-mcp serve --transport http` workers on one
PostgreSQL store behind haproxy in round robin. A run started through the balancer is read and
killed through the worker that does not own it, and its processes are really gone.

Needs ``ENTROPIC_MCP_TEST_POSTGRES_DSN`` and ``haproxy`` on PATH (.ci/run installs it).
"""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from test_workers import CONVERSATION_KEY, _bash_project, fresh_store, haproxy

from conftest import connect, group_alive, start_http, stop

pytestmark = [pytest.mark.integration]

PATIENCE = 20.0


def _sleeper(marker: str) -> psutil.Process | None:
    for process in psutil.process_iter(["cmdline"]):
        if process.info["cmdline"] == ["sleep", marker]:
            return process
    return None


def _owner(process: psutil.Process, pids: list[int]) -> int:
    """Which worker (index in ``pids``) the process descends from."""
    for parent in process.parents():
        if parent.pid in pids:
            return pids.index(parent.pid)
    raise AssertionError(f"{process.pid} is no worker's descendant")


async def _scenario(balanced: str, direct: list[str], pids: list[int]) -> dict[str, Any]:
    meta = {CONVERSATION_KEY: f"bg-{uuid.uuid4().hex[:8]}"}
    marker = f"300.{secrets.randbelow(10**6)}"  # names this test's sleep among the machine's processes
    seen: dict[str, Any] = {}

    async def call(url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async with connect(url, "2026-07-28") as peer:
            result = await peer.call(name, {"format": "json", **arguments}, meta=meta)
        data = json.loads(result.content[0].text)
        assert isinstance(data, dict)
        return data

    started = await call(
        balanced, "bash_execute", {"command": f"echo started; sleep {marker}", "run_in_background": True}
    )
    run_id = started["run_id"]
    deadline = time.monotonic() + PATIENCE
    while (sleeper := _sleeper(marker)) is None:
        assert time.monotonic() < deadline, "the background sleep never started"
        await anyio.sleep(0.05)
    owner = _owner(sleeper, pids)
    other = direct[1 - owner]
    seen.update(owner=owner, pid=sleeper.pid, pgid=os.getpgid(sleeper.pid))
    output = ""
    while "started" not in output:
        assert time.monotonic() < deadline, f"the other worker never read the output: {output!r}"
        data = await call(other, "bash_output", {"run_id": run_id})
        assert "error" not in data, data
        output += data["output"]
    seen["read"] = output
    # Through the balancer both workers answer the list, the same way.
    seen["lists"] = [(await call(balanced, "bash_list", {}))["runs"] for _ in range(4)]
    began = time.monotonic()
    seen["kill"] = await call(other, "bash_kill", {"run_id": run_id})
    seen["kill_seconds"] = time.monotonic() - began
    seen["after"] = [await call(balanced, "bash_output", {"run_id": run_id}) for _ in range(2)]
    return seen


def test_a_background_run_is_read_and_killed_through_the_other_worker(tmp_path: Path) -> None:
    with fresh_store() as store:
        roots = [_bash_project(tmp_path / f"worker{n}", *store) for n in range(2)]
        served = [start_http(root) for root in roots]
        try:
            with haproxy(tmp_path, served) as url:
                pids = [worker.process.pid for worker in served]
                seen = anyio.run(_scenario, url, [worker.url for worker in served], pids)
        finally:
            for worker in served:
                stop(worker.process)
    assert seen["read"] == "started\n"
    for runs in seen["lists"]:
        assert [(r["status"], r["command"].split("; ")[0]) for r in runs] == [("running", "echo started")]
    assert seen["kill"]["status"] == "killed", seen["kill"]
    assert "kill_requested" not in seen["kill"]
    # The owner's TERM reached the whole group: the sleep and its shell are gone, not orphaned.
    assert not psutil.pid_exists(seen["pid"]) or psutil.Process(seen["pid"]).status() == psutil.STATUS_ZOMBIE
    assert not group_alive(seen["pgid"])
    assert [a["status"] for a in seen["after"]] == ["killed", "killed"]
    assert seen["kill_seconds"] < 5.0
