"""Issue 27: background runs on a store several workers share (postgres). A run started on one
worker is read, listed, killed and ended on the other, with the answers one worker gives."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from bash_helpers import gone, live_group_members, make_manager
from entropic_mcp import CallContext, ServerManager
from entropic_mcp_bash import _shared

PATIENCE = 20.0
#: A run that prints "one", then "two" once the file go exists, then waits for the file end.
STEPS = "echo one; until [ -e go ]; do sleep 0.02; done; echo two; until [ -e end ]; do sleep 0.02; done; exit 3"


def tool(manager: ServerManager, name: str, args: dict[str, Any], conversation: str = "a") -> dict[str, Any]:
    outcome = manager.call_sync(f"bash.{name}", {"format": "json", **args}, CallContext(conversation_id=conversation))
    data = orjson.loads(outcome.response.result)
    assert isinstance(data, dict)
    return data


def start(manager: ServerManager, command: str, conversation: str = "a") -> str:
    data = tool(manager, "execute", {"command": command, "run_in_background": True}, conversation)
    assert data["status"] == "running", data
    return str(data["run_id"])


def read_until(manager: ServerManager, run_id: str, text: str) -> tuple[str, dict[str, Any]]:
    """Reads until the output so far holds ``text``; the output and the last answer."""
    output = ""
    end = time.monotonic() + PATIENCE
    while time.monotonic() < end:
        data = tool(manager, "output", {"run_id": run_id})
        assert "output" in data, data
        output += data["output"]
        if text in output:
            return output, data
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never came; read {output!r}")


def until(condition: Any) -> None:
    end = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < end, "the condition never held"
        time.sleep(0.05)


def managers(root: Path, stores: list[Any], **bash: Any) -> list[ServerManager]:
    storage = {"backend": "postgres"}  # shares_state: runs go through the store
    return [make_manager(root, storage=storage, store=store, bash=bash or None)[0] for store in stores]


@pytest.fixture
def stores() -> Iterator[list[Any]]:
    testing = pytest.importorskip("entropic_mcp_postgres.testing", reason="the postgres plugin is not installed")
    from entropic_mcp_postgres import PostgresBackend

    dsn = testing.test_dsn()  # skips without ENTROPIC_MCP_TEST_POSTGRES_DSN
    with testing.fresh_schema(dsn, "bashbg") as schema:
        opened = [PostgresBackend(dsn, schema=schema) for _ in range(2)]
        yield opened
        for store in opened:
            store.close()


@pytest.fixture
def workers(root: Path, stores: list[Any]) -> Iterator[tuple[ServerManager, ServerManager]]:
    made = managers(root, stores)
    yield made[0], made[1]
    for manager in made:
        manager.close()


def local_run(manager: ServerManager, run_id: str) -> Any:
    return next(r for r in manager.servers["bash"].runs.of("a") if r.run_id == run_id)


def test_output_is_read_on_either_worker_from_one_shared_position(
    workers: tuple[ServerManager, ServerManager], root: Path
) -> None:
    first, second = workers
    run_id = start(first, STEPS)
    output, data = read_until(second, run_id, "one\n")
    assert output == "one\n" and data["status"] == "running" and data["run_id"] == run_id
    # What the second worker read is read: the owner has nothing new to say.
    assert tool(first, "output", {"run_id": run_id})["output"] == ""
    (root / "go").touch()
    assert read_until(first, run_id, "two\n")[0] == "two\n"
    (root / "end").touch()
    until(lambda: tool(second, "output", {"run_id": run_id})["status"] != "running")
    last = tool(second, "output", {"run_id": run_id})
    assert last["status"] == "exited" and last["exit_code"] == 3 and last["output"] == ""
    assert re.fullmatch(r"bg[0-9a-f]{6}", run_id)


def test_the_filter_applies_on_the_other_worker(workers: tuple[ServerManager, ServerManager]) -> None:
    first, second = workers
    run_id = start(first, "printf 'ok 1\\nerror 2\\nok 3\\n'")
    until(lambda: tool(first, "list", {})["runs"][0]["status"] == "exited")
    data = tool(second, "output", {"run_id": run_id, "filter": "^error"})
    assert data["output"] == "error 2\n" and data["exit_code"] == 0


def test_a_kill_from_the_other_worker_stops_the_whole_group(
    workers: tuple[ServerManager, ServerManager], root: Path
) -> None:
    first, second = workers
    run_id = start(first, "sleep 300 & echo started; wait")
    read_until(second, run_id, "started")
    pid = local_run(first, run_id).pid
    assert live_group_members(pid)
    began = time.monotonic()
    data = tool(second, "kill", {"run_id": run_id})
    took = time.monotonic() - began
    assert data["status"] == "killed" and "kill_requested" not in data, data
    assert gone(pid) and not live_group_members(pid)
    # The owner polls every FLUSH_SECONDS, then TERM (grace 0.3 s in these tests).
    assert took < 2 * 0.3 + 1.0 + 2 * _shared.FLUSH_SECONDS + 1.0
    assert tool(first, "output", {"run_id": run_id})["status"] == "killed"
    # Killing again answers the same end.
    assert tool(second, "kill", {"run_id": run_id})["status"] == "killed"


def test_list_shows_the_runs_of_every_worker(workers: tuple[ServerManager, ServerManager], root: Path) -> None:
    first, second = workers
    ids = [start(first, STEPS), start(second, STEPS)]
    read_until(first, ids[1], "one")
    for manager in (first, second):
        runs = tool(manager, "list", {})["runs"]
        assert [r["run_id"] for r in runs] == ids
        assert [r["status"] for r in runs] == ["running", "running"]
        assert [r["command"] for r in runs] == [STEPS, STEPS]
    until(lambda: tool(second, "list", {})["runs"][0]["unread_bytes"] == len("one\n"))
    assert tool(second, "list", {})["runs"][1]["unread_bytes"] == 0
    # Another conversation sees none of them.
    assert tool(first, "list", {}, conversation="b")["runs"] == []
    assert tool(second, "output", {"run_id": ids[0]}, conversation="b")["error"] == "unknown_run"


def test_the_unread_cap_drops_the_oldest_bytes_as_on_one_worker(root: Path, stores: list[Any]) -> None:
    first, second = managers(root, stores, max_output_bytes=1000)
    try:
        # Printed over several flushes, so whole chunks fall out of the window.
        printing = "for i in $(seq 20); do head -c 3000 /dev/zero | tr '\\0' x; sleep 0.1; done; echo; echo last"
        run_id = start(first, printing)
        until(lambda: tool(first, "list", {})["runs"][0]["status"] == "exited")
        data = tool(second, "output", {"run_id": run_id})
        assert len(data["output"].encode()) == 1000 and data["output"].endswith("x\nlast\n")
        assert data["dropped_bytes"] == 60000 + len("\nlast\n") - 1000
        # Only the window is kept in the store, in whole chunks.
        record, _ = first.storage.load_state(_shared.RUN, run_id)
        assert sum(length for _, _, length in record["chunks"]) <= 1000 + _shared.CHUNK_BYTES
    finally:
        first.close()
        second.close()


def _record(run_id: str, heartbeat: float) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "conversation": "a",
        "command": "make",
        "owner": "gone:1:000000",
        "pid": None,
        "status": "running",
        "exit_code": None,
        "started": heartbeat - 5,
        "ended": None,
        "heartbeat": heartbeat,
        "written": 0,
        "max_unread": 1000,
        "chunks": [],
    }


def test_a_run_whose_worker_stopped_beating_is_lost(workers: tuple[ServerManager, ServerManager]) -> None:
    first, second = workers
    store = first.storage
    store.save_state(_shared.RUN, "bg0000aa", _record("bg0000aa", time.time() - _shared.LOST_AFTER - 1), 0)
    store.save_state(_shared.INDEX, "a", {"runs": ["bg0000aa"]}, 0)
    assert [r["status"] for r in tool(second, "list", {})["runs"]] == ["lost"]
    assert tool(first, "output", {"run_id": "bg0000aa"})["status"] == "lost"
    began = time.monotonic()
    assert tool(first, "kill", {"run_id": "bg0000aa"})["status"] == "lost"
    assert time.monotonic() - began < 1.0  # nothing to wait for
    # A lost run counts against no limit, and the conversation's end deletes it.
    second.end_conversation("a")  # no context: this worker's own runs only
    first.servers["bash"].runs.end("a", None, store)
    assert store.load_state(_shared.RUN, "bg0000aa") == (None, 0)
    assert store.load_state(_shared.INDEX, "a") == (None, 0)


def test_a_kill_the_owner_does_not_answer_says_it_is_still_stopping(
    workers: tuple[ServerManager, ServerManager],
) -> None:
    first, _ = workers
    store = first.storage
    store.save_state(_shared.RUN, "bg0000bb", _record("bg0000bb", time.time()), 0)
    began = time.monotonic()
    data = tool(first, "kill", {"run_id": "bg0000bb"})
    took = time.monotonic() - began
    assert data["status"] == "running" and data["kill_requested"] is True
    assert "still stopping" in data["note"]
    assert took < 2 * 0.3 + 1.0 + 2 * _shared.FLUSH_SECONDS + 1.0 + 1.0  # bounded
    assert store.load_state(_shared.KILL, "bg0000bb")[0] == {"forget": False}


def test_the_conversations_end_on_one_worker_stops_its_runs_on_the_other(
    workers: tuple[ServerManager, ServerManager],
) -> None:
    first, second = workers
    run_id = start(first, "sleep 300 & echo started; wait")
    read_until(second, run_id, "started")
    pid = local_run(first, run_id).pid
    second.servers["bash"].runs.end("a", None, second.storage)
    until(lambda: gone(pid) and not live_group_members(pid))
    until(lambda: first.storage.load_state(_shared.RUN, run_id) == (None, 0))
    assert first.storage.load_state(_shared.INDEX, "a") == (None, 0)
    assert tool(first, "output", {"run_id": run_id})["error"] == "unknown_run"


def test_a_closing_worker_records_its_runs_killed_for_the_others(root: Path, stores: list[Any]) -> None:
    first, second = managers(root, stores)
    try:
        run_id = start(first, "sleep 300")
        first.close()
        data = tool(second, "output", {"run_id": run_id})
        assert data["status"] == "killed"
    finally:
        first.close()
        second.close()


def test_the_running_limit_counts_the_conversations_runs_on_every_worker(root: Path, stores: list[Any]) -> None:
    first, second = managers(root, stores, max_background_runs=1)
    try:
        run_id = start(first, "sleep 300")
        data = tool(second, "execute", {"command": "sleep 1", "run_in_background": True})
        assert data["error"] == "too_many_runs" and run_id in data["message"]
        # Another conversation has its own count.
        assert start(second, "sleep 300", conversation="b")
    finally:
        first.close()
        second.close()


def _scenario(one: ServerManager, other: ServerManager, root: Path) -> list[dict[str, Any]]:
    """Start on ``one``, everything else alternating between the two: what each call answered."""
    answers: list[dict[str, Any]] = []
    run_id = start(one, STEPS)
    read_until(other, run_id, "one")
    answers.append(tool(one, "output", {"run_id": run_id}))
    (root / "go").touch()
    answers.append({"read": read_until(other, run_id, "two")[0]})
    answers.append(tool(one, "list", {})["runs"])
    answers.append(tool(other, "kill", {"run_id": run_id}))
    answers.append(tool(one, "output", {"run_id": run_id}))
    answers.append(tool(other, "output", {"run_id": "bg000000"}))
    (root / "go").unlink()
    for answer in answers:
        for item in answer if isinstance(answer, list) else [answer]:
            item.pop("elapsed_ms", None)
            item["run_id"] = "<id>" if "run_id" in item else None
            if "message" in item:
                item["message"] = re.sub(r"'bg[0-9a-f]{6}'", "<id>", item["message"])
    return answers


def test_two_workers_answer_as_one_worker(root: Path, stores: list[Any]) -> None:
    alone, _ = make_manager(root, storage={"backend": "tinydb", "path": str(root.parent / "store")})
    try:
        single = _scenario(alone, alone, root)
    finally:
        alone.close()
    first, second = managers(root, stores)
    try:
        shared = _scenario(first, second, root)
    finally:
        first.close()
        second.close()
    assert shared == single
    assert single[3]["status"] == "killed" and single[1] == {"read": "two\n", "run_id": None}
