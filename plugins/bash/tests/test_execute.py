"""bash.execute end to end: results, process groups, timeouts, caps, descriptors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest
from bash_helpers import gone, live_group_members, make_manager
from entropic_mcp import CallContext, ToolError


def run(
    root: Path,
    command: str,
    *,
    bash: dict[str, Any] | None = None,
    grace: float = 0.3,
    ctx: CallContext | None = None,
    pipeline: dict[str, Any] | None = None,
    **args: Any,
) -> tuple[str, dict[str, Any]]:
    manager, _ = make_manager(root, bash=bash, grace=grace, pipeline=pipeline)
    # The structure is what these tests check: the JSON form (the text form has its own tests).
    args = {"format": "json", **args}
    result = manager.call_sync("bash.execute", {"command": command, **args}, ctx or CallContext(conversation_id="c"))
    return result.kind, orjson.loads(result.response.result)


def test_non_zero_exit_is_a_normal_result(root: Path) -> None:
    kind, data = run(root, "echo out; echo err >&2; exit 3")
    assert kind == "ok"
    assert data == {"exit_code": 3, "output": "out\nerr\n", "elapsed_ms": data["elapsed_ms"], "truncated": False}


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGKILL, 137), (signal.SIGTERM, 143), (signal.SIGSEGV, 139)])
def test_signal_death_reports_128_plus_n(root: Path, sig: int, code: int) -> None:
    kind, data = run(root, f"kill -{int(sig)} $$")
    assert (kind, data["exit_code"]) == ("ok", code)


def test_stdout_and_stderr_keep_the_order_they_were_written(root: Path) -> None:
    _, data = run(root, "for i in 1 2 3 4 5; do echo o$i; echo e$i >&2; done")
    assert data["output"].split() == [f"{s}{i}" for i in range(1, 6) for s in "oe"]


def test_stdin_is_empty(root: Path) -> None:
    _, data = run(root, "cat; read -r line; echo read=$?")
    assert data["output"] == "read=1\n"


def test_runs_as_leader_of_a_new_session(root: Path) -> None:
    _, data = run(root, "read -r pid comm state ppid pgrp session rest < /proc/$$/stat; echo $$ $pgrp $session")
    pid, pgrp, session = data["output"].split()
    assert pid == pgrp == session
    assert int(session) != os.getsid(0)


def test_working_dir_defaults_to_root_and_resolves_inside_it(root: Path) -> None:
    (root / "sub").mkdir()
    assert run(root, "pwd")[1]["output"].strip() == str(root)
    assert run(root, "pwd", working_dir="sub")[1]["output"].strip() == str(root / "sub")


@pytest.mark.parametrize(
    ("working_dir", "code"),
    [
        ("..", "outside_root_approval_required"),
        ("/", "outside_root_approval_required"),
        ("missing", "not_directory"),
        ("file.txt", "not_directory"),
    ],
)
def test_working_dir_is_confined(root: Path, working_dir: str, code: str) -> None:
    (root / "file.txt").write_text("x")
    kind, data = run(root, "pwd", working_dir=working_dir)
    assert (kind, data["error"]) == ("error", code)


def test_working_dir_outside_root_follows_the_policy(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    assert run(root, "pwd", working_dir=str(outside), bash={"allow_outside_root": True})[1]["output"].strip() == str(
        outside
    )
    assert run(root, "pwd", working_dir=str(outside), bash={"outside_root_allow": [str(tmp_path)]})[0] == "ok"
    kind, data = run(root, "pwd", working_dir=str(outside), bash={"allow_outside_root": False})
    assert data["error"] == "outside_root_denied"


def test_env_deny_hides_variables_and_env_set_adds_them(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_TOKEN", "s3cret")
    monkeypatch.setenv("PLAIN_VALUE", "kept")
    bash = {"env_deny": ["*_TOKEN"], "env_set": {"GREETING": "hello"}}
    _, data = run(root, 'echo "${SERVICE_TOKEN-unset} $PLAIN_VALUE $GREETING"', bash=bash)
    assert data["output"] == "unset kept hello\n"


@pytest.mark.parametrize("bash", [{}, {"env_deny": ["*_SECRET"]}, {"env_set": {"ENTROPIC_MCP_TOKEN": "set-by-config"}}])
def test_entropic_variables_never_reach_a_command(
    root: Path, monkeypatch: pytest.MonkeyPatch, bash: dict[str, object]
) -> None:
    # The serve token (and every ENTROPIC_MCP_* variable) is removed whatever env_deny says.
    monkeypatch.setenv("ENTROPIC_MCP_TOKEN", "serve-token-value")
    monkeypatch.setenv("ENTROPIC_MCP_CONFIG", "/some/config.toml")
    _, data = run(root, "env; cat /proc/$$/environ | tr '\\0' '\\n'", bash=bash)
    assert "ENTROPIC_MCP" not in data["output"]
    assert "serve-token-value" not in data["output"]
    assert "PATH=" in data["output"]


def test_timeout_stops_the_whole_group_and_returns_partial_output(root: Path) -> None:
    command = "trap '' TERM; sleep 1000 & echo $!; (trap '' TERM; sleep 1000) & echo $!; echo $$; sleep 1000"
    kind, data = run(root, command, timeout_seconds=0.5)
    assert kind == "timeout"
    assert set(data) == {"error", "message", "timeout_seconds", "elapsed_ms", "output"}
    assert data["error"] == "timeout" and data["timeout_seconds"] == 0.5
    pids = [int(p) for p in data["output"].split()]
    assert len(pids) == 3
    assert all(gone(pid) for pid in pids)
    assert live_group_members(pids[2]) == []


def test_timeout_with_the_default_grace(root: Path) -> None:
    manager, server = make_manager(root)
    server.grace = 2.0
    result = manager.call_sync("bash.execute", {"command": "trap '' TERM; echo $$; sleep 1000", "timeout_seconds": 0.2})
    data = orjson.loads(result.response.result)
    assert result.kind == "timeout"
    assert gone(int(data["output"]))
    assert data["elapsed_ms"] >= 2000  # TERM was ignored: KILL came after the grace


def test_stray_children_are_killed_when_the_shell_exits(root: Path) -> None:
    kind, data = run(root, "sleep 1000 & echo $!; sleep 1000 >/dev/null 2>&1 & echo $!; echo done")
    assert kind == "ok" and data["exit_code"] == 0
    first, second, done = data["output"].split()
    assert done == "done"
    assert gone(int(first)) and gone(int(second))


def test_output_keeps_head_and_tail_around_a_marker(root: Path) -> None:
    _, data = run(root, "seq 1 100000", bash={"max_output_bytes": 1024})
    output = data["output"]
    assert data["truncated"] is True
    assert output.startswith("1\n2\n3\n") and output.endswith("99999\n100000\n")
    total = len("".join(f"{i}\n" for i in range(1, 100001)))
    head, marker, tail = output.partition("\n[... ")
    omitted = int(marker and tail.split(" ", 1)[0])
    assert omitted == total - len(head) - len(tail.split(" omitted ...]\n", 1)[1])


def test_output_is_fitted_into_the_pipeline_result_cap(root: Path) -> None:
    kind, data = run(
        root,
        r"seq 1 100000; printf '\x01\x02\\\"%.0s' $(seq 1 3000); echo last line",
        pipeline={"max_result_bytes": 4096},
    )
    assert kind == "ok" and data["truncated"] is True
    assert data["output"].startswith("1\n2\n") and data["output"].endswith("last line\n")
    assert len(orjson.dumps(data)) <= 4096


def test_cap_cuts_at_character_boundaries(root: Path) -> None:
    _, data = run(root, "for i in $(seq 1 2000); do printf 'é€'; done", bash={"max_output_bytes": 999})
    assert data["truncated"] is True
    assert "\ufffd" not in data["output"]


def test_invalid_utf8_is_delivered_with_replacement_characters(root: Path) -> None:
    _, data = run(root, r"printf 'a\xffb\xc3(c\xe2\x82'")
    assert data["output"] == "a\ufffdb\ufffd(c\ufffd"


def _large_output(root: Path, size: int) -> None:
    process = psutil.Process()
    before = process.memory_info().rss
    _, data = run(root, f"head -c {size} /dev/zero | tr '\\0' x", timeout_seconds=120, pipeline={"max_result_bytes": 0})
    grown = process.memory_info().rss - before
    assert data["exit_code"] == 0 and data["truncated"] is True
    assert f"[... {size - 64 * 1024} bytes omitted ...]" in data["output"]
    assert len(data["output"]) < 70 * 1024
    assert grown < 64 * 1024 * 1024


def test_large_output_is_capped_in_bounded_memory(root: Path) -> None:
    _large_output(root, 64 * 1024 * 1024)


@pytest.mark.slow
def test_a_gigabyte_of_output_is_capped_in_bounded_memory(root: Path) -> None:
    _large_output(root, 1024 * 1024 * 1024)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _zombie_children() -> list[psutil.Process]:
    return [c for c in psutil.Process().children(recursive=True) if c.status() == psutil.STATUS_ZOMBIE]


def test_no_descriptor_leak_and_no_zombie_after_200_runs(root: Path) -> None:
    manager, _ = make_manager(root, grace=0.3)

    async def many(round_: int) -> None:
        for i in range(200):
            command = f"echo {i}" if i % 3 else f"sleep 100 & echo {i}"
            timeout = {"timeout_seconds": 0.05} if i % 50 == 7 else {}
            outcome = await manager.call(
                "bash.execute",
                {"command": command + ("; sleep 10" if timeout else ""), **timeout},
                CallContext(conversation_id=f"{round_}-{i}"),
            )
            assert outcome.kind in ("ok", "timeout")

    asyncio.run(many(1))  # one round first, so descriptors opened once per process are not counted
    before = _open_fds()
    asyncio.run(many(2))
    assert _open_fds() == before
    assert _zombie_children() == []


def test_progress_streams_output_lines(root: Path) -> None:
    messages: list[str] = []
    ctx = CallContext(conversation_id="c", progress=lambda progress, total, message: messages.append(message or ""))
    kind, data = run(root, "echo one; echo two; printf three", ctx=ctx)
    assert kind == "ok"
    assert "\n".join(messages).split("\n") == ["one", "two", "three"]


def test_a_failing_progress_sink_does_not_stop_the_command(root: Path) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("sink closed")

    kind, data = run(root, "echo one; echo two", ctx=CallContext(conversation_id="c", progress=broken))
    assert (kind, data["output"]) == ("ok", "one\ntwo\n")


def test_host_cancellation_stops_the_group(root: Path) -> None:
    manager, _ = make_manager(root)
    pids: list[int] = []

    async def scenario() -> None:
        started = asyncio.Event()

        def progress(_: float, __: float | None, message: str | None) -> None:
            pids.extend(int(p) for p in (message or "").split())
            if len(pids) == 2:
                started.set()

        ctx = CallContext(conversation_id="c", progress=progress)
        task = asyncio.ensure_future(
            manager.call("bash.execute", {"command": "sleep 1000 & echo $!; echo $$; sleep 1000"}, ctx)
        )
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert len(pids) == 2 and all(gone(pid) for pid in pids)


def test_a_cancelled_task_leaves_the_output_so_far_for_the_pipeline(root: Path) -> None:
    # The runner has no result for a cancelled task: the output comes from bash's own buffer.
    _, server = make_manager(root)
    tool = server.get_tool("execute")
    assert tool is not None
    ctx = CallContext(conversation_id="c")

    async def scenario() -> None:
        printed = asyncio.Event()
        ctx.progress = lambda *_: printed.set()
        task = asyncio.ensure_future(tool.execute({"command": "echo $$; sleep 1000"}, ctx))
        await printed.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert ctx.partial is not None
    assert gone(int(ctx.partial))


def test_cancelled_flag_stops_the_command(root: Path) -> None:
    ctx = CallContext(conversation_id="c")
    ctx.progress = lambda *_: ctx.cancelled.set()
    kind, data = run(root, "echo $$; sleep 1000", ctx=ctx)
    assert data["error"] == "cancelled"
    assert gone(int(data["output"]))


def test_timeout_argument_is_bounded_by_the_configured_maximum(root: Path) -> None:
    kind, data = run(root, "true", timeout_seconds=5, bash={"max_timeout_seconds": 2})
    assert (kind, data["error"]) == ("error", "invalid_args")
    assert "at most 2" in data["message"]
    assert run(root, "true", timeout_seconds=-1)[0] == "rejected_schema"


def test_blank_or_nul_commands_are_refused(root: Path) -> None:
    assert run(root, "   ")[1]["error"] == "invalid_args"
    assert run(root, "echo a\x00b")[1]["error"] == "invalid_args"


@pytest.mark.parametrize(
    "args",
    [
        {"command": 3},
        {"command": ["true"]},
        {"command": "echo \ud800"},
        {"command": "true", "run_in_background": 1},
        {"command": "true", "run_in_background": "yes"},
        {"command": "true", "timeout_seconds": True},
        {"command": "true", "timeout_seconds": "5"},
        {"command": "true", "timeout_seconds": float("nan")},
        {"command": "true", "timeout_seconds": float("inf")},
        {"command": "true", "timeout_seconds": 0},
        {"command": "true", "working_dir": 7},
        {"command": "true", "working_dir": "a\x00b"},
    ],
)
def test_the_tool_itself_refuses_what_the_schema_would(root: Path, args: dict[str, Any]) -> None:
    # A host that skips the schema (a server used bare) still gets a clear invalid_args.
    _, server = make_manager(root)
    tool = server.get_tool("execute")
    assert tool is not None
    with pytest.raises(ToolError) as caught:
        asyncio.run(tool.execute(args, CallContext(conversation_id="c")))
    assert caught.value.code == "invalid_args"
    assert f"'{list(args)[-1]}'" in caught.value.message  # names the argument to fix


def test_a_bare_server_has_no_result_cap_and_a_manager_gives_its_own(root: Path) -> None:
    # No host: ctx.services has no result limit, so only max_output_bytes applies.
    _, server = make_manager(root, bash={"max_output_bytes": 65536})
    tool = server.get_tool("execute")
    assert tool is not None
    bare = asyncio.run(tool.execute({"command": "seq 1 10000"}, CallContext(conversation_id="c")))
    assert bare.structured is not None and bare.structured["truncated"] is False
    assert bare.text.endswith("9999\n10000\n[exit 0, " + bare.text.rpartition(", ")[2])
    kind, capped = run(root, "seq 1 10000", pipeline={"max_result_bytes": 2048})
    assert capped["truncated"] is True and len(orjson.dumps(capped)) <= 2048
    manager, _ = make_manager(root, pipeline={"max_result_bytes": 2048})
    text = manager.call_sync("bash.execute", {"command": "seq 1 10000"}).response.result
    # The plain form is cut by the tool, not the pipeline: head, marker, tail and the footer all fit.
    assert len(text.encode()) <= 2048 and text.startswith("1\n2\n") and "bytes omitted ...]" in text
    assert "\n10000\n[exit 0, " in text and text.endswith(", truncated]")


def test_whole_float_timeouts_and_explicit_false_are_accepted(root: Path) -> None:
    kind, data = run(root, "echo ok", timeout_seconds=3.0, run_in_background=False)
    assert (kind, data["output"]) == ("ok", "ok\n")


def test_pipeline_timeout_never_preempts_the_tool(root: Path) -> None:
    _, server = make_manager(root, bash={"max_timeout_seconds": 100})
    assert server.default_timeout_seconds > 100


def test_works_without_pidfd(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(pid: int) -> int:
        raise OSError("pidfd_open is not available")

    monkeypatch.setattr(os, "pidfd_open", unavailable)
    assert run(root, "echo ok; exit 4")[1]["exit_code"] == 4
    kind, data = run(root, "sleep 1000 & echo $!; sleep 1000", timeout_seconds=0.3)
    assert kind == "timeout" and gone(int(data["output"]))
    kind, data = run(root, "sleep 1000 & echo $!")
    assert kind == "ok" and gone(int(data["output"]))


def test_vanished_root_is_reported_as_a_directory_problem(tmp_path: Path) -> None:
    root = tmp_path / "gone"
    root.mkdir()
    manager, _ = make_manager(root)
    root.rmdir()
    data = orjson.loads(manager.call_sync("bash.execute", {"command": "true"}).response.result)
    assert data["error"] == "not_directory"


def test_missing_shell_is_reported_with_a_fix(root: Path) -> None:
    manager, server = make_manager(root)
    server.settings = type(server.settings)(shell="/nonexistent/bash")
    data = orjson.loads(manager.call_sync("bash.execute", {"command": "true"}).response.result)
    assert data["error"] == "shell_unavailable" and "[servers.bash] shell" in data["message"]


def test_the_serve_token_is_not_in_the_servers_proc_environ_either(tmp_path: Path) -> None:
    # A command runs as the server's user: /proc/$PPID/environ shows the environment the server
    # was started with. A real server process, started with the token, must not show it there,
    # while it (and what it starts with an inherited environment) still sees the value.
    code = """
