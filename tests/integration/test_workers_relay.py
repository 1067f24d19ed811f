"""Stateless workers (issue 27), questions asked later in a call that reach the other worker:
task-shaped calls (the ``io.modelcontextprotocol/tasks`` extension) whose questions are answered
by ``tasks/update`` and stopped by ``tasks/cancel``, and the asking worker's heartbeat (it dies:
the other worker says so at once, or within the heartbeat's staleness, instead of hanging).

Two ``entropic-mcp serve --transport http`` workers on one PostgreSQL store: the call's first
request goes to one, every answer, poll and cancel to the other (each answer crosses), and the
same scenario runs through haproxy round robin (docs/deployment.md) and against one worker, with
the same answers. Raw JSON-RPC (test_tasks.Rpc): the SDK's client has no tasks methods.

Needs ``ENTROPIC_MCP_TEST_POSTGRES_DSN`` and ``haproxy`` on PATH (.ci/run installs it).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_tasks import SAMPLING, Rpc, _acknowledged, _turn
from test_workers import deployment

from conftest import group_alive, start_http, wait_until, write_project

pytestmark = [pytest.mark.integration]

APPROVAL = "entropic-mcp/approval"
#: The relay's staleness bound (entropic_mcp._serve._relay.STALE) and heartbeat period.
STALE, HEARTBEAT = 10.0, 1.0


def _project(root: Path, dsn: str, schema: str) -> Path:
    # probe.note is not allowed: the child's call of it asks for an approval mid-call.
    return write_project(
        root,
        f"""\
