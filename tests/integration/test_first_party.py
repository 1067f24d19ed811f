"""The four first-party plugins, installed from their distributions, served by `entropic-mcp serve`."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import anyio
import pytest

from conftest import ENTROPIC_MCP, connect, group_alive, serve_env, start_http, stdio_params, stop, wait_until

PLUGINS = ("filesystem", "bash", "git", "entropic")
MISSING = [name for name in PLUGINS if importlib.util.find_spec(f"entropic_mcp_{name}") is None]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.skipif(bool(MISSING), reason=f"first-party plugins not installed: {', '.join(MISSING)}"),
]

CONFIG = """\
[entropic_mcp]
plugins = ["filesystem", "bash", "git", "entropic"]
[storage]
backend = "none"
[permissions]
default = "allow"
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "entropic-mcp.toml").write_text(CONFIG, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


async def _exercise(peer: object, repo: Path) -> None:
    names = {tool.name for tool in await peer.list_all()}  # type: ignore[attr-defined]
    assert {"filesystem_read_file", "filesystem_write_file", "bash_execute", "git_status", "entropic_todo"} <= names
    # Only what this client can use: no directives extension, so no host-context tools; no network.
    assert not {"entropic_prune_context", "entropic_context_inspect", "git_fetch", "git_pull", "git_push"} & names
    call = peer.call  # type: ignore[attr-defined]
    pruned = await call("entropic_prune_context", {})
    assert pruned.is_error is True and json.loads(pruned.content[0].text)["error"] == "not_available"
    written = await call("filesystem.write_file", {"path": "a.txt", "content": "alpha\n"})
    assert written.is_error is False and json.loads(written.content[0].text)["created"] is True
    assert written.structured_content is None  # no outputSchema: the result is sent once, as text
    read = await call("filesystem.read_file", {"path": "a.txt"})
    assert read.content[0].text == "alpha"  # the file's own lines, unnumbered by default
    status = await call("git.status", {})
    assert "a.txt" in json.loads(status.content[0].text)["untracked"]
    echoed = await call("bash.execute", {"command": "echo served-by-bash"})
    assert echoed.is_error is False and echoed.content[0].text.startswith("served-by-bash\n[exit 0, ")
    outside = await call("filesystem.read_file", {"path": "/etc/hostname"})
    assert outside.is_error is True and outside.meta.get("entropic-mcp/directives", []) == []
    todo = await call("entropic.todo", {"action": "add", "content": "ship it"})
    assert todo.is_error is False and "ship it" in todo.content[0].text
    assert todo.meta["entropic-mcp/directives"], "todo pins its list with directives"


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25", "2025-06-18"])
async def test_first_party_tools_over_stdio(repo: Path, era: str) -> None:
    async with connect(stdio_params(repo), era) as peer:
        await _exercise(peer, repo)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_first_party_tools_over_http(repo: Path, era: str) -> None:
    served = start_http(repo)
    try:
        async with connect(served.url, era) as peer:
            await _exercise(peer, repo)
    finally:
        stop(served.process)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_cancelled_bash_call_kills_its_process_group(repo: Path, era: str) -> None:
    marker = repo / "bash-pid"
    async with connect(stdio_params(repo), era) as peer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.call, "bash.execute", {"command": f"echo $$ > {marker}; sleep 60; echo never"})
            while not marker.exists() or not marker.read_text().strip():
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
        pgid = int(marker.read_text())
        assert await anyio.to_thread.run_sync(lambda: wait_until(lambda: not group_alive(pgid)))
        after = await peer.call("bash.execute", {"command": "echo after"})
        assert after.content[0].text.startswith("after\n[exit 0, ")


async def test_bash_output_arrives_as_progress(repo: Path) -> None:
    seen: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with connect(stdio_params(repo), "2026-07-28") as peer:
        await peer.call(
            "bash.execute", {"command": "for i in 1 2 3; do echo line-$i; sleep 0.2; done"}, progress=progress
        )
    assert seen, "bash reported no progress"


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(ENTROPIC_MCP), "demo"], cwd=tmp_path, env=serve_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all 8 steps behaved as expected" in done.stdout
    assert "the user answers: allow_once" in done.stdout and "the user answers: deny_once" in done.stdout


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25", "2025-06-18"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_outside_root_path_is_asked_of_the_user(tmp_path: Path, era: str, transport: str) -> None:
    """allow_outside_root = "optional": the client's user answers, for that call only."""
    from mcp_types import ElicitResult

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "entropic-mcp.toml").write_text(CONFIG, encoding="utf-8")
    outside = tmp_path / "outside.txt"
    outside.write_text("from outside\n", encoding="utf-8")
    asked: list[str] = []
    answers = iter(["allow_once", "deny_once"])

    async def elicit(context: object, params: object) -> ElicitResult:
        asked.append(params.message)  # type: ignore[attr-defined]
        return ElicitResult(action="accept", content={"decision": next(answers)})

    served = start_http(repo) if transport == "http" else None
    target = served.url if served is not None else stdio_params(repo)
    try:
        async with connect(target, era, elicitation=elicit) as peer:
            allowed = await peer.call("filesystem.read_file", {"path": str(outside), "format": "json"})
            assert allowed.is_error is False and json.loads(allowed.content[0].text)["lines"] == ["from outside"]
            assert str(outside) in asked[0] and "outside the project root" in asked[0]
            rejected = await peer.call("filesystem.read_file", {"path": str(outside), "offset": 1})
            assert rejected.is_error is True
            assert json.loads(rejected.content[0].text)["error"] == "outside_root_rejected"
        async with connect(target, era) as peer:
            # A client that cannot be asked: refused, naming the settings that would allow the path.
            unasked = await peer.call("filesystem.read_file", {"path": str(outside), "limit": 5})
            refusal = json.loads(unasked.content[0].text)
            assert refusal["error"] == "outside_root_approval_required" and "outside_root_allow" in refusal["message"]
        assert len(asked) == 2
    finally:
        if served is not None:
            stop(served.process)
