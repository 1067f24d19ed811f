"""Work-tree writes by git (restore, checkout, create_branch, stash, pull) obey the write rules:
the policy files are protected, and write rules refuse the files they name."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from entropic_mcp.testing import call, make_manager
from git_testkit import Repo, execute, init_repo, make_server, ok, refused

POLICY = ["entropic-mcp.toml", "entropic-mcp.local.toml", ".entropicignore", "sub/.entropicignore"]


@pytest.fixture
def policy_repo(tmp_path: Path) -> Repo:
    """main: strict policy files; branch lax: every policy file loosened, src/app.py changed."""
    repo = init_repo(tmp_path / "work")
    strict = {name.replace("/", "__"): "# strict\n" for name in POLICY}
    repo.commit("strict", **strict, **{"src__app.py": "v1\n"})
    repo.git("switch", "-q", "-c", "lax")
    repo.commit("lax", **{name.replace("/", "__"): "# lax\n" for name in POLICY}, **{"src__app.py": "v2\n"})
    repo.git("switch", "-q", "main")
    return repo


def _unchanged(repo: Repo) -> None:
    for name in POLICY:
        assert (repo.path / name).read_text() == "# strict\n", name


@pytest.mark.parametrize("name", POLICY)
def test_restore_from_a_commit_never_rewrites_a_policy_file(policy_repo, name):
    server = make_server(policy_repo.path)
    error = refused(server, "restore", {"paths": [name], "source": "lax"})
    assert error["error"] == "path_protected" and name in error["message"]
    error = refused(server, "restore", {"paths": ["."], "source": "lax"})
    assert error["error"] == "path_protected"
    _unchanged(policy_repo)
    assert (policy_repo.path / "src/app.py").read_text() == "v1\n"  # all or nothing


def test_restore_discarding_an_edit_of_a_policy_file_is_refused(policy_repo):
    server = make_server(policy_repo.path)
    (policy_repo.path / ".entropicignore").write_text("# edited by the user\n")
    assert refused(server, "restore", {"paths": ["."]})["error"] == "path_protected"
    policy_repo.git("add", ".entropicignore")
    assert refused(server, "restore", {"paths": ["."], "staged": True, "worktree": True})["error"] == "path_protected"
    assert ok(server, "restore", {"paths": ["."], "staged": True})["staged"] is True  # the index only
    assert (policy_repo.path / ".entropicignore").read_text() == "# edited by the user\n"
    ok(server, "restore", {"paths": ["src"]})  # other paths are fine


def test_checkout_and_create_branch_never_switch_policy_files(policy_repo):
    server = make_server(policy_repo.path)
    lax = policy_repo.git("rev-parse", "lax").strip()
    for args in ({"target": "lax"}, {"target": lax}, {"target": "lax~0"}):
        assert refused(server, "checkout", args)["error"] == "path_protected"
    assert refused(server, "create_branch", {"name": "x", "base": "lax"})["error"] == "path_protected"
    assert ok(server, "create_branch", {"name": "y", "base": "lax", "checkout": False})["branch"] == "y"
    assert policy_repo.git("branch", "--show-current").strip() == "main"
    _unchanged(policy_repo)


def test_a_checkout_on_an_unborn_branch_lists_every_file(tmp_path, policy_repo):
    fresh = init_repo(tmp_path / "fresh")
    fresh.git("fetch", "-q", str(policy_repo.path), "main:strict")
    server = make_server(fresh.path)
    assert refused(server, "checkout", {"target": "strict"})["error"] == "path_protected"
    assert not (fresh.path / ".entropicignore").exists()


def test_stash_never_reverts_or_reapplies_policy_files(policy_repo):
    server = make_server(policy_repo.path)
    (policy_repo.path / "entropic-mcp.toml").write_text("# changed\n")
    assert refused(server, "stash")["error"] == "path_protected"
    assert (policy_repo.path / "entropic-mcp.toml").read_text() == "# changed\n"
    policy_repo.git("checkout", "--", "entropic-mcp.toml")
    (policy_repo.path / "notes.txt").write_text("n\n")
    (policy_repo.path / "untracked").mkdir()
    (policy_repo.path / "untracked" / "entropic-mcp.local.toml").write_text("x\n")
    assert refused(server, "stash", {"include_untracked": True})["error"] == "path_protected"
    assert ok(server, "stash", {"include_untracked": True, "paths": ["notes.txt"]})["stashed"] is True
    # an entry made outside the server that changes a policy file is not applied
    (policy_repo.path / ".entropicignore").write_text("# loosened\n")
    policy_repo.git("stash", "push", "-q", "--", ".entropicignore")
    for action in ("apply", "pop"):
        assert refused(server, "stash", {"action": action})["error"] == "path_protected"
    assert (policy_repo.path / ".entropicignore").read_text() == "# strict\n"
    assert ok(server, "stash", {"action": "pop", "index": 1}) == {"popped": "stash@{1}"}
    assert ok(server, "stash", {"action": "drop"}) == {"dropped": "stash@{0}"}


def test_pull_never_fast_forwards_over_policy_files(tmp_path, policy_repo):
    remote = tmp_path / "remote.git"
    Repo(tmp_path).git("clone", "-q", "--bare", str(policy_repo.path), str(remote))
    clone = Repo(tmp_path / "clone")
    Repo(tmp_path).git("clone", "-q", str(remote), str(clone.path))
    Repo(remote).git("update-ref", "refs/heads/main", policy_repo.git("rev-parse", "lax").strip())
    server = make_server(clone.path, network=True)
    assert refused(server, "pull")["error"] == "path_protected"
    assert (clone.path / ".entropicignore").read_text() == "# strict\n"


# -- through a host: rules ------------------------------------------------------------------


def _manager(repo: Repo, **permissions: object):
    return make_manager(
        repo.path, servers=[make_server(repo.path)], config={"permissions": {"default": "allow", **permissions}}
    )


def _error(outcome) -> dict:
    assert outcome.response.is_error, outcome.response.result
    return orjson.loads(outcome.response.result)


@pytest.mark.parametrize(
    "rule",
    ["filesystem.write:src/*", "filesystem.write_file:src/*", "filesystem.edit_file:src/app.py", "filesystem.*:src/*"],
)
@pytest.mark.parametrize("kind", ["deny", "ask"])
def test_write_rules_stop_git_rewriting_the_files_they_name(policy_repo, rule, kind):
    (policy_repo.path / "src/app.py").write_text("local edit\n")
    policy_repo.git("add", "-A")
    policy_repo.git("commit", "-q", "-m", "edit")
    manager = _manager(policy_repo, **{kind: [rule]})
    policy_repo.write("src/app.py", "uncommitted\n")
    error = _error(call(manager, "git.restore", {"paths": ["src"]}))
    assert error["error"] == "path_protected" and rule in error["message"]
    assert (policy_repo.path / "src/app.py").read_text() == "uncommitted\n"
    assert _error(call(manager, "git.stash", {}))["error"] == "path_protected"
    policy_repo.git("checkout", "--", "src/app.py")
    assert _error(call(manager, "git.restore", {"paths": ["src"], "source": "HEAD~1"}))["error"] == "path_protected"


def test_an_allow_rule_naming_a_policy_file_opens_it(policy_repo):
    manager = _manager(policy_repo, allow=["filesystem.write:.entropicignore"])
    outcome = call(manager, "git.restore", {"paths": [".entropicignore"], "source": "lax"})
    assert not outcome.response.is_error, outcome.response.result
    assert (policy_repo.path / ".entropicignore").read_text() == "# lax\n"
    # the others stay protected, and a broad rule does not open them
    manager = _manager(policy_repo, allow=["filesystem.*"])
    assert (
        _error(call(manager, "git.restore", {"paths": ["entropic-mcp.toml"], "source": "lax"}))["error"]
        == "path_protected"
    )


def test_writes_the_rules_allow_go_through(policy_repo):
    server = make_server(policy_repo.path)
    ok(server, "restore", {"paths": ["src"], "source": "lax"})
    assert (policy_repo.path / "src/app.py").read_text() == "v2\n"
    assert execute(server, "restore", {"paths": ["src"]}).is_error is False
