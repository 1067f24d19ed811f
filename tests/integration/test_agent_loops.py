"""What a coding agent does in one conversation, through `entropic-mcp serve` over stdio with the
official client: every answer fresh, recoveries allowed, no hook able to take the host down or
open a rule, introspection limited to the caller's own conversation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import connect, stdio_params, write_project

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ERA = "2026-07-28"
KIND = "entropic-mcp/kind"

CONFIG = """\
[entropic_mcp]
plugins = [{plugins}]

[storage]
backend = "tinydb"

[permissions]
default = "deny"
allow_read = true
allow = [
    "filesystem.write_file", "filesystem.edit_file",
    "bash.execute:cat *", "bash.execute:echo *", "bash.execute:ls *", "bash.execute:{python} *",
    "git.add", "git.commit", "git.status", "git.diff", "git.log",
    "entropic.todo",
]
deny = ["bash.execute:rm *"]
{extra}
"""


def project_for(tmp_path: Path, *, plugins: str = '"filesystem", "bash", "git", "entropic"', extra: str = "") -> Path:
    root = write_project(tmp_path / "project", CONFIG.format(plugins=plugins, python=sys.executable, extra=extra))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.email", "agent@example.invalid"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.name", "Agent"], cwd=root, check=True)
    return root


def text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def error(result: Any) -> dict[str, Any]:
    assert result.is_error, text(result)
    return json.loads(text(result))


def ok(result: Any) -> str:
    assert not result.is_error, text(result)
    return text(result)


async def test_a_toggled_write_always_lands(tmp_path: Path) -> None:
    project = project_for(tmp_path)
    async with connect(stdio_params(project), ERA) as peer:
        for content in ("A", "B", "A", "A"):
            ok(await peer.call("filesystem.write_file", {"path": "toggle.txt", "content": content}))
            assert (project / "toggle.txt").read_text() == content


async def test_tests_edit_tests_returns_the_second_run_fresh(tmp_path: Path) -> None:
    project = project_for(tmp_path)
    (project / "status.txt").write_text("failing\n")
    async with connect(stdio_params(project), ERA) as peer:
        assert "failing" in ok(await peer.call("bash.execute", {"command": "cat status.txt"}))
        ok(await peer.call("filesystem.read_file", {"path": "status.txt"}))
        ok(
            await peer.call(
                "filesystem.edit_file", {"path": "status.txt", "old_string": "failing", "new_string": "passing"}
            )
        )
        again = ok(await peer.call("bash.execute", {"command": "cat status.txt"}))
        assert "passing" in again and "failing" not in again and "[duplicate_call]" not in again


async def test_glob_after_a_write_lists_the_new_file_and_never_says_stop(tmp_path: Path) -> None:
    project = project_for(tmp_path)
    (project / "a.py").write_text("")
    async with connect(stdio_params(project), ERA) as peer:
        first = ok(await peer.call("filesystem.glob", {"pattern": "*.py"}))
        assert "a.py" in first and "b.py" not in first
        ok(await peer.call("filesystem.write_file", {"path": "b.py", "content": "x = 1\n"}))
        second = ok(await peer.call("filesystem.glob", {"pattern": "*.py"}))
        assert "b.py" in second and "STOP" not in second and "[duplicate_call]" not in second
        # The same answer to the same question is flagged (and still given), then stopped.
        third = ok(await peer.call("filesystem.glob", {"pattern": "*.py"}))
        assert third.startswith("[duplicate_call]") and "b.py" in third
        fourth = ok(await peer.call("filesystem.glob", {"pattern": "*.py"}))
        assert "STOP" in fourth and "b.py" in fourth


async def test_recovery_after_read_before_write_and_file_changed_is_allowed(tmp_path: Path) -> None:
    project = project_for(tmp_path)
    target = project / "notes.txt"
    target.write_text("original\n")
    call = {"path": "notes.txt", "content": "mine\n"}
    async with connect(stdio_params(project), ERA) as peer:
        assert error(await peer.call("filesystem.write_file", call))["error"] == "read_before_write"
        ok(await peer.call("filesystem.read_file", {"path": "notes.txt"}))
        target.write_text("edited elsewhere\n")
        assert error(await peer.call("filesystem.write_file", call))["error"] == "file_changed"
        ok(await peer.call("filesystem.read_file", {"path": "notes.txt"}))
        ok(await peer.call("filesystem.write_file", call))
        assert target.read_text() == "mine\n"


async def test_the_same_failure_twice_then_refused_until_something_changes(tmp_path: Path) -> None:
    project = project_for(tmp_path)
    async with connect(stdio_params(project), ERA) as peer:
        missing = {"path": "missing.txt"}
        for _ in range(2):
            assert (await peer.call("filesystem.read_file", missing)).meta[KIND] == "error"
        refused = await peer.call("filesystem.read_file", missing)
        assert refused.meta[KIND] == "rejected_loop"
        assert "failed 2 times in a row" in error(refused)["message"]
        ok(await peer.call("filesystem.write_file", {"path": "missing.txt", "content": "here\n"}))
        assert "here" in ok(await peer.call("filesystem.read_file", missing))


async def test_a_second_client_in_the_same_conversation_is_asked_never_served(tmp_path: Path) -> None:
    project = project_for(tmp_path, extra='ask = ["git.commit"]')
    (project / "f.txt").write_text("x\n")
    subprocess.run(["git", "add", "f.txt"], cwd=project, check=True)
    asked: list[Any] = []

    async def allow_once(context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        asked.append(params)
        return ElicitResult(action="accept", content={"decision": "allow_once"})

    meta = {"entropic-mcp/conversation": "shared"}
    async with connect(stdio_params(project), ERA, elicitation=allow_once) as peer:
        ok(await peer.call("git.commit", {"message": "first"}, meta=meta))
        form = asked[0].requested_schema["properties"]["decision"]["enum"]
        # An explicit ask rule asks every time: "always" would not take effect, so it is not offered.
        assert form == ["allow_once", "deny_once"]
    async with connect(stdio_params(project), ERA) as other:
        refused = await other.call("git.commit", {"message": "first"}, meta=meta)
        body = error(refused)
        assert body["error"] == "permission_denied" and "previous_result" not in body
        assert 'ask = ["git.commit"]' in body["message"]


async def test_introspection_shows_only_the_callers_conversation(tmp_path: Path) -> None:
    project = project_for(tmp_path)
    async with connect(stdio_params(project), ERA) as peer:
        await peer.call("filesystem.glob", {"pattern": "*"}, meta={"entropic-mcp/conversation": "alice"})
        await peer.call("git.status", {}, meta={"entropic-mcp/conversation": "alice"})
        mine = await peer.call("entropic.diagnose", {}, meta={"entropic-mcp/conversation": "bob"})
        report = json.loads(ok(mine))
        dumped = json.dumps(report)
        assert "alice" not in dumped
        assert all(entry["conversation_id"] == "bob" for entry in report.get("history", []))
        inspected = ok(
            await peer.call("entropic.inspect", {"target": "history"}, meta={"entropic-mcp/conversation": "bob"})
        )
        assert "alice" not in inspected and "git.status" not in inspected


async def test_faulty_hooks_never_take_the_host_down_nor_open_a_rule(tmp_path: Path) -> None:
    project = project_for(
        tmp_path,
        plugins='"filesystem", "bash", "git", "faulty"',
    )
    (project / "boom.txt").write_text("boom\n")
    (project / "garbage.txt").write_text("garbage\n")
    (project / "fine.txt").write_text("fine\n")
    victim = project / "victim"
    victim.write_text("keep me\n")
    async with connect(stdio_params(project, {"ENTROPIC_MCP_STRICT_PLUGINS": "0"}), ERA) as peer:
        raised = await peer.call("filesystem.read_file", {"path": "boom.txt"})
        assert raised.meta[KIND] == "rejected_hook"
        assert "faulty" in error(raised)["message"]
        wrong = await peer.call("filesystem.read_file", {"path": "garbage.txt"})
        assert wrong.meta[KIND] == "rejected_hook"
        # Everything else keeps working, the raising after-hook and duplicate hook notwithstanding.
        assert "fine" in ok(await peer.call("filesystem.read_file", {"path": "fine.txt"}))
        assert "fine" in ok(await peer.call("filesystem.read_file", {"path": "fine.txt"}))
        ok(await peer.call("git.status", {}))
        # A pattern hook of another plugin is not asked for bash: the per-command parts stand.
        chained = await peer.call("bash.execute", {"command": "echo hi; rm victim"})
        assert chained.meta[KIND] == "rejected_permission"
        assert victim.exists()
        sneaky = await peer.call("bash.execute", {"command": "touch pwned"})
        assert sneaky.meta[KIND] == "rejected_permission"
        assert not (project / "pwned").exists()


async def test_underscored_names_are_the_only_names_the_model_is_told(tmp_path: Path) -> None:
    project = project_for(tmp_path, extra='[serve]\ntool_names = "underscored"')
    (project / "a.txt").write_text("a\n")
    async with connect(stdio_params(project), ERA) as peer:
        tools = await peer.list_all()
        names = {tool.name for tool in tools}
        assert "filesystem__read_file" in names
        described = " ".join(tool.description or "" for tool in tools)
        assert "filesystem.read_file" not in described
        refused = await peer.call("filesystem__write_file", {"path": "a.txt", "content": "b\n"})
        message = error(refused)["message"]
        assert "filesystem__read_file" in message and "filesystem.read_file" not in message


class RawClient:
    """Raw JSON-RPC over a serve subprocess's stdio, for what the official client refuses to send."""

    def __init__(self, project: Path) -> None:
        params = stdio_params(project)
        self.process = subprocess.Popen(
            [params.command, *params.args],
            cwd=params.cwd,
            env=params.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 1
        self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        # json.dumps escapes a lone surrogate as \ud800: valid JSON the official client cannot send.
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id, self.next_id = self.next_id, self.next_id + 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, "serve closed stdout"
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


def test_non_object_arguments_get_an_invalid_args_envelope_and_surrogates_a_parse_error(tmp_path: Path) -> None:
    project = project_for(tmp_path)
    (project / "a.txt").write_text("fine\n")
    client = RawClient(project)
    try:
        for arguments in ([1, 2], "path=a.txt", 7):
            answer = client.request("tools/call", {"name": "filesystem.read_file", "arguments": arguments})
            result = answer["result"]
            assert result["isError"] is True and result["_meta"][KIND] == "rejected_schema"
            body = json.loads(result["content"][0]["text"])
            assert body["error"] == "invalid_args" and "JSON object" in body["message"]
        # A lone surrogate escape is refused by the SDK's JSON parser before any tool sees it (the
        # pipeline's own envelope for it is tested in-process); the server answers and lives on.
        client.send(
            {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "x", "arguments": {"p": "\ud800"}}}
        )
        assert client.process.stdout is not None
        parse_error = json.loads(client.process.stdout.readline())
        assert parse_error["error"]["code"] == -32700
        fine = client.request("tools/call", {"name": "filesystem.read_file", "arguments": {"path": "a.txt"}})
        assert "fine" in fine["result"]["content"][0]["text"]  # the server is still there and well
    finally:
        client.close()


