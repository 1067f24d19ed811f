"""Helpers for the git plugin tests: real repositories in temporary directories, the real git program."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
from entropic_mcp import CallContext, ServerResponse
from entropic_mcp_git import GitServer

# commits made by the fixtures must not depend on the machine's git identity or config
ISOLATED_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_DATE": "2024-01-02T03:04:05+00:00",
    "GIT_COMMITTER_DATE": "2024-01-02T03:04:05+00:00",
}


class Repo:
    """A work tree under test: run git in it, write files, make commits."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def git(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(["git", *args], cwd=self.path, env=ISOLATED_ENV, capture_output=True, text=True)
        if check and done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def write(self, name: str, text: str = "content\n") -> Path:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def commit(self, message: str, **files: str) -> str:
        for name, text in files.items():
            self.write(name.replace("__", "/"), text)
            self.git("add", "--", name.replace("__", "/"))
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    def staged(self) -> list[str]:
        return sorted(self.git("diff", "--cached", "--name-only").split())


def init_repo(path: Path) -> Repo:
    path.mkdir(parents=True, exist_ok=True)
    repo = Repo(path)
    repo.git("init", "-q", "-b", "main")
    repo.git("config", "user.name", "Test Author")
    repo.git("config", "user.email", "author@example.com")
    repo.git("config", "commit.gpgsign", "false")
    return repo


def make_server(root: Path, **config: Any) -> GitServer:
    server = GitServer(root=root)
    server.configure(config)
    server.runner.env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    return server


_conversations = itertools.count()


def execute(server: GitServer, tool: str, args: object = None, ctx: CallContext | None = None) -> ServerResponse:
    ctx = ctx or CallContext(conversation_id=f"c{next(_conversations)}")
    return asyncio.run(server.execute(tool, {} if args is None else args, ctx))


def ok(server: GitServer, tool: str, args: object = None) -> Any:
    """Run a tool that must succeed; its result parsed as JSON when it is JSON."""
    response = execute(server, tool, args)
    assert not response.is_error, response.result
    if tool in ("diff", "show", "blame"):
        return response.result
    return orjson.loads(response.result)


def refused(server: GitServer, tool: str, args: object = None) -> dict[str, Any]:
    """Run a tool that must fail with a typed error; the error object."""
    response = execute(server, tool, args)
    assert response.is_error, response.result
    assert response.directives == ()
    return orjson.loads(response.result)