[entropic_mcp]
plugins = ["probe", "entropic", "postgres"]
[storage]
backend = "postgres"
options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)}, audit_flush_seconds = 0.2 }}
[permissions]
default = "ask"
allow = ["probe.sleep", "probe.slow_ask", "entropic.*"]
[servers.entropic]
tiers = ["lead", "researcher"]
[servers.entropic.profiles.researcher]
system_prompt = "You are the researcher."
tools = ["probe.sleep", "probe.note"]
[identities.researcher.keys]
"probe.sleep" = "WRITE"
"probe.note" = "WRITE"
"entropic.complete" = "WRITE"
""",
    )


def _left(store: tuple[str, str], namespace: str = "serve.relay") -> int:
    import psycopg
    from psycopg import sql

    dsn, schema = store
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.states WHERE namespace = %s").format(sql.Identifier(schema)), (namespace,)
        ).fetchone()
    return int(row[0]) if row else 0


def _audited(store: tuple[str, str], tool: str) -> int:
    import psycopg
    from psycopg import sql

    dsn, schema = store
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(sql.SQL("SELECT record FROM {}.tool_calls").format(sql.Identifier(schema))).fetchall()
    return sum(1 for (record,) in rows if (record.get("tool") or record.get("name")) == tool)


def _asked(task: dict[str, Any]) -> tuple[str, str, str]:
    """What an input_required task asks: (its status, the request's key, the method or the question)."""
    ((key, request),) = task["inputRequests"].items()
    params = request["params"]
    shown = params["message"].split(" (", 1)[0] if "message" in params else params["messages"][-1]["role"]
    return task["status"], key, f"{request['method']}: {shown}"


def _until(rpc: Rpc, url: Callable[[], str], task_id: str) -> dict[str, Any]:
    """``tasks/get`` until the task leaves ``working`` (each poll on the URL ``url()`` names)."""
    end = time.monotonic() + 60
    while True:
        result = rpc.task(url(), "tasks/get", task_id)["result"]
        if result["status"] != "working":
            return result
        assert time.monotonic() < end, result
        time.sleep(0.2)


def _delegation_as_a_task(first: str, then: Callable[[], str], notes: list[Path]) -> list[Any]:
    """A delegation whose long round (the child's 1.5 s sleep) made it a task: the first request on
    ``first``; every later one (retry, polls, tasks/update) on ``then()``. What the client saw."""
    plain = Rpc(f"relay-{uuid.uuid4().hex[:8]}", tasks=False, sampling=True, elicitation=True)
    rpc = Rpc(plain.conversation, sampling=True, elicitation=True)
    arguments = {"target": "researcher", "task": "Sleep, note, report."}
    seen: list[Any] = []
    asked = plain.call(first, "entropic_delegate", arguments)["result"]
    seen.append((asked["resultType"], *asked["inputRequests"]))
    retry = {
        "name": "entropic_delegate",
        "arguments": arguments,
        "requestState": asked["requestState"],
        "inputResponses": {SAMPLING: _turn("s1", "probe_sleep", {"seconds": 1.5})},
    }
    created = rpc(then(), "tools/call", retry, "entropic_delegate")["result"]
    seen.append(created["resultType"])
    task_id = created["taskId"]
    answers = [
        {SAMPLING: _turn("s2", "probe_note", {"text": "noted once"})},  # the child's note: asks its approval
        {APPROVAL: {"action": "accept", "content": {"decision": "allow_once"}}},
        {SAMPLING: _turn("s3", "entropic_complete", {"summary": "slept and noted"})},
    ]
    for answer in answers:
        waiting = _until(rpc, then, task_id)
        seen.append(_asked(waiting))
        assert "requestState" not in waiting
        assert _acknowledged(rpc(then(), "tasks/update", {"taskId": task_id, "inputResponses": answer}, ""))
    done = _until(rpc, then, task_id)
    body = json.loads(done["result"]["content"][0]["text"])
    seen.append((done["status"], body["status"], body["summary"], body["turns"]))
    seen.append([line for path in notes if path.exists() for line in path.read_text().splitlines()])
    return seen


def _outside_root_task(first: str, then: Callable[[], str]) -> list[Any]:
    """A call that asks about a path outside the root after it became a task: allowed, then refused."""
    rpc = Rpc(f"slow-ask-{uuid.uuid4().hex[:8]}", elicitation=True)
    outcomes: list[Any] = []
    for decision in ("allow_once", "deny_once"):
        created = rpc.call(first, "probe_slow_ask", {"seconds": 1.5, "path": "/etc/hostname"})["result"]
        waiting = _until(rpc, then, created["taskId"])
        status, key, _ = _asked(waiting)
        answer = {key: {"action": "accept", "content": {"decision": decision}}}
        assert _acknowledged(rpc(then(), "tasks/update", {"taskId": created["taskId"], "inputResponses": answer}, ""))
        done = _until(rpc, then, created["taskId"])
        outcomes.append((created["resultType"], status, done["status"], done["result"]["content"][0]["text"]))
    return outcomes


def test_a_task_that_asks_mid_call_is_answered_by_tasks_update_on_the_other_worker_as_on_one(
    tmp_path: Path,
) -> None:
    with deployment(tmp_path / "one", 1, _project) as (url, _, store):
        notes = [tmp_path / "one" / "worker0" / "notes.txt"]
        alone = [_delegation_as_a_task(url, lambda: url, notes), _outside_root_task(url, lambda: url)]
        assert _audited(store, "probe.note") == 1
    with deployment(tmp_path / "two", 2, _project) as (balanced, served, store):
        one, other = (worker.url for worker in served)
        notes = [tmp_path / "two" / f"worker{n}" / "notes.txt" for n in range(2)]
        crossed = [_delegation_as_a_task(one, lambda: other, notes), _outside_root_task(one, lambda: other)]
        for path in notes:
            path.unlink(missing_ok=True)
        mixed = [
            _delegation_as_a_task(balanced, lambda: balanced, notes),
            _outside_root_task(balanced, lambda: balanced),
        ]
        # The child's note ran once per delegation (two of them here), and nothing is left waiting.
        assert wait_until(lambda: _audited(store, "probe.note") == 2, 15)
        assert wait_until(lambda: _left(store) == 0, 5)
    assert crossed == alone and mixed == alone
    delegation, outside = alone
    assert delegation[:2] == [("input_required", SAMPLING), "task"]
    assert [step[:2] for step in delegation[2:5]] == [
        ("input_required", SAMPLING),
        ("input_required", APPROVAL),
        ("input_required", SAMPLING),
    ]
    assert "probe.note" in delegation[3][2]
    assert delegation[5] == ("completed", "completed", "slept and noted", 3)
    assert delegation[6] == ["noted once"]
    assert outside == [
        ("task", "input_required", "completed", "allowed"),
        ("task", "input_required", "completed", "refused"),
    ]


def _cancelled_task(first: str, then: str, marker: Path) -> list[Any]:
    """A delegation task whose child runs a long sleep (on the worker that asked) after the answer
    came through ``then``; ``tasks/cancel`` on ``then`` stops it. (status, the sleep stopped)."""
    plain = Rpc(f"cancel-{uuid.uuid4().hex[:8]}", tasks=False, sampling=True)
    rpc = Rpc(plain.conversation, sampling=True)
    arguments = {"target": "researcher", "task": "Sleep long."}
    asked = plain.call(first, "entropic_delegate", arguments)["result"]
    retry = {
        "name": "entropic_delegate",
        "arguments": arguments,
        "requestState": asked["requestState"],
        # Far longer than the cancellation may take; shorter than the probe's 30 s tool timeout.
        "inputResponses": {SAMPLING: _turn("s1", "probe_sleep", {"seconds": 25, "pgid_file": str(marker)})},
    }
    created = rpc(then, "tools/call", retry, "entropic_delegate")["result"]
    assert created["resultType"] == "task", created
    assert wait_until(lambda: marker.exists() and marker.read_text().strip() != "", timeout=30)
    pgid = int(marker.read_text())
    try:
        assert _acknowledged(rpc.task(then, "tasks/cancel", created["taskId"]))
        status = _until(rpc, lambda: then, created["taskId"])["status"]
        # Well before the sleep's own end (25 s): the cancellation reached the worker running it.
        return [status, wait_until(lambda: not group_alive(pgid), timeout=15)]
    finally:
        if group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)


