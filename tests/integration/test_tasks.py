"""MCP Tasks (``io.modelcontextprotocol/tasks``, 2026-07-28) over Streamable HTTP: a long
``tools/call`` becomes a task that ``tasks/get`` polls to its result and ``tasks/cancel`` stops;
with two workers on one PostgreSQL store a task started on one is polled and cancelled on the
other. Raw JSON-RPC: the SDK's client has no tasks methods (docs/serving.md, "Tasks")."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from test_workers import fresh_store, haproxy

from conftest import group_alive, start_http, stop, wait_until, write_project

if TYPE_CHECKING:
    from conftest import HTTPServe

pytestmark = [pytest.mark.integration]

TASKS = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
IDEMPOTENCY = "entropic-mcp/idempotency-key"
#: Far above any call here: a task still working then is stuck.
HANG = 60.0


@contextmanager
def deployment(tmp_path: Path, workers: int, extra: str = "") -> Iterator[tuple[str, list[HTTPServe], None]]:
    """``workers`` serve processes on one fresh PostgreSQL store (behind haproxy when two), as in
    test_workers, with the probe's tools allowed."""
    with fresh_store() as (dsn, schema):
        served = [
            start_http(
                write_project(
                    tmp_path / f"worker{n}",
                    f"""\
[entropic_mcp]
plugins = ["probe", "entropic", "postgres"]
[storage]
backend = "postgres"
options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)} }}
[permissions]
default = "ask"
allow = ["probe.*", "entropic.*"]
{extra}""",
                )
            )
            for n in range(workers)
        ]
        try:
            if workers == 1:
                yield served[0].url, served, None
            else:
                with haproxy(tmp_path, served) as url:
                    yield url, served, None
        finally:
            for worker in served:
                stop(worker.process)


