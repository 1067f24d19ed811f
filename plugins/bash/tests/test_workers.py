"""Issue 27: two workers (server managers) on one store run a conversation's calls in one
working directory, call for call; background run ids never name another worker's or
conversation's run."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from bash_helpers import make_manager
from entropic_mcp import CallContext, ServerManager
from entropic_mcp_bash._runs import NAMESPACE

BACKENDS = ["tinydb", "postgres"]


def call(manager: ServerManager, command: str, conversation: str = "a", **args: Any) -> tuple[str, dict[str, Any]]:
    args = {"format": "json", "command": command, **args}
    outcome = manager.call_sync("bash.execute", args, CallContext(conversation_id=conversation))
    return outcome.kind, orjson.loads(outcome.response.result)


def tool(manager: ServerManager, name: str, args: dict[str, Any], conversation: str = "a") -> dict[str, Any]:
    outcome = manager.call_sync(f"bash.{name}", {"format": "json", **args}, CallContext(conversation_id=conversation))
    return orjson.loads(outcome.response.result)


@pytest.fixture(params=BACKENDS)
def workers(
    request: pytest.FixtureRequest, root: Path, tmp_path: Path
) -> Iterator[tuple[ServerManager, ServerManager]]:
    if request.param == "tinydb":
        storage = {"backend": "tinydb", "path": str(tmp_path / "store")}
        made = [make_manager(root, storage=storage)[0] for _ in range(2)]
        yield made[0], made[1]
        for manager in made:
            manager.close()
        return
    testing = pytest.importorskip("entropic_mcp_postgres.testing", reason="the postgres plugin is not installed")
    from entropic_mcp_postgres import PostgresBackend

    dsn = testing.test_dsn()  # skips without ENTROPIC_MCP_TEST_POSTGRES_DSN
    with testing.fresh_schema(dsn, "bash") as schema:
        stores = [PostgresBackend(dsn, schema=schema) for _ in range(2)]
        made = [make_manager(root, storage={"backend": "tinydb"}, store=store)[0] for store in stores]
        yield made[0], made[1]
        for manager, store in zip(made, stores, strict=True):
            manager.close()
            store.close()


def test_two_workers_give_the_same_cwd_call_for_call(workers: tuple[ServerManager, ServerManager], root: Path) -> None:
    first, second = workers
    (root / "src" / "deep").mkdir(parents=True)
    assert call(first, "cd src")[1]["cwd"] == "src"
    kind, data = call(second, "pwd")
    assert kind == "ok" and data["output"] == f"{root / 'src'}\n" and data["cwd"] == "src"
    assert call(second, "cd deep")[1]["cwd"] == "src/deep"
    assert call(first, "pwd")[1]["output"] == f"{root / 'src' / 'deep'}\n"
    assert tool(second, "list", {})["cwd"] == "src/deep"
    # Another conversation is not moved; back to the root deletes the document.
    assert call(second, "pwd", conversation="b")[1]["output"] == f"{root}\n"
    assert "cwd" not in call(first, "cd ../..")[1]
    assert call(second, "pwd")[1]["output"] == f"{root}\n"
    assert first.storage.load_state(NAMESPACE, "a") == (None, 0)


def test_ending_the_conversation_on_one_worker_resets_it_for_both(
    workers: tuple[ServerManager, ServerManager], root: Path
) -> None:
    first, second = workers
    (root / "src").mkdir()
    call(second, "pwd", conversation="b")  # the second worker has its store open
    call(first, "cd src")
    second.end_conversation("a")
    assert first.storage.load_state(NAMESPACE, "a") == (None, 0)
    assert call(first, "pwd")[1]["output"] == f"{root}\n"


def test_a_write_relative_to_a_directory_another_worker_chose_is_checked_there(root: Path, tmp_path: Path) -> None:
    storage = {"backend": "tinydb", "path": str(tmp_path / "store")}
    permissions = {"default": "allow", "deny": ["filesystem.write_file:src/secret.txt"]}
    first, _ = make_manager(root, storage=storage, permissions=permissions)
    second, _ = make_manager(root, storage=storage, permissions=permissions)
    try:
        (root / "src").mkdir()
        call(first, "cd src")
        # The second worker checked the redirection in the root only: it is not run...
        kind, data = call(second, "echo x > secret.txt")
        assert data["error"] == "cwd_changed" and "'src'" in data["message"]
        assert not (root / "src" / "secret.txt").exists()
        # ...and the same call again is checked in src, where the rule denies it.
        kind, data = call(second, "echo x > secret.txt")
        assert kind == "rejected_permission" and not (root / "src" / "secret.txt").exists()
        # A command writing nothing relative runs at once.
        assert call(second, "echo y > /dev/null; pwd")[1]["output"] == f"{root / 'src'}\n"
    finally:
        first.close()
        second.close()


def test_a_stored_directory_outside_the_root_is_ignored(
    workers: tuple[ServerManager, ServerManager], root: Path
) -> None:
    first, _ = workers
    first.storage.save_state(NAMESPACE, "a", {"cwd": "../.."}, 0)
    assert call(first, "pwd")[1]["output"] == f"{root}\n"


def test_a_stored_directory_now_a_symlink_out_of_the_root_is_ignored(
    workers: tuple[ServerManager, ServerManager], root: Path, tmp_path: Path
) -> None:
    first, second = workers
    (root / "src").mkdir()
    call(first, "cd src")
    (root / "src").rmdir()
    (root / "src").symlink_to(tmp_path)
    assert call(second, "pwd")[1]["output"] == f"{root}\n"


def test_run_ids_are_short_and_never_shared(workers: tuple[ServerManager, ServerManager]) -> None:
    first, second = workers
    ids = set()
    for manager in (first, second):
        kind, data = call(manager, "sleep 30", run_in_background=True)
        assert kind == "ok", data
        ids.add(data["run_id"])
    assert len(ids) == 2 and all(re.fullmatch(r"bg[0-9a-f]{6}", run_id) for run_id in ids)
    mine, theirs = sorted(ids)
    for manager in (first, second):
        for run_id in ids:
            if any(r.run_id == run_id for r in manager.servers["bash"].runs.of("a")):
                # Another conversation on the same worker cannot see or stop it.
                assert tool(manager, "kill", {"run_id": run_id}, conversation="b")["error"] == "unknown_run"
                assert tool(manager, "kill", {"run_id": run_id})["status"] == "killed"
            else:
                # Nor the other worker's run: the id answers unknown_run, it never hits a run here.
                assert tool(manager, "kill", {"run_id": run_id})["error"] == "unknown_run"
    assert os.environ.get("__ENTROPIC_BASH_CWD") is None
