"""Fixtures: a repository with one commit, an empty one, and a git server rooted in the first."""

from __future__ import annotations

from pathlib import Path

import pytest
from entropic_mcp_git import GitServer
from git_testkit import Repo, init_repo, make_server


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """A repository with one commit (README.md, src/app.py) on branch main."""
    repo = init_repo(tmp_path / "work")
    repo.commit("initial commit", **{"README.md": "# readme\n", "src__app.py": "print('hi')\n"})
    return repo


@pytest.fixture
def empty_repo(tmp_path: Path) -> Repo:
    """A freshly initialised repository: unborn branch main, no commits."""
    return init_repo(tmp_path / "empty")


@pytest.fixture
def server(repo: Repo) -> GitServer:
    return make_server(repo.path)
