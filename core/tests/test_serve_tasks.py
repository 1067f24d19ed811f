"""The task records behind serve's MCP Tasks (``_serve/_tasks.py``), on an in-memory store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from entropic_mcp._serve import _tasks
from entropic_mcp._serve._tasks import NAMESPACE, Tasks
from entropic_mcp.testing import MemoryStorage
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _until_settled(tasks: Tasks, task_id: str, owner: str) -> dict[str, Any]:
    for _ in range(500):
        found = await tasks.get(task_id, owner)
        if found["status"] != "working":
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"task {task_id} never settled")


async def _result(text: str, seconds: float = 0.0) -> dict[str, Any]:
    await asyncio.sleep(seconds)
    return {"content": [{"type": "text", "text": text}], "isError": False, "resultType": "complete"}


async def test_a_quick_call_is_its_own_result_and_a_slow_one_a_task_with_the_result_stored() -> None:
    tasks = Tasks(MemoryStorage, after=0.05)
    assert await tasks.run(lambda: _result("quick"), "a") == await _result("quick")
    handle = await tasks.run(lambda: _result("slow", 0.2), "a")
    assert handle["resultType"] == "task" and handle["status"] == "working"
    assert "owner" not in handle and "cancel" not in handle
    done = await _until_settled(tasks, handle["taskId"], "a")
    assert done["status"] == "completed"
    assert done["result"] == {"content": [{"type": "text", "text": "slow"}], "isError": False}


async def test_another_owner_finds_nothing_to_get_or_cancel() -> None:
    tasks = Tasks(MemoryStorage, after=0.01)
    handle = await tasks.run(lambda: _result("mine", 0.3), "a")
    for method in (tasks.get, tasks.cancel):
        with pytest.raises(MCPError, match="Task not found"):
            await method(handle["taskId"], "b")
    assert (await _until_settled(tasks, handle["taskId"], "a"))["status"] == "completed"


async def test_cancel_by_the_client_and_by_a_stopping_serve_say_which() -> None:
    tasks = Tasks(MemoryStorage, after=0.01)
    asked = await tasks.run(lambda: _result("never", 30), "a")
    stopped = await tasks.run(lambda: _result("never", 30), "a")
    assert await tasks.cancel(asked["taskId"], "a") == {}
    await tasks.close()
    first = await _until_settled(tasks, asked["taskId"], "a")
    second = await _until_settled(tasks, stopped["taskId"], "a")
    assert (first["status"], first["statusMessage"]) == ("cancelled", "cancelled by tasks/cancel")
    assert second["status"] == "cancelled" and "serve shut down" in second["statusMessage"]


async def test_a_cancel_received_elsewhere_reaches_the_running_call_through_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_tasks, "CANCEL_POLL", 0.02)
    store = MemoryStorage()
    owner, other_worker = Tasks(lambda: store, after=0.01), Tasks(lambda: store)
    handle = await owner.run(lambda: _result("never", 30), "a")
    assert await other_worker.cancel(handle["taskId"], "a") == {}
    done = await _until_settled(other_worker, handle["taskId"], "a")
    assert (done["status"], done["statusMessage"]) == ("cancelled", "cancelled by tasks/cancel")


async def test_records_past_their_ttl_are_pruned_when_tasks_are_created(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStorage()
    tasks = Tasks(lambda: store)
    old = tasks.create("a")
    monkeypatch.setattr(_tasks, "TTL_MS", 0)
    monkeypatch.setattr(_tasks, "PRUNE_EVERY", 0.0)
    new = tasks.create("a")
    assert store.load_state(NAMESPACE, old["taskId"]) == (None, 0)
    assert store.load_state(NAMESPACE, new["taskId"])[1] == 1


async def test_a_call_that_wanted_to_ask_the_client_completes_with_a_tool_error() -> None:
    async def asks() -> dict[str, Any]:
        await asyncio.sleep(0.1)
        return {"resultType": "input_required", "inputRequests": {}, "requestState": "x"}

    tasks = Tasks(MemoryStorage, after=0.01)
    handle = await tasks.run(asks, "a")
    done = await _until_settled(tasks, handle["taskId"], "a")
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert "without the tasks extension" in done["result"]["content"][0]["text"]


async def _until_status(tasks: Tasks, task_id: str, owner: str, status: str) -> dict[str, Any]:
    for _ in range(500):
        found = await tasks.get(task_id, owner)
        if found["status"] == status:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"task {task_id} never reached {status}")


async def _asks() -> dict[str, Any]:
    await asyncio.sleep(0.1)
    question = {"method": "elicitation/create", "params": {"message": "go on?"}}
    return {"resultType": "input_required", "inputRequests": {"q1": question}, "requestState": "state-1"}


async def test_a_task_that_asks_waits_in_input_required_and_any_worker_resumes_it_with_the_answers() -> None:
    store = MemoryStorage()
    owner, other_worker = Tasks(lambda: store, after=0.01), Tasks(lambda: store)
    handle = await owner.run(_asks, "a", resume={"name": "probe_ask", "arguments": {"n": 1}})
    waiting = await _until_status(other_worker, handle["taskId"], "a", "input_required")
    assert waiting["inputRequests"] == {"q1": {"method": "elicitation/create", "params": {"message": "go on?"}}}
    assert "requestState" not in waiting and "resume" not in waiting
    resumed: list[Any] = []

    async def resume(what: dict[str, Any], state: str, responses: Any) -> dict[str, Any]:
        resumed.append((what, state, responses))
        return await _result("answered", 0.05)

    assert await other_worker.update(handle["taskId"], "a", None, resume) == {}  # no answers: ignored
    assert (await other_worker.get(handle["taskId"], "a"))["status"] == "input_required"
    answers = {"q1": {"action": "accept"}}
    with pytest.raises(MCPError, match="Task not found"):
        await other_worker.update(handle["taskId"], "b", answers, resume)
    assert await other_worker.update(handle["taskId"], "a", answers, resume) == {}
    assert await other_worker.update(handle["taskId"], "a", answers, resume) == {}  # a second answer: ignored
    done = await _until_settled(other_worker, handle["taskId"], "a")
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "answered"
    assert "inputRequests" not in done
    assert resumed == [({"name": "probe_ask", "arguments": {"n": 1}}, "state-1", answers)]


async def test_a_task_waiting_for_answers_is_cancelled_at_once() -> None:
    store = MemoryStorage()
    tasks = Tasks(lambda: store, after=0.01)
    handle = await tasks.run(_asks, "a", resume={"name": "probe_ask", "arguments": {}})
    await _until_status(tasks, handle["taskId"], "a", "input_required")
    assert await tasks.cancel(handle["taskId"], "a") == {}
    done = await tasks.get(handle["taskId"], "a")
    assert done["status"] == "cancelled" and "inputRequests" not in done
