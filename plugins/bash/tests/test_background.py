"""Issue 17: background runs (bash.execute run_in_background, bash.output, bash.kill, bash.list)
and the working directory that persists per conversation — all through the real pipeline."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from bash_helpers import gone, make_manager
from entropic_mcp import CallContext, ServerManager
from entropic_mcp_bash import BashServer

#: Upper bound on how long a poll loop waits for a run to change (never an assertion on time).
PATIENCE = 20.0


class Session:
    """One manager with the bash server; calls made as a conversation."""

    def __init__(self, manager: ServerManager, server: BashServer) -> None:
        self.manager = manager
        self.server = server

    def call(self, tool: str, args: dict[str, Any], conversation: str = "a") -> tuple[str, dict[str, Any]]:
        # The structure is what these tests check: the JSON form (the text form has its own tests).
        args = {"format": "json", **args}
        result = self.manager.call_sync(f"bash.{tool}", args, CallContext(conversation_id=conversation))
        return result.kind, orjson.loads(result.response.result)

    def start(self, command: str, conversation: str = "a", **args: Any) -> str:
        kind, data = self.call("execute", {"command": command, "run_in_background": True, **args}, conversation)
        assert kind == "ok", data
        assert data["status"] == "running"
        return data["run_id"]

    def until_done(self, run_id: str, conversation: str = "a") -> tuple[str, dict[str, Any]]:
        """Every output read until the run ended, and the last read."""
        output = []
        end = time.monotonic() + PATIENCE
        while time.monotonic() < end:
            kind, data = self.call("output", {"run_id": run_id}, conversation)
            assert kind in ("ok", "ok_empty"), data
            output.append(data["output"])
            if data["status"] != "running":
                return "".join(output), data
            time.sleep(0.05)
        raise AssertionError(f"{run_id} did not end")


@pytest.fixture
def session(root: Path) -> Iterator[Session]:
    manager, server = make_manager(root, permissions={"default": "allow"}, bash={"max_background_runs": 3})
    yield Session(manager, server)
    manager.close()


def test_a_background_run_returns_at_once_and_its_output_is_read_in_pieces(session: Session) -> None:
    run_id = session.start("for i in 1 2 3; do echo line $i; sleep 0.1; done; exit 7")
    output, last = session.until_done(run_id)
    assert output == "line 1\nline 2\nline 3\n"
    assert last["status"] == "exited" and last["exit_code"] == 7
    kind, again = session.call("output", {"run_id": run_id})
    assert again["output"] == "" and again["status"] == "exited"


def test_a_character_split_between_reads_arrives_whole(session: Session) -> None:
    run_id = session.start("printf '\\303'; sleep 0.3; printf '\\251\\n'")
    output, _ = session.until_done(run_id)
    assert output == "\u00e9\n"


def test_output_filter_keeps_matching_lines(session: Session) -> None:
    run_id = session.start("printf 'ok 1\\nerror 2\\nok 3\\nerror 4\\n'")
    end = time.monotonic() + PATIENCE
    while session.call("list", {})[1]["runs"][0]["status"] == "running" and time.monotonic() < end:
        time.sleep(0.05)
    _, data = session.call("output", {"run_id": run_id, "filter": "^error"})
    assert data["output"] == "error 2\nerror 4\n"
    kind, bad = session.call("output", {"run_id": run_id, "filter": "("})
    assert kind == "error" and bad["error"] == "invalid_args"


def _finished(session: Session, run_id: str) -> None:
    end = time.monotonic() + PATIENCE
    while session.call("list", {})[1]["runs"][0]["status"] == "running" and time.monotonic() < end:
        time.sleep(0.05)


def test_a_catastrophic_filter_answers_at_once_because_the_engine_is_linear(session: Session) -> None:
    # The same search in a process of its own, so that a backtracking engine (2^40 steps here)
    # fails this bounded liveness check instead of freezing the test run with the GIL held.
    probe = "from entropic_mcp_bash._runs import LineFilter; print(LineFilter('(a+)+$').search('a' * 40 + 'b'))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=PATIENCE * 4)
    assert done.stdout.strip() == "False"
    run_id = session.start("printf '%s\\n' " + "a" * 40 + "b")
    _finished(session, run_id)
    kind, data = session.call("output", {"run_id": run_id, "filter": "(a+)+$"})
    assert kind in ("ok", "ok_empty") and data["output"] == ""


@pytest.mark.parametrize(
    ("pattern", "named"),
    [("(?=x)", "(?="), ("(?!x)", "(?!"), ("(?<=x)y", "(?<"), ("(a)\\1", "\\1")],
)
def test_a_filter_the_linear_engine_cannot_run_is_refused_naming_the_construct(
    session: Session, pattern: str, named: str
) -> None:
    run_id = session.start("echo hi")
    kind, data = session.call("output", {"run_id": run_id, "filter": pattern})
    assert kind == "error" and data["error"] == "invalid_args"
    assert named in data["message"] and "RE2" in data["message"]


def test_kill_stops_the_whole_group(session: Session) -> None:
    run_id = session.start("sleep 1000 & echo $!; (trap '' TERM; sleep 1000) & echo $!; echo $$; sleep 1000")
    pids: list[int] = []
    end = time.monotonic() + PATIENCE
    while len(pids) < 3 and time.monotonic() < end:
        pids += [int(p) for p in session.call("output", {"run_id": run_id})[1]["output"].split()]
        time.sleep(0.05)
    assert len(pids) == 3
    kind, data = session.call("kill", {"run_id": run_id})
    assert kind in ("ok", "ok_empty") and data["status"] == "killed"
    assert all(gone(pid) for pid in pids)


def test_children_left_behind_are_stopped_when_the_shell_exits(session: Session) -> None:
    run_id = session.start("sleep 1000 & echo $!")
    output, last = session.until_done(run_id)
    assert last["status"] == "exited"
    pid = int(output.split()[0])
    end = time.monotonic() + PATIENCE
    while not gone(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert gone(pid)


def test_a_background_run_has_its_own_timeout(session: Session) -> None:
    run_id = session.start("echo $$; sleep 1000", timeout_seconds=0.5)
    output, last = session.until_done(run_id)
    assert last["status"] == "timeout"
    assert gone(int(output.split()[0]))


def test_runs_belong_to_their_conversation_and_end_with_it(session: Session) -> None:
    run_id = session.start("echo $$; sleep 1000", conversation="a")
    kind, data = session.call("output", {"run_id": run_id}, conversation="b")
    assert kind == "error" and data["error"] == "unknown_run"
    assert session.call("list", {}, conversation="b")[1]["runs"] == []
    pid = None
    end = time.monotonic() + PATIENCE
    while pid is None and time.monotonic() < end:
        text = session.call("output", {"run_id": run_id})[1]["output"]
        pid = int(text.split()[0]) if text else None
    assert pid is not None
    session.manager.end_conversation("a")
    end = time.monotonic() + PATIENCE
    while not gone(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert gone(pid)
    kind, data = session.call("output", {"run_id": run_id})
    assert data["error"] == "unknown_run"


def test_closing_the_server_stops_every_run(root: Path) -> None:
    manager, _ = make_manager(root, permissions={"default": "allow"})
    session = Session(manager, _)
    run_id = session.start("echo $$; sleep 1000")
    pid = None
    end = time.monotonic() + PATIENCE
    while pid is None and time.monotonic() < end:
        text = session.call("output", {"run_id": run_id})[1]["output"]
        pid = int(text.split()[0]) if text else None
    assert pid is not None
    manager.close()
    end = time.monotonic() + PATIENCE
    while not gone(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert gone(pid)


def test_the_number_of_running_commands_per_conversation_is_bounded(session: Session) -> None:
    ids = [session.start("sleep 1000") for _ in range(3)]
    kind, data = session.call("execute", {"command": "sleep 1000", "run_in_background": True})
    assert kind == "error" and data["error"] == "too_many_runs"
    assert all(i in data["message"] for i in ids)
    # another conversation has its own allowance
    session.start("true", conversation="b")
    session.call("kill", {"run_id": ids[0]})
    session.start("true")


def test_unread_output_is_capped_and_the_drop_counted(root: Path) -> None:
    manager, server = make_manager(root, permissions={"default": "allow"}, bash={"max_output_bytes": 1024})
    session = Session(manager, server)
    try:
        run_id = session.start("head -c 500000 /dev/zero | tr '\\0' x; echo; echo END")
        end = time.monotonic() + PATIENCE
        while session.call("list", {})[1]["runs"][0]["status"] == "running" and time.monotonic() < end:
            time.sleep(0.05)
        _, data = session.call("output", {"run_id": run_id})
        assert data["output"].endswith("END\n")
        assert len(data["output"].encode()) <= 1024
        assert data["dropped_bytes"] == 500005 - len(data["output"].encode())
    finally:
        manager.close()


def test_polling_is_never_refused_as_a_duplicate(session: Session) -> None:
    run_id = session.start("sleep 1000")
    kinds = [session.call("output", {"run_id": run_id})[0] for _ in range(6)]
    assert set(kinds) <= {"ok", "ok_empty"}
    assert {session.call("list", {})[0] for _ in range(4)} <= {"ok", "ok_empty"}


def test_a_background_command_is_checked_like_any_other(root: Path) -> None:
    manager, server = make_manager(
        root, permissions={"default": "allow", "deny": ["bash.execute:rm *"], "allow_read": True}
    )
    session = Session(manager, server)
    try:
        (root / "victim").write_text("x")
        kind, _ = session.call("execute", {"command": "ls; rm victim", "run_in_background": True})
        assert kind == "rejected_permission"
        assert (root / "victim").exists()
    finally:
        manager.close()


def test_background_runs_can_be_turned_off(root: Path) -> None:
    manager, server = make_manager(root, permissions={"default": "allow"}, bash={"max_background_runs": 0})
    try:
        kind, data = Session(manager, server).call("execute", {"command": "true", "run_in_background": True})
        assert data["error"] == "background_disabled"
    finally:
        manager.close()


# -- the working directory -------------------------------------------------------------------


def test_cd_carries_over_to_the_next_call(session: Session, root: Path) -> None:
    (root / "sub" / "deeper").mkdir(parents=True)
    kind, data = session.call("execute", {"command": "cd sub"})
    assert data["cwd"] == "sub"
    _, data = session.call("execute", {"command": "pwd && cd deeper"})
    assert data["output"] == f"{root / 'sub'}\n" and data["cwd"] == "sub/deeper"
    _, data = session.call("execute", {"command": "pwd"})
    assert data["output"] == f"{root / 'sub' / 'deeper'}\n" and data["cwd"] == "sub/deeper"
    _, data = session.call("list", {})
    assert data["cwd"] == "sub/deeper"
    # another conversation is where it was
    _, other = session.call("execute", {"command": "pwd"}, conversation="b")
    assert other["output"] == f"{root}\n" and "cwd" not in other
    # a background run starts where the conversation is
    output, _ = session.until_done(session.start("pwd"))
    assert output == f"{root / 'sub' / 'deeper'}\n"


def test_pushd_moves_the_conversation_too(session: Session, root: Path) -> None:
    (root / "sub").mkdir()
    _, data = session.call("execute", {"command": "pushd sub > /dev/null"})
    assert data["cwd"] == "sub"


def test_leaving_the_root_is_not_kept(session: Session, root: Path) -> None:
    (root / "sub").mkdir()
    session.call("execute", {"command": "cd sub"})
    kind, data = session.call("execute", {"command": "cd /tmp"})
    assert "outside the project" in data["note"] and "cwd" not in data
    _, data = session.call("execute", {"command": "pwd"})
    assert data["output"] == f"{root}\n"


def test_nested_shells_and_subshells_do_not_move_the_conversation(session: Session, root: Path) -> None:
    (root / "sub").mkdir()
    for command in ("bash -c 'cd sub'", "(cd sub)", "sh -c 'cd sub'"):
        _, data = session.call("execute", {"command": command})
        assert "cwd" not in data, command


def test_a_removed_directory_falls_back_to_the_root(session: Session, root: Path) -> None:
    (root / "gone").mkdir()
    session.call("execute", {"command": "cd gone"})
    (root / "gone").rmdir()
    _, data = session.call("execute", {"command": "pwd"})
    assert data["output"] == f"{root}\n"


def test_working_dir_still_wins_and_end_conversation_resets(session: Session, root: Path) -> None:
    (root / "a").mkdir()
    (root / "b").mkdir()
    session.call("execute", {"command": "cd a"})
    _, data = session.call("execute", {"command": "pwd", "working_dir": "b"})
    assert data["output"] == f"{root / 'b'}\n"
    session.manager.end_conversation("a")
    _, data = session.call("execute", {"command": "pwd"})
    assert data["output"] == f"{root}\n"


def test_a_command_whose_exit_trap_replaces_ours_keeps_the_old_directory(session: Session, root: Path) -> None:
    (root / "sub").mkdir()
    session.call("execute", {"command": "cd sub"})
    _, data = session.call("execute", {"command": "trap 'true' EXIT; cd ..", "working_dir": "sub"})
    _, data = session.call("execute", {"command": "pwd"})
    assert data["output"] == f"{root / 'sub'}\n"


def test_redirections_are_checked_in_every_directory_a_conversation_is_in(session: Session, root: Path) -> None:
    (root / "sub").mkdir()
    session.call("execute", {"command": "cd sub"})
    manager = session.manager
    manager.permissions.add("deny", ["filesystem.write_file:sub/key"])
    kind, _ = session.call("execute", {"command": "echo x > key"})
    assert kind == "rejected_permission"
    assert not (root / "sub" / "key").exists()


def test_the_cwd_can_be_kept_fixed(root: Path) -> None:
    (root / "sub").mkdir()
    manager, server = make_manager(root, permissions={"default": "allow"}, bash={"persist_cwd": False})
    try:
        session = Session(manager, server)
        session.call("execute", {"command": "cd sub"})
        _, data = session.call("execute", {"command": "pwd"})
        assert data["output"] == f"{root}\n"
    finally:
        manager.close()


def test_a_host_that_exits_without_closing_leaves_no_run_behind(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = """
import sys, time
from pathlib import Path
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp_bash import BashServer
root = Path(sys.argv[1])
server = BashServer(root=root)
config = config_from_dict({"storage": {"backend": "none"}, "permissions": {"default": "allow"}}, root=root)
manager = ServerManager(config, servers=[server])
ctx = CallContext(conversation_id="c")
result = manager.call_sync("bash.execute", {"command": "echo $$; sleep 1000", "run_in_background": True, "format": "json"}, ctx)
run_id = result.response.result.split('"run_id":"')[1].split('"')[0]
for _ in range(200):
    out = manager.call_sync("bash.output", {"run_id": run_id, "format": "json"}, ctx).response.result
    if '"output":"' in out and out.split('"output":"')[1][:1].isdigit():
        print(out.split('"output":"')[1].split("\\\\n")[0], flush=True)
        break
    time.sleep(0.05)
"""  # exits without manager.close()
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60).stdout
    pid = int(out.split()[0])
    end = time.monotonic() + PATIENCE
    while not gone(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert gone(pid)
