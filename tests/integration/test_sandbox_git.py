"""Issue 22: the git server's git runs in the sandbox too, and still does its work; bash's git
may not write the repository's config or hooks."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import result_of

from conftest import ENTROPIC_MCP, connect, serve_env

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ERA = "2026-07-28"
CONFIG = """\
[entropic_mcp]
plugins = ["bash", "git"]
[storage]
backend = "none"
[permissions]
default = "allow"
auto_approve = true
allow = ["bash.execute:*", "git.*"]
[sandbox]
mode = "required"
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "entropic-mcp.toml").write_text(CONFIG, encoding="utf-8")
    git = ["git", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.name", "T"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.email", "t@example.com"], cwd=root, check=True)
    (root / "a.txt").write_text("one\n", encoding="utf-8")
    return root


def params(root: Path, tmp_path: Path) -> Any:
    from mcp import StdioServerParameters

    env = serve_env({"XDG_DATA_HOME": str(tmp_path / "xdg")})
    return StdioServerParameters(command=str(ENTROPIC_MCP), args=["serve"], cwd=str(root), env=env)


async def test_git_tools_write_the_repository_inside_the_sandbox(repo, tmp_path):
    async with connect(params(repo, tmp_path), ERA) as peer:
        added = await peer.call("git.add", {"paths": ["a.txt"]})
        assert not added.is_error, result_of(added)
        committed = await peer.call("git.commit", {"message": "first"})
        assert not committed.is_error, result_of(committed)
        branched = await peer.call("git.create_branch", {"name": "feature"})
        assert not branched.is_error, result_of(branched)
        status = result_of(await peer.call("git.status", {}))
    log = subprocess.run(["git", "log", "--format=%s", "feature"], cwd=repo, capture_output=True, text=True)
    assert log.stdout == "first\n"
    assert status["branch"] == "feature"


async def test_bashs_git_cannot_plant_config_or_hooks_but_commits(repo, tmp_path):
    config_before = (repo / ".git" / "config").read_text()
    async with connect(params(repo, tmp_path), ERA) as peer:
        planted = result_of(
            await peer.call(
                "bash.execute",
                {
                    "format": "json",
                    "command": "git config core.fsmonitor 'touch /tmp/x'; echo evil > .git/hooks/pre-commit; true",
                },
            )
        )
        committed = result_of(
            await peer.call(
                "bash.execute",
                {"format": "json", "command": "git add a.txt && git commit -qm from-bash && git log --format=%s"},
            )
        )
    assert "exit_code" in planted, planted
    assert (repo / ".git" / "config").read_text() == config_before
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert "Read-only file system" in planted["output"] or "could not lock" in planted["output"]
    assert committed["exit_code"] == 0 and "from-bash" in committed["output"]
