"""The hostile-repository corpus: no tool of the server ever runs a program a repository names."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from entropic_mcp_git import GitServer
from entropic_mcp_git._runner import git_environment
from git_testkit import Repo, execute, init_repo, make_server
from hostile_corpus import CASES, Case, base_repo, host_env_cases, hostile_command, prepare, run_trigger

#: Every tool call a session might make in an untrusted repository, in an order that exercises
#: clean filters (status, diff, add, stash), smudge filters (checkout, restore, stash pop),
#: merges (stash pop onto a changed file), signing (commit, tag), hooks and textconv.
TOOL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("status", {}),
    ("diff", {}),
    ("diff", {"target": "other"}),
    ("log", {}),
    ("show", {}),
    ("show", {"revision": "other"}),
    ("branch", {}),
    ("add", {"paths": ["a.txt"]}),
    ("diff", {"staged": True}),
    ("reset", {}),
    ("add", {"paths": ["."]}),
    ("commit", {"message": "hostile test"}),
    ("checkout", {"target": "other"}),
    ("checkout", {"target": "main"}),
    ("create_branch", {"name": "side", "checkout": False}),
    ("blame", {"path": "a.txt"}),
    ("blame", {"path": "a.txt", "revision": "other"}),
    ("log", {"body": True, "stats": True, "revision": "other"}),
    ("diff", {"target": "other", "format": "stat"}),
    ("diff", {"target": "other", "format": "name_status"}),
    ("tag", {}),
    ("create_tag", {"name": "v1", "message": "annotated"}),
    ("create_tag", {"name": "v0"}),
    ("stash_list", {}),
    ("restore", {"paths": ["a.txt"], "source": "other"}),
    ("stash", {"message": "hostile"}),
    ("restore", {"paths": ["a.txt"], "source": "HEAD~1"}),
    ("commit", {"message": "conflicting side", "add_all": True}),
    ("stash", {"action": "apply"}),
    ("restore", {"paths": ["."], "staged": True, "worktree": True}),
    ("stash", {"action": "pop"}),
    ("restore", {"paths": ["."], "staged": True, "worktree": True}),
    ("stash", {"action": "drop"}),
]

#: Calls that may fail in a hostile repository without the test caring: a stash applied onto a
#: changed file conflicts (merge drivers are off, so the merge is git's own), and the entry
#: stays until dropped.
MAY_FAIL = {"stash"}


def _server(repo_path: Path, case: Case, marker: Path) -> GitServer:
    server = make_server(repo_path)
    cmd = hostile_command(marker)
    host = {**os.environ, **{k: v.format(cmd=cmd) for k, v in case.env.items()}}
    server.runner.env = git_environment(host)
    server.runner.env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    return server


def run_every_tool(server: GitServer, calls: list[tuple[str, dict[str, Any]]] = TOOL_CALLS) -> list[str]:
    """Run the calls; the names of those that failed (a failure is allowed, a program is not)."""
    failed = []
    for tool, args in calls:
        response = execute(server, tool, args)
        if response.is_error and tool not in MAY_FAIL:
            failed.append(f"{tool} {args}: {response.result[:200]}")
    return failed


@pytest.mark.parametrize("case", CASES + host_env_cases(), ids=lambda case: case.name)
def test_no_tool_runs_a_program_the_repository_names(tmp_path, case):
    # the case is real: plain git runs the program
    proof = tmp_path / "proof-marker"
    run_trigger(prepare(tmp_path / "proof" / "work", case, proof), case, hostile_command(proof))
    assert proof.exists(), f"the trigger of {case.name} did not fire; the case proves nothing"

    marker = tmp_path / "marker"
    repo = prepare(tmp_path / "target" / "work", case, marker)
    server = _server(repo.path, case, marker)
    failed = run_every_tool(server)
    assert not marker.exists(), f"{case.name}: a tool ran the repository's program"
    # neutralised settings leave the tools working
    assert failed == [], failed


# -- the cached config listing follows every change ----------------------------------------------


def _cached_server(repo_path: Path) -> GitServer:
    server = make_server(repo_path)
    server.runner.racy_seconds = 0  # cache even files written a moment ago: the worst case
    return server


def _ok(server: GitServer, tool: str, args: dict[str, Any] | None = None) -> None:
    response = execute(server, tool, args or {})
    assert not response.is_error, response.result


def test_a_filter_added_after_the_listing_was_cached_is_neutralised(tmp_path):
    marker = tmp_path / "marker"
    repo = prepare(tmp_path / "work", CASES[0], tmp_path / "unused")  # filter.x.clean -> unused
    server = _cached_server(repo.path)
    _ok(server, "status")
    repo.git("config", "filter.y.clean", hostile_command(marker))
    (repo.path / ".gitattributes").write_text("* filter=y\n")
    for tool, args in TOOL_CALLS[:12]:
        execute(server, tool, args)
    assert not marker.exists()


def test_an_include_target_created_after_the_listing_was_cached_is_read(tmp_path):
    marker = tmp_path / "marker"
    repo = prepare(tmp_path / "work", CASES[0], tmp_path / "unused")
    repo.git("config", "include.path", "../../late.cfg")
    server = _cached_server(repo.path)
    _ok(server, "status")
    (repo.path.parent / "late.cfg").write_text(f'[filter "z"]\n\tclean = {hostile_command(marker)}\n')
    (repo.path / ".gitattributes").write_text("* filter=z\n")
    assert not marker.exists()
    for tool, args in TOOL_CALLS[:12]:
        execute(server, tool, args)
    assert not marker.exists()


def test_an_onbranch_include_is_followed_across_a_checkout(tmp_path):
    marker = tmp_path / "marker"
    repo = prepare(tmp_path / "work", CASES[0], tmp_path / "unused")
    repo.git("checkout", "-q", "--", "a.txt")
    (repo.path.parent / "branch.cfg").write_text(f'[filter "w"]\n\tclean = {hostile_command(marker)}\n')
    repo.git("config", "includeIf.onbranch:other.path", "../../branch.cfg")
    (repo.path / ".git" / "info" / "attributes").write_text("* filter=w\n")
    server = _cached_server(repo.path)
    _ok(server, "status")
    _ok(server, "checkout", {"target": "other"})
    (repo.path / "a.txt").write_text("changed on other\n")
    os.utime(repo.path / "a.txt", (1, 1))
    _ok(server, "status")
    _ok(server, "add", {"paths": ["a.txt"]})
    assert not marker.exists()
    # and plain git on that branch would have run it
    (repo.path / "a.txt").write_text("changed again\n")
    run_trigger(repo, CASES[0], "")
    assert marker.exists()


def test_an_unreadable_config_refuses_every_tool_with_a_clear_error(tmp_path):
    repo = prepare(tmp_path / "work", CASES[0], tmp_path / "unused")
    server = make_server(repo.path)
    _ok(server, "status")
    with (repo.path / ".git" / "config").open("a") as f:
        f.write("[broken\n")
    response = execute(server, "status")
    assert response.is_error
    assert '"error":"config_unreadable"' in response.result


# -- repositories nested in the work tree (gitlinks, submodules) ---------------------------------


def _nested_repo(parent: Path, name: str) -> Repo:
    nested = init_repo(parent / name)
    nested.commit("nested", **{"f.txt": "x\n"})
    return nested


def _make_hostile(repo: Repo, marker: Path) -> None:
    repo.git("config", "filter.n.clean", hostile_command(marker))
    repo.git("config", "filter.n.process", hostile_command(marker))
    with (repo.path / ".gitattributes").open("a") as f:
        f.write("* filter=n\n")


def _nested_layout(tmp_path: Path, sub: str, kind: str, marker: Path) -> tuple[Repo, list[Path]]:
    """An outer repository holding a hostile repository: a gitlink (an embedded repository added
    with git add), a gitlink inside a gitlink, a submodule (its repository in .git/modules), or an
    untracked embedded repository."""
    outer = base_repo(tmp_path / sub / "outer")
    hostile: list[Repo] = []
    if kind == "submodule":
        source = _nested_repo(tmp_path / sub, "source")
        outer.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source.path), "mod")
        outer.git("commit", "-q", "-m", "submodule")
        hostile.append(Repo(outer.path / "mod"))
    else:
        nested = _nested_repo(outer.path, "nested")
        hostile.append(nested)
        if kind == "nested gitlink":
            inner = _nested_repo(nested.path, "inner")
            nested.git("add", "inner")
            nested.git("commit", "-q", "-m", "inner")
            hostile.append(inner)
        if kind != "untracked":
            outer.git("add", "nested")
            outer.git("commit", "-q", "-m", "nested")
    for repo in hostile:
        _make_hostile(repo, marker)
    return outer, [repo.path / "f.txt" for repo in hostile]


def _touch(files: list[Path]) -> None:
    for file in files:
        later = file.stat().st_mtime + 5
        os.utime(file, (later, later))  # stat-dirty, content unchanged: git re-hashes it (clean filter)


@pytest.mark.parametrize("kind", ["gitlink", "nested gitlink", "submodule", "untracked"])
def test_repositories_nested_in_the_work_tree_run_nothing(tmp_path, kind):
    proof = tmp_path / "proof-marker"
    outer, files = _nested_layout(tmp_path, "proof", kind, proof)
    _touch(files)
    run_trigger(outer, Case("proof", lambda r, c: None, ("add", ".")), "")
    assert proof.exists() or kind == "untracked", "plain git add runs the nested repository's filter"

    marker = tmp_path / "marker"
    outer, files = _nested_layout(tmp_path, "target", kind, marker)
    server = make_server(outer.path)
    for tool, args in [
        ("add", {"paths": ["."]}),
        ("add", {"paths": ["nested" if kind != "submodule" else "mod"]}),
        *TOOL_CALLS,
    ]:
        _touch(files)
        execute(server, tool, args)
        assert not marker.exists(), (kind, tool, args)