class Rpc:
    """JSON-RPC requests of one 2026-07-28 client and conversation; ``tasks`` declares the extension."""

    def __init__(
        self, conversation: str, *, tasks: bool = True, elicitation: bool = False, sampling: bool = False
    ) -> None:
        self.conversation = conversation
        self.tasks = tasks
        self.elicitation = elicitation
        self.sampling = sampling
        self.ids = 0

    def __call__(
        self, url: str, method: str, params: dict[str, Any], name: str, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        import urllib.error
        import urllib.request

        self.ids += 1
        capabilities: dict[str, Any] = {"extensions": {TASKS: {}}} if self.tasks else {}
        if self.elicitation:
            capabilities["elicitation"] = {"form": {}}
        if self.sampling:
            capabilities["sampling"] = {"tools": {}}
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "entropic-mcp/conversation": self.conversation,
            **(extra or {}),
        }
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": {**params, "_meta": meta}}
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
            "Mcp-Name": name,
        }
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={**headers, "Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                kind, text = response.headers.get("content-type", ""), response.read().decode()
        except urllib.error.HTTPError as error:  # a JSON-RPC error may come with a 4xx status
            kind, text = error.headers.get("content-type", ""), error.read().decode()
        if kind.startswith("text/event-stream"):
            messages = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
            return next(m for m in messages if m.get("id") == self.ids)
        return dict(json.loads(text))

    def call(self, url: str, tool: str, arguments: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """``tools/call``; ``key`` is its idempotency key."""
        extra = {IDEMPOTENCY: key} if key is not None else None
        return self(url, "tools/call", {"name": tool, "arguments": arguments}, tool, extra)

    def task(self, url: str, method: str, task_id: str) -> dict[str, Any]:
        return self(url, method, {"taskId": task_id}, task_id)

    def until_terminal(self, url: str, task_id: str) -> dict[str, Any]:
        end = time.monotonic() + HANG
        while True:
            answer = self.task(url, "tasks/get", task_id)
            result = answer["result"]
            if result["status"] in ("completed", "failed", "cancelled", "input_required"):
                return result
            assert result["status"] == "working" and time.monotonic() < end, answer
            time.sleep(result.get("pollIntervalMs", 500) / 1000)


def test_a_long_call_becomes_a_task_polled_to_its_result_and_a_quick_one_answers_at_once(tmp_path: Path) -> None:
    with deployment(tmp_path, 1) as (url, _, _):
        rpc = Rpc(f"tasks-{uuid.uuid4().hex[:8]}")
        created = rpc.call(url, "probe_sleep", {"seconds": 2})["result"]
        assert created["resultType"] == "task" and created["status"] == "working", created
        assert created["pollIntervalMs"] > 0 and created["ttlMs"] > 0
        task_id = created["taskId"]
        first = rpc.task(url, "tasks/get", task_id)["result"]
        assert first["resultType"] == "complete" and first["taskId"] == task_id
        done = rpc.until_terminal(url, task_id)
        assert done["status"] == "completed" and not done["result"].get("isError")
        assert done["result"]["content"][0]["text"] == "slept 2 s"
        # A quick call is answered as usual, even when the client takes tasks.
        quick = rpc.call(url, "probe_echo", {"text": "now"})["result"]
        assert quick["resultType"] == "complete" and "now" in quick["content"][0]["text"]
        # Another conversation cannot see the task; a client without the extension may not ask.
        other = Rpc("someone-else").task(url, "tasks/get", task_id)
        assert other["error"]["code"] == -32602 and "not found" in other["error"]["message"]
        bare = Rpc(rpc.conversation, tasks=False).task(url, "tasks/get", task_id)
        assert bare["error"]["code"] == -32021
        assert bare["error"]["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
        unknown = rpc.task(url, "tasks/get", "no-such-task")
        assert unknown["error"]["code"] == -32602
        # Without the extension a long call is never a task.
        plain = Rpc(rpc.conversation, tasks=False).call(url, "probe_sleep", {"seconds": 1.5})["result"]
        assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "slept 1.5 s"


def test_the_server_advertises_the_extension(tmp_path: Path) -> None:
    with deployment(tmp_path, 1) as (url, _, _):
        answer = Rpc("discover")(url, "server/discover", {}, "")
        assert TASKS in answer["result"]["capabilities"]["extensions"]


def _acknowledged(answer: dict[str, Any]) -> bool:
    """An empty result: ``resultType`` and the server's ``_meta`` stamp, nothing else."""
    return answer["result"]["resultType"] == "complete" and set(answer["result"]) <= {"resultType", "_meta"}


def _started_sleep(rpc: Rpc, url: str, marker: Path) -> tuple[str, int]:
    created = rpc.call(url, "probe_sleep", {"seconds": 30, "pgid_file": str(marker)})["result"]
    assert created["resultType"] == "task"
    assert wait_until(lambda: marker.exists() and marker.read_text().strip() != "", timeout=HANG)
    return created["taskId"], int(marker.read_text())


def test_cancel_stops_the_call(tmp_path: Path) -> None:
    with deployment(tmp_path, 1) as (url, _, _):
        rpc = Rpc("cancel-one")
        task_id, pgid = _started_sleep(rpc, url, tmp_path / "pgid")
        assert Rpc("someone-else").task(url, "tasks/cancel", task_id)["error"]["code"] == -32602
        assert group_alive(pgid)
        assert _acknowledged(rpc.task(url, "tasks/cancel", task_id))
        assert rpc.until_terminal(url, task_id)["status"] == "cancelled"
        assert wait_until(lambda: not group_alive(pgid), timeout=HANG)


def test_a_task_started_on_one_worker_is_polled_and_cancelled_on_the_other(tmp_path: Path) -> None:
    with deployment(tmp_path, 2) as (balanced, workers, _):
        one, other = (worker.url for worker in workers)
        rpc = Rpc("two-workers")
        created = rpc.call(one, "probe_sleep", {"seconds": 2})["result"]
        assert created["resultType"] == "task"
        done = rpc.until_terminal(other, created["taskId"])
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "slept 2 s"
        # Through the balancer too (round robin: the polls reach both workers).
        assert rpc.until_terminal(balanced, created["taskId"]) == done

        task_id, pgid = _started_sleep(rpc, one, tmp_path / "pgid")
        assert _acknowledged(rpc.task(other, "tasks/cancel", task_id))
        assert rpc.until_terminal(other, task_id)["status"] == "cancelled"
        assert wait_until(lambda: not group_alive(pgid), timeout=HANG)


def test_tasks_result_and_tasks_list_are_not_methods_of_this_revision(tmp_path: Path) -> None:
    """2026-07-28 moved the result into ``tasks/get`` and dropped the list (SEP-2663): -32601."""
    with deployment(tmp_path, 1) as (url, _, _):
        rpc = Rpc("no-result-method")
        created = rpc.call(url, "probe_sleep", {"seconds": 1.5})["result"]
        assert created["resultType"] == "task"
        for method, params in (("tasks/result", {"taskId": created["taskId"]}), ("tasks/list", {})):
            answer = rpc(url, method, params, "")
            assert answer["error"]["code"] == -32601, (method, answer)
        assert rpc.until_terminal(url, created["taskId"])["status"] == "completed"


def _text(answer: dict[str, Any]) -> str:
    return str(answer["result"]["content"][0]["text"])


def _todo_retries(rpc: Rpc, urls: list[str]) -> list[Any]:
    """A todo add retried with its key on each worker in turn, the key reused, the list."""
    turn = iter(urls * 10)
    add = {"action": "add", "content": "buy milk"}
    seen = [_text(rpc.call(next(turn), "entropic_todo", add, key="add-1")) for _ in range(4)]
    reused = rpc.call(next(turn), "entropic_todo", {"action": "add", "content": "buy eggs"}, key="add-1")
    # A todo answer shows the whole list: add-2's shows what add-1 left.
    listed = _text(rpc.call(next(turn), "entropic_todo", add, key="add-2"))
    return [seen, json.loads(_text(reused))["error"], listed]


def test_a_retried_todo_add_is_applied_once_on_one_worker_and_on_two(tmp_path: Path) -> None:
    # Without the tasks extension: on a loaded machine a todo add can outlast task_after_seconds
    # and come back as a task handle, which is not what this test is about.
    with deployment(tmp_path / "one", 1) as (url, _, _):
        alone = _todo_retries(Rpc("idem", tasks=False), [url])
    with deployment(tmp_path / "two", 2) as (balanced, workers, _):
        urls = [worker.url for worker in workers]
        pair = _todo_retries(Rpc("idem", tasks=False), urls)
        through = _todo_retries(Rpc("idem-balanced", tasks=False), [balanced])
    seen, reused, listed = alone
    assert len(set(seen)) == 1 and "buy milk" in seen[0]
    assert reused == "idempotency_key_reused"
    assert listed.count("buy milk") == 2 and "buy eggs" not in listed  # add-1 once, add-2 once
    assert pair == alone == through


def test_an_in_flight_retry_on_the_other_worker_waits_for_the_first(tmp_path: Path) -> None:
    import threading

    with deployment(tmp_path, 2) as (_, workers, _):
        one, other = (worker.url for worker in workers)
        marker = tmp_path / "pgid"
        rpc, retry = Rpc("in-flight", tasks=False), Rpc("in-flight", tasks=False)
        answers: dict[str, Any] = {}
        arguments = {"seconds": 3, "pgid_file": str(marker)}
        first = threading.Thread(target=lambda: answers.update(first=rpc.call(one, "probe_sleep", arguments, "k")))
        first.start()
        assert wait_until(lambda: marker.exists() and marker.read_text().strip() != "", timeout=HANG)
        started = marker.read_text()
        answers["retry"] = retry.call(other, "probe_sleep", arguments, "k")
        first.join(HANG)
        assert _text(answers["retry"]) == _text(answers["first"]) == "slept 3 s"
        assert marker.read_text() == started  # the retry started no second sleep


@contextmanager
def bash_deployment(tmp_path: Path, workers: int) -> Iterator[list[str]]:
    """``workers`` serve processes with bash on one fresh PostgreSQL store (their URLs)."""
    from test_workers import _bash_project

    with fresh_store() as (dsn, schema):
        served = [start_http(_bash_project(tmp_path / f"worker{n}", dsn, schema)) for n in range(workers)]
        try:
            yield [worker.url for worker in served]
        finally:
            for worker in served:
                stop(worker.process)


def _sleeper_group(marker: str) -> int | None:
    import os

    import psutil

    for process in psutil.process_iter(["cmdline"]):
        if process.info["cmdline"] == ["sleep", marker]:
            return os.getpgid(process.pid)
    return None


def _bash_tasks(urls: list[str], tag: str) -> list[Any]:
    """A background run as a task: started on the first worker, polled, killed and cancelled on the last."""
    import secrets

    one, other = urls[0], urls[-1]
    rpc = Rpc(f"bash-{tag}-{uuid.uuid4().hex[:6]}")
    seen: list[Any] = []

    def final(task_id: str) -> dict[str, Any]:
        done = rpc.until_terminal(other, task_id)
        if done["status"] != "completed":
            return {"task": done["status"]}
        data = json.loads(done["result"]["content"][0]["text"])
        return {key: data[key] for key in ("status", "exit_code", "output") if key in data}

    # Followed to its end: the task completes with the run's exit status and output.
    command = {"command": "echo one; sleep 1.5; echo two; exit 3", "run_in_background": True, "format": "json"}
    created = rpc.call(one, "bash_execute", command)["result"]
    seen.append(created["resultType"])
    seen.append(final(created["taskId"]))
    # Stopped by bash.kill on the other worker (found with bash.list): the task ends with it.
    marker = f"300.{secrets.randbelow(10**6)}"
    long = {"command": f"echo started; sleep {marker}", "run_in_background": True, "format": "json"}
    created = rpc.call(one, "bash_execute", long)["result"]
    assert wait_until(lambda: _sleeper_group(marker) is not None, timeout=HANG)
    listed = json.loads(_text(rpc.call(other, "bash_list", {"format": "json"})))
    running = [run["run_id"] for run in listed["runs"] if run["status"] == "running"]
    # Its first line read on the other worker first: output reaches the store in chunks (every
    # 0.25 s), so how much a kill or the task's result still finds unread is a matter of timing.
    shown: list[str] = []

    def read_started() -> bool:
        shown.append(_text(rpc.call(other, "bash_output", {"run_id": running[0], "format": "json"})))
        return "started" in "".join(shown)

    assert wait_until(read_started, timeout=HANG)
    seen.append(json.loads(_text(rpc.call(other, "bash_kill", {"run_id": running[0], "format": "json"})))["status"])
    seen.append(final(created["taskId"]))
    # Cancelled on the other worker: the run's whole process group goes.
    marker = f"300.{secrets.randbelow(10**6)}"
    long = {"command": f"sleep {marker}", "run_in_background": True, "format": "json"}
    created = rpc.call(one, "bash_execute", long)["result"]
    assert wait_until(lambda: _sleeper_group(marker) is not None, timeout=HANG)
    pgid = _sleeper_group(marker)
    seen.append(_acknowledged(rpc.task(other, "tasks/cancel", created["taskId"])))
    seen.append(final(created["taskId"]))
    seen.append(wait_until(lambda: not group_alive(pgid), timeout=HANG))  # type: ignore[arg-type]
    # Without the extension a background start answers at once with its run id, as before.
    plain = Rpc(rpc.conversation, tasks=False).call(one, "bash_execute", {**command, "command": "sleep 1.5"})
    seen.append(sorted(json.loads(_text(plain)))[:3])
    return seen


def test_a_background_run_is_a_task_any_worker_polls_kills_or_cancels(tmp_path: Path) -> None:
    with bash_deployment(tmp_path / "one", 1) as urls:
        alone = _bash_tasks(urls, "one")
    with bash_deployment(tmp_path / "two", 2) as urls:
        pair = _bash_tasks(urls, "two")
    assert alone[0] == "task"
    assert alone[1] == {"status": "exited", "exit_code": 3, "output": "one\ntwo\n"}
    assert alone[2] == "killed" and alone[3]["status"] == "killed" and alone[3]["output"] == ""
    assert alone[4] is True and alone[5] == {"task": "cancelled"} and alone[6] is True
    assert alone[7] == ["message", "run_id", "status"]
    assert pair == alone


def test_a_question_asked_after_the_call_became_a_task_is_answered_through_tasks_update(tmp_path: Path) -> None:
    """The task waits in input_required with the question; tasks/update's answer resumes the call."""
    with deployment(tmp_path, 1) as (url, _, _):
        rpc = Rpc("asks-mid-call", elicitation=True)
        outside = "/etc/hostname"
        outcomes = []
        for decision in ("allow_once", "deny_once"):
            created = rpc.call(url, "probe_slow_ask", {"seconds": 1.5, "path": outside})["result"]
            assert created["resultType"] == "task", created
            waiting = rpc.until_terminal(url, created["taskId"])
            assert waiting["status"] == "input_required", waiting
            (key, asked), *_ = waiting["inputRequests"].items()
            assert asked["method"] == "elicitation/create" and outside in asked["params"]["message"]
            assert "requestState" not in waiting
            answer = {key: {"action": "accept", "content": {"decision": decision}}}
            updated = rpc(url, "tasks/update", {"taskId": created["taskId"], "inputResponses": answer}, "")
            assert _acknowledged(updated), updated
            done = rpc.until_terminal(url, created["taskId"])
            assert done["status"] == "completed", done
            outcomes.append(_text({"result": done["result"]}))
        assert outcomes == ["allowed", "refused"]


DELEGATION = """\
[entropic_mcp]
plugins = ["entropic", "probe"]
[storage]
backend = "tinydb"
[permissions]
default = "allow"
[servers.entropic]
tiers = ["lead", "researcher"]
[servers.entropic.profiles.researcher]
system_prompt = "You are the researcher."
tools = ["probe.sleep"]
[identities.researcher.keys]
"probe.sleep" = "WRITE"
"entropic.complete" = "WRITE"
"""
SAMPLING = "entropic-mcp/sampling"


def _turn(call_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A scripted model's sampling answer: one tool call."""
    use = {"type": "tool_use", "id": call_id, "name": tool, "input": arguments}
    return {"role": "assistant", "content": [use], "model": "scripted", "stopReason": "toolUse"}


def test_a_sampled_delegation_that_runs_long_is_a_task_whose_turns_come_through_tasks_update(
    tmp_path: Path,
) -> None:
    """Each child turn is an input request; a round that runs long (the child's 1.5 s tool) turns
    the call into a task, whose next turn is asked as input_required and answered by tasks/update."""
    served = start_http(write_project(tmp_path / "project", DELEGATION))
    try:
        url = served.url
        rpc = Rpc("delegates", sampling=True)
        arguments = {"target": "researcher", "task": "Sleep a little, then report."}
        first = rpc.call(url, "entropic_delegate", arguments)["result"]
        assert first["resultType"] == "input_required" and SAMPLING in first["inputRequests"], first
        retry = {
            "name": "entropic_delegate",
            "arguments": arguments,
            "requestState": first["requestState"],
            "inputResponses": {SAMPLING: _turn("s1", "probe_sleep", {"seconds": 1.5})},
        }
        created = rpc(url, "tools/call", retry, "entropic_delegate")["result"]
        assert created["resultType"] == "task", created
        waiting = rpc.until_terminal(url, created["taskId"])
        assert waiting["status"] == "input_required" and SAMPLING in waiting["inputRequests"], waiting
        asked = waiting["inputRequests"][SAMPLING]
        assert asked["method"] == "sampling/createMessage"
        answer = {SAMPLING: _turn("s2", "entropic_complete", {"summary": "slept 1.5 s"})}
        assert _acknowledged(rpc(url, "tasks/update", {"taskId": created["taskId"], "inputResponses": answer}, ""))
        done = rpc.until_terminal(url, created["taskId"])
        assert done["status"] == "completed", done
        body = json.loads(done["result"]["content"][0]["text"])
        assert body["status"] == "completed" and body["summary"] == "slept 1.5 s", body
    finally:
        stop(served.process)


def test_how_long_a_call_runs_before_it_becomes_a_task_is_a_setting(tmp_path: Path) -> None:
    with deployment(tmp_path, 1, "[serve]\ntask_after_seconds = 4.0\n") as (url, _, _):
        rpc = Rpc("after-setting")
        answered = rpc.call(url, "probe_sleep", {"seconds": 2})["result"]
        assert answered["resultType"] == "complete" and _text({"result": answered}) == "slept 2 s"
        created = rpc.call(url, "probe_sleep", {"seconds": 5})["result"]
        assert created["resultType"] == "task"
        assert rpc.until_terminal(url, created["taskId"])["status"] == "completed"