def test_a_task_cancelled_on_the_other_worker_stops_the_call_resumed_on_the_asking_one(tmp_path: Path) -> None:
    with deployment(tmp_path / "one", 1, _project) as (_, served, _):
        alone = _cancelled_task(served[0].url, served[0].url, tmp_path / "pgid-one")
    with deployment(tmp_path / "two", 2, _project) as (_, served, store):
        crossed = _cancelled_task(served[0].url, served[1].url, tmp_path / "pgid-two")
        assert wait_until(lambda: _left(store) == 0, 10)
    assert alone == ["cancelled", True]
    assert crossed == alone


# -- the asking worker dies ---------------------------------------------------------------------------


def _outside_read(rpc: Rpc, url: str, path: str, **extra: Any) -> dict[str, Any]:
    params = {"name": "probe_slow_ask", "arguments": {"seconds": 0, "path": path}, **extra}
    return rpc(url, "tools/call", params, "probe_slow_ask")


ALLOW = {APPROVAL: {"action": "accept", "content": {"decision": "allow_once"}}}


def _gone(answer: dict[str, Any]) -> str:
    """The message of an ``asking_worker_gone`` refusal (asserted to be one)."""
    error = answer.get("error", {})
    assert error.get("data", {}).get("reason") == "asking_worker_gone", answer
    assert "Invalid or expired requestState" not in error["message"]
    return str(error["message"])