import os, subprocess, sys
from pathlib import Path
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp_bash import BashServer
root = Path(sys.argv[1])
server = BashServer(root=root)
server.configure({"env_deny": ["*_SECRET"]})
config = config_from_dict({"storage": {"backend": "none"}, "permissions": {"default": "allow"}}, root=root)
manager = ServerManager(config, servers=[server])
command = "env; cat /proc/$PPID/environ; cat /proc/$PPID/cmdline"
result = manager.call_sync("bash.execute", {"command": command}, CallContext(conversation_id="c"))
print(result.response.result)
print("SELF", os.environ["ENTROPIC_MCP_TOKEN"], os.environ["SERVICE_SECRET"])
print("CHILD", subprocess.run(["sh", "-c", "echo $ENTROPIC_MCP_TOKEN"], capture_output=True, text=True).stdout)
manager.close()
"""
    env = os.environ | {"ENTROPIC_MCP_TOKEN": "serve-token-4242", "SERVICE_SECRET": "secret-9191"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True, timeout=60
    ).stdout
    seen_by_command, _, rest = out.partition("\nSELF ")
    assert "\n[exit 0, " in seen_by_command
    assert "serve-token-4242" not in seen_by_command
    assert "secret-9191" not in seen_by_command
    assert rest.startswith("serve-token-4242 secret-9191")
    assert "CHILD serve-token-4242" in rest


def _count_environ_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts full walks of ``os.environ`` (building a child's environment walks it)."""
    walks = [0]
    original = type(os.environ).__iter__

    def counting(self: Any) -> Any:
        walks[0] += 1
        return original(self)

    monkeypatch.setattr(type(os.environ), "__iter__", counting)
    return walks


