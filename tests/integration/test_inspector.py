"""The MCP Inspector CLI (npm) against a real `entropic-mcp serve`: listing and calling, a headless
run with no config file at all, and a fix-the-bug session in a project where only `init` ran.

The Inspector CLI makes one connection per invocation and declares neither elicitation nor
sampling (it builds its client with ``elicit: false``), so nobody can be asked to approve a write
or a command through it. Under `init`'s defaults those are refused with a message addressed to
the agent that names the rule that would allow them; the session's user adds exactly those rules
to ``entropic-mcp.local.toml`` (where "always allow" answers go; `init` keeps it out of git),
restarts serve (rules are read at start) and runs every step through the Inspector.

Over stdio every invocation starts a new server, so the read tracker of one cannot vouch for the
next one's edit: the session runs against one `serve --transport http`. Handshake-era
invocations are separate sessions, hence separate conversations; they share one by sending
``_meta["entropic-mcp/conversation"]`` (``--metadata``). 2026-07-28 invocations are stateless and
share the client's conversation without it (docs/serving.md, "Conversations")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ENTROPIC_MCP, calc_repo, npx, serve_env, start_http, stop

pytestmark = pytest.mark.integration

#: Pinned: the options used here (--protocol-era, --tool-args-json, --format json) are 2.x's.
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
#: What OpenAI-style model APIs accept for a tool name.
MODEL_API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
#: The CLI's exit status for a tools/call whose result has isError set (it still prints the result).
TOOL_IS_ERROR = 5


def npx_command() -> str:
    # The integration session installs Node.js as a wheel into its own environment (noxfile.py).
    beside = Path(sys.executable).with_name("npx")
    command = str(beside) if beside.is_file() else npx()
    if command is None:
        pytest.skip("npx is not installed (Node.js is needed for the MCP Inspector)")
    return command


def inspector(cwd: Path, target: list[str], *args: str) -> dict[str, Any]:
    """One Inspector CLI invocation (one connection); the method's result."""
    try:
        done = subprocess.run(
            [npx_command(), "-y", INSPECTOR, "--cli", "-q", "--format", "json", *target, *args],
            cwd=cwd,
            env=serve_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("the MCP Inspector did not finish in time (npm registry unreachable?)")
    if done.returncode != 0 and ("ENOTFOUND" in done.stderr or "E404" in done.stderr or "ETIMEDOUT" in done.stderr):
        pytest.skip(f"could not fetch {INSPECTOR} from the npm registry: {done.stderr.strip()[:200]}")
    assert done.returncode in (0, TOOL_IS_ERROR), done.stderr
    result = json.loads(done.stdout)["result"]
    assert (done.returncode == TOOL_IS_ERROR) == bool(result.get("isError")), (done.returncode, result)
    return result


def stdio() -> list[str]:
    """A stdio target: each invocation starts its own serve. The Inspector hands the server only a
    default environment (PATH, HOME, ...): the rest is passed with ``-e``."""
    env = serve_env()
    passed = [f"{key}={env[key]}" for key in ("PYTHONPATH", "ENTROPIC_MCP_STRICT_PLUGINS", "XDG_DATA_HOME")]
    return [*(arg for pair in passed for arg in ("-e", pair)), str(ENTROPIC_MCP), "serve"]


def call(cwd: Path, target: list[str], tool: str, arguments: dict[str, Any], *args: str) -> tuple[bool, str]:
    """(isError, text) of one tools/call."""
    result = inspector(
        cwd, target, *args, "--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments)
    )
    text = "".join(block.get("text", "") for block in result["content"])
    return bool(result.get("isError")), text


def test_inspector_lists_and_calls_tools(project: Path) -> None:
    listed = inspector(project, stdio(), "--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]][:2] == ["probe_echo", "probe_ended"]
    called = inspector(
        project, stdio(), "--method", "tools/call", "--tool-name", "probe_echo", "--tool-arg", "text=inspected"
    )
    assert called["content"] == [{"type": "text", "text": "inspected"}]
    assert called["_meta"]["entropic-mcp/kind"] == "ok"


def test_a_headless_inspector_run_with_no_config_reads_and_is_told_to_ask_for_writes(tmp_path: Path) -> None:
    root = calc_repo(tmp_path / "project")
    assert not (root / "entropic-mcp.toml").exists()
    names = [tool["name"] for tool in inspector(root, stdio(), "--method", "tools/list")["tools"]]
    assert names and all(MODEL_API_NAME.match(name) for name in names), names
    assert {"filesystem_read_file", "filesystem_grep", "git_status", "bash_execute"} <= set(names)
    failed, read = call(root, stdio(), "filesystem_read_file", {"path": "calc.py"})
    assert not failed and "return a - b" in read
    failed, found = call(root, stdio(), "filesystem_grep", {"pattern": "a - b"})
    assert not failed and "calc.py" in found
    failed, write = call(root, stdio(), "filesystem_write_file", {"path": "x.txt", "content": "x"})
    assert failed
    message = json.loads(write)["message"]
    assert "Ask the user to approve it" in message and "Do not retry it unchanged" in message
    assert not (root / "x.txt").exists()


#: Per protocol era: what each invocation adds so that the session's calls are one conversation.
ERAS = {
    "legacy": ["--protocol-era", "legacy", "--metadata", "entropic-mcp/conversation=fix-calc"],
    "modern": ["--protocol-era", "modern"],
}
#: Each write or command of the session, with what init's defaults answer it through the Inspector.
ASKED = [
    ("bash_execute", {"command": PYTEST}),
    ("filesystem_edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}),
    ("git_add", {"paths": ["calc.py"]}),
    ("git_commit", {"message": "calc: add adds"}),
]
SUGGESTED = re.compile(r"this would be allowed by allow = (\[.*?\]) under \[permissions\]")


@pytest.mark.timeout(900)  # some twenty Inspector starts (node and npx each time) on a loaded 2-core machine
@pytest.mark.parametrize("era", sorted(ERAS))
def test_the_inspector_fixes_the_bug_in_a_project_where_only_init_ran(tmp_path: Path, era: str) -> None:
    root = calc_repo(tmp_path / "project")
    subprocess.run([str(ENTROPIC_MCP), "init"], cwd=root, check=True, capture_output=True, env=serve_env())
    written = (root / "entropic-mcp.toml").read_text()
    conversation = ERAS[era]

    served = start_http(root)
    try:
        target = [served.url, "--transport", "http"]
        failed, read = call(root, target, "filesystem_read_file", {"path": "calc.py"}, *conversation)
        assert not failed and "return a - b" in read
        rules: list[str] = []
        for tool, arguments in ASKED:  # the Inspector cannot ask: each is refused, naming its rule
            failed, text = call(root, target, tool, arguments, *conversation)
            message = json.loads(text)["message"]
            assert failed and "Ask the user to approve it" in message, text
            suggested = SUGGESTED.search(message)
            assert suggested is not None, message
            rules += json.loads(suggested.group(1))
    finally:
        stop(served.process)
    assert (root / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    assert rules == [f"bash.execute:{sys.executable} *", "filesystem.edit_file:calc.py", "git.add", "git.commit"]
    # The user adds what the refusals name, where "always allow" answers go (init keeps it out of git).
    (root / "entropic-mcp.local.toml").write_text(f"[permissions]\nallow = {json.dumps(rules)}\n")

    served = start_http(root)
    try:
        assert "entropic-mcp.local.toml" in served.log.read_text()
        target = [served.url, "--transport", "http"]
        if era == "legacy":  # each invocation is its own session: without the key, its own conversation
            call(root, target, "filesystem_read_file", {"path": "calc.py"})
            failed, text = call(root, target, "filesystem_edit_file", ASKED[1][1])
            assert failed and "has not been read in this conversation" in text, text

        def step(tool: str, arguments: dict[str, Any]) -> str:
            failed, text = call(root, target, tool, arguments, *conversation)
            assert not failed, (tool, text)
            return text

        assert "calc.py" in step("filesystem_grep", {"pattern": "def add"})
        assert "return a - b" in step("filesystem_read_file", {"path": "calc.py"})
        assert "1 failed" in step("bash_execute", {"command": PYTEST})
        step("filesystem_edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a * b"})
        assert "1 failed" in step("bash_execute", {"command": PYTEST})
        step("filesystem_edit_file", {"path": "calc.py", "old_string": "a * b", "new_string": "a + b"})
        assert "1 passed" in step("bash_execute", {"command": PYTEST})
        assert "+    return a + b" in step("git_diff", {})
        step("git_add", {"paths": ["calc.py"]})
        step("git_commit", {"message": "calc: add adds"})
    finally:
        stop(served.process)
    log = subprocess.run(["git", "log", "--format=%s", "-1"], cwd=root, capture_output=True, text=True, check=True)
    assert log.stdout.strip() == "calc: add adds"
    assert (root / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (root / "entropic-mcp.toml").read_text() == written  # no config beyond what init wrote