def test_a_retry_for_a_worker_that_died_is_told_so_at_once_or_within_the_heartbeat(tmp_path: Path) -> None:
    """A live worker's resumed round outlasting the staleness bound is answered; SIGTERM while a
    question waits (its heartbeat deleted: refused at once); SIGKILL while one waits (refused at
    once once the heartbeat is stale); SIGKILL while the call runs with the answer (the waiting
    retry is told within the staleness bound, not after the 600 s answer timeout)."""
    stale = STALE + 2 * HEARTBEAT
    with deployment(tmp_path, 2, _project) as (_, served, store):
        rpc = Rpc("dies", tasks=False, elicitation=True, sampling=True)
        # 0. Alive: a resumed round that runs longer than the staleness bound is answered, not refused.
        arguments = {"target": "researcher", "task": "Sleep a while."}
        asked = rpc.call(served[0].url, "entropic_delegate", arguments)["result"]
        retry = {
            "name": "entropic_delegate",
            "arguments": arguments,
            "requestState": asked["requestState"],
            "inputResponses": {SAMPLING: _turn("s1", "probe_sleep", {"seconds": stale})},
        }
        resumed = rpc(served[1].url, "tools/call", retry, "entropic_delegate")["result"]
        assert resumed["resultType"] == "input_required" and SAMPLING in resumed["inputRequests"], resumed
        last = resumed["inputRequests"][SAMPLING]["params"]["messages"][-1]["content"][0]
        assert last["content"][0]["text"] == f"slept {stale:g} s", last
        done = {**retry, "requestState": resumed["requestState"]}
        done["inputResponses"] = {SAMPLING: _turn("s2", "entropic_complete", {"summary": "slept"})}
        assert rpc(served[1].url, "tools/call", done, "entropic_delegate")["result"]["resultType"] == "complete"

        # 1. SIGTERM: the worker deletes its heartbeat on the way out.
        asked = _outside_read(rpc, served[0].url, "/etc/hostname")["result"]
        assert asked["resultType"] == "input_required", asked
        served[0].process.terminate()
        assert served[0].process.wait(30) == 0
        started = time.monotonic()
        message = _gone(
            _outside_read(rpc, served[1].url, "/etc/hostname", requestState=asked["requestState"], inputResponses=ALLOW)
        )
        assert time.monotonic() - started < 3, message
        assert "(it stopped)" in message and "nothing was run with this answer" in message
        assert "Call the tool again" in message
        # The refusal used the state up (and removed the question): a second retry is refused as unknown.
        again = _outside_read(
            rpc, served[1].url, "/etc/hostname", requestState=asked["requestState"], inputResponses=ALLOW
        )
        assert again["error"]["data"]["reason"] == "invalid_request_state", again
        served[0] = start_http(tmp_path / "worker0")

        # 2. SIGKILL while the question waits; the user answers after the heartbeat went stale.
        asked = _outside_read(rpc, served[0].url, "/etc/hostname")["result"]
        served[0].process.kill()
        served[0].process.wait(10)
        time.sleep(stale)
        started = time.monotonic()
        message = _gone(
            _outside_read(rpc, served[1].url, "/etc/hostname", requestState=asked["requestState"], inputResponses=ALLOW)
        )
        assert time.monotonic() - started < 3, message
        assert "no heartbeat for" in message
        served[0] = start_http(tmp_path / "worker0")

        # 3. SIGKILL after the worker took the answer and ran the child's long sleep with it.
        arguments = {"target": "researcher", "task": "Sleep long."}
        asked = rpc.call(served[0].url, "entropic_delegate", arguments)["result"]
        marker = tmp_path / "pgid"
        retry = {
            "name": "entropic_delegate",
            "arguments": arguments,
            "requestState": asked["requestState"],
            "inputResponses": {SAMPLING: _turn("s1", "probe_sleep", {"seconds": 28, "pgid_file": str(marker)})},
        }
        answers: list[tuple[float, dict[str, Any]]] = []
        relayed = Rpc(rpc.conversation, tasks=False, sampling=True)

        def relay() -> None:
            answer = relayed(served[1].url, "tools/call", retry, "entropic_delegate")
            answers.append((time.monotonic(), answer))

        waiting = threading.Thread(target=relay)
        waiting.start()
        assert wait_until(lambda: marker.exists() and marker.read_text().strip() != "", timeout=30)
        pgid = int(marker.read_text())
        try:
            served[0].process.kill()
            killed = time.monotonic()
            waiting.join(60)
            assert answers, "the retry never came back"
            answered, answer = answers[0]
            message = _gone(answer)
            assert answered - killed < stale + 3, message
            assert "before it reported what the call did" in message and "Check what it changed" in message
        finally:
            if group_alive(pgid):
                os.killpg(pgid, signal.SIGKILL)
        assert _left(store) == 0  # each refusal removed its question