def test_a_call_builds_the_environment_once_and_not_again_while_it_is_unchanged(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager, _ = make_manager(root)
    manager.call_sync("bash.execute", {"command": "true"}, CallContext(conversation_id="warm"))
    walks = _count_environ_reads(monkeypatch)
    result = manager.call_sync("bash.execute", {"command": "true"}, CallContext(conversation_id="c1"))
    assert result.kind == "ok"
    assert walks[0] == 0  # the permission check and the run share one environment, kept between calls
    monkeypatch.setenv("ENTROPIC_TEST_CHANGED", "1")
    manager.call_sync("bash.execute", {"command": "true"}, CallContext(conversation_id="c2"))
    assert walks[0] <= 1


def test_a_change_to_the_server_environment_reaches_the_next_run(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager, _ = make_manager(root)
    monkeypatch.setenv("ENTROPIC_TEST_VALUE", "first")
    first = manager.call_sync(
        "bash.execute", {"command": "echo $ENTROPIC_TEST_VALUE"}, CallContext(conversation_id="a")
    )
    monkeypatch.setenv("ENTROPIC_TEST_VALUE", "second")
    second = manager.call_sync(
        "bash.execute", {"command": "echo $ENTROPIC_TEST_VALUE"}, CallContext(conversation_id="b")
    )
    monkeypatch.delenv("ENTROPIC_TEST_VALUE")
    third = manager.call_sync(
        "bash.execute", {"command": 'echo "[$ENTROPIC_TEST_VALUE]"'}, CallContext(conversation_id="c")
    )
    assert [r.response.result.rpartition("\n[exit 0")[0] for r in (first, second, third)] == [
        "first",
        "second",
        "[]",
    ]


@pytest.mark.parametrize(
    ("command", "line", "column"),
    [("echo 'unterminated", 1, 6), ("if true; then echo x", 1, 1), ("ls\nfor x in; do echo $x; dne", 2, 1)],
)
def test_a_syntax_error_is_answered_as_one_with_its_position_and_nothing_runs(
    root: Path, command: str, line: int, column: int
) -> None:
    manager, _ = make_manager(root, permissions={"default": "allow"})
    marker = root / "ran"
    result = manager.call_sync(
        "bash.execute", {"command": f"touch {marker}\n{command}"}, CallContext(conversation_id="c")
    )
    data = orjson.loads(result.response.result)
    assert result.kind != "rejected_permission", data
    assert data["error"] == "syntax_error"
    assert f"line {line + 1}, column {column}" in data["message"]
    assert "syntax error" in data["message"] and "not run" in data["message"]
    assert not marker.exists()