async def test_a_realistic_coding_session_of_sixty_calls(tmp_path: Path) -> None:
    """Read, grep, edit, run the tests, edit again, run them again, commit: all fresh, nothing refused."""
    project = project_for(tmp_path)
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n")
    (project / "test_calc.py").write_text(
        "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_mul():\n    assert mul(2, 3) == 6\n"
    )
    subprocess.run(["git", "add", "."], cwd=project, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=project, check=True)
    run_tests = {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"}
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    calls = 0
    async with connect(stdio_params(project, env), ERA) as peer:

        async def call(name: str, args: dict[str, Any]) -> str:
            nonlocal calls
            calls += 1
            result = await peer.call(name, args)
            assert result.meta[KIND] in ("ok", "ok_empty"), f"{name} {args}: {text(result)}"
            return text(result)

        for _ in range(2):  # the agent looks around, twice over the session
            await call("filesystem.list_directory", {})
            await call("git.status", {})
            await call("git.log", {"max_count": 5})
        await call("filesystem.glob", {"pattern": "*.py"})
        assert "calc.py" in await call("filesystem.grep", {"pattern": "def add"})
        for path in ("calc.py", "test_calc.py", "calc.py"):
            await call("filesystem.read_file", {"path": path})
        first = await call("bash.execute", run_tests)
        assert "2 failed" in first
        await call(
            "filesystem.edit_file", {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
        )
        second = await call("bash.execute", run_tests)
        assert "1 failed, 1 passed" in second
        await call("filesystem.read_file", {"path": "calc.py"})
        await call(
            "filesystem.edit_file",
            {
                "path": "calc.py",
                "old_string": "def mul(a, b):\n    return a + b",
                "new_string": "def mul(a, b):\n    return a * b",
            },
        )
        third = await call("bash.execute", run_tests)
        assert "2 passed" in third
        diff = await call("git.diff", {})
        assert "a * b" in diff
        for n in range(8):  # the agent adds tests one by one, running them after each
            name = f"test_more_{n}.py"
            await call(
                "filesystem.write_file",
                {
                    "path": name,
                    "content": f"from calc import add\n\n\ndef test_{n}():\n    assert add({n}, 1) == {n + 1}\n",
                },
            )
            result = await call(
                "bash.execute", {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider {name}"}
            )
            assert "1 passed" in result
            await call("bash.execute", {"command": f"cat {name}"})
        await call("filesystem.grep", {"pattern": "assert add"})
        await call("entropic.todo", {"action": "add", "content": "commit the fix"})
        await call("git.add", {"paths": ["calc.py"]})
        await call("git.status", {})
        await call("git.commit", {"message": "Fix add and mul"})
        log = await call("git.log", {"max_count": 5})
        assert "Fix add and mul" in log
        assert "calc.py" not in await call("git.status", {})
        await call("entropic.todo", {"action": "update", "index": 0, "status": "completed"})
        await call("bash.execute", {"command": "ls"})
        await call("filesystem.glob", {"pattern": "test_*.py"})
        while calls < 60:
            await call("filesystem.read_file", {"path": f"test_more_{calls % 8}.py"})
    assert calls >= 60
    assert os.path.exists(project / "calc.py")


async def test_followup_answers_fresh_after_a_delegation_completes(tmp_path: Path) -> None:
    from entropic_mcp._storage._tinydb import TinyDBBackend

    project = project_for(tmp_path)
    query = {"query": "parser flakiness"}
    async with connect(stdio_params(project), ERA) as peer:
        before = json.loads(ok(await peer.call("entropic.followup", query)))
        assert before["results"] == []
        # Another process (a host) completes a delegation in the same store meanwhile.
        from entropic_mcp import load_config

        # The default store: outside the project, in the per-user data directory serve uses too.
        store = TinyDBBackend(load_config(project / "entropic-mcp.toml").storage_path)
        try:
            parent = store.create_conversation("host")
            delegation, _ = store.create_delegation(parent, "lead", "researcher", "look into parser flakiness")
            store.complete_delegation(delegation, "completed", "The parser flakiness comes from a race in the lexer.")
        finally:
            store.close()
        after = ok(await peer.call("entropic.followup", query))
        assert "[duplicate_call]" not in after
        results = json.loads(after)["results"]
        assert [r["delegation_id"] for r in results] == [delegation]
