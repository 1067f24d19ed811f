"""Option injection, hostile refs, paths outside the work tree, shell text in messages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from git_testkit import execute, make_server, ok, refused
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: Every revision-like argument: (tool, argument, the other arguments the call needs).
REVISION_ARGUMENTS = [
    ("diff", "target", {}),
    ("log", "revision", {}),
    ("log", "since", {}),
    ("log", "until", {}),
    ("show", "revision", {}),
    ("branch", "contains", {}),
    ("create_branch", "name", {}),
    ("create_branch", "base", {"name": "safe"}),
    ("checkout", "target", {}),
    ("blame", "revision", {"path": "README.md"}),
    ("tag", "pattern", {}),
    ("tag", "contains", {}),
    ("create_tag", "name", {}),
    ("create_tag", "revision", {"name": "t"}),
    ("restore", "source", {"paths": ["README.md"]}),
    ("fetch", "remote", {}),
    ("pull", "remote", {}),
    ("pull", "branch", {}),
    ("push", "remote", {}),
    ("push", "branch", {}),
]

INJECTIONS = [
    "--output={out}",
    "--help",
    "-p",
    "--orphan=x",
    "-f",
    "--format=x",
    "--track=x",
    "--exec=x",
    " --output={out}",
    "-",
    "--",
    "--end-of-options",
]


def _snapshot(repo) -> tuple[str, str, list[str]]:
    return (
        repo.git("for-each-ref", "--format=%(refname) %(objectname)"),
        repo.git("status", "--porcelain=v2", "--branch"),
        sorted(os.listdir(repo.path)),
    )


@pytest.mark.parametrize(("tool", "argument", "extra"), REVISION_ARGUMENTS)
def test_option_injection_is_refused_in_every_revision_like_argument(tmp_path, server, repo, tool, argument, extra):
    out = tmp_path / "injected"
    before = _snapshot(repo)
    for template in INJECTIONS:
        value = template.format(out=out)
        error = refused(server, tool, {**extra, argument: value})
        assert error["error"] == "invalid_argument", (value, error)
        assert f"'{argument}'" in error["message"]
    assert not out.exists()
    assert _snapshot(repo) == before


def test_refs_with_hostile_names_on_disk_are_still_refused(tmp_path, server, repo):
    out = tmp_path / "evil"
    hostile = f"--output={out}"
    repo.git("update-ref", f"refs/heads/{hostile}", "HEAD")
    repo.git("update-ref", "refs/heads/-f", "HEAD")
    repo.git("update-ref", "refs/tags/--exec=x", "HEAD")
    for tool, argument, extra in REVISION_ARGUMENTS:
        for value in (hostile, "-f", "--exec=x"):
            assert refused(server, tool, {**extra, argument: value})["error"] == "invalid_argument"
    assert not out.exists()
    assert repo.git("branch", "--show-current").strip() == "main"
    # listing them is harmless: they are data, never arguments
    assert hostile in ok(server, "branch")["branches"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tail=st.text(min_size=0, max_size=40),
    which=st.sampled_from(REVISION_ARGUMENTS),
    pad=st.sampled_from(["", " ", "\t"]),
)
def test_any_revision_like_argument_starting_with_a_dash_is_refused(server, tail, which, pad):
    tool, argument, extra = which
    response = execute(server, tool, {**extra, argument: f"{pad}-{tail}"})
    assert response.is_error
    assert '"error":"invalid_argument"' in response.result or '"error":"invalid_args"' in response.result


def test_control_characters_in_revisions_are_refused(server):
    for value in ("main\n--output=x", "HEAD\r", "a\x1bb"):
        assert refused(server, "log", {"revision": value})["error"] == "invalid_argument"
    assert refused(server, "log", {"revision": "a\x00b"})["error"] == "invalid_args"


# -- paths -------------------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside"
    target.mkdir()
    (target / "secret.txt").write_text("secret\n")
    return target


def _escapes(repo, outside: Path) -> list[str]:
    os.symlink(outside / "secret.txt", repo.path / "link_out")
    os.symlink(outside, repo.path / "dir_out")
    os.symlink(repo.path / "link_out", repo.path / "chain_out")
    return [
        "../outside",
        "../outside/secret.txt",
        str(outside / "secret.txt"),
        "/etc/passwd",
        "link_out",
        "dir_out",
        "dir_out/secret.txt",
        "chain_out",
        "src/../../outside/secret.txt",
        f"../{repo.path.name}2/x",
    ]


@pytest.mark.parametrize(
    ("tool", "extra"),
    [("add", {}), ("reset", {}), ("diff", {}), ("log", {}), ("restore", {}), ("stash", {}), ("blame", None)],
)
def test_paths_outside_the_work_tree_are_refused(server, repo, outside, tool, extra):
    for raw in _escapes(repo, outside):
        if extra is None:  # blame takes one path
            assert refused(server, tool, {"path": raw})["error"] == "outside_root", raw
            continue
        error = refused(server, tool, {**extra, "paths": [raw]})
        assert error["error"] == "outside_root", (raw, error)
        # one bad path spoils the whole call
        assert refused(server, tool, {**extra, "paths": ["README.md", raw]})["error"] == "outside_root"
    assert repo.staged() == []


def test_add_of_a_symlink_inside_stages_the_link_not_its_target(server, repo):
    os.symlink("README.md", repo.path / "readme_link")
    assert ok(server, "add", {"paths": ["readme_link"]}) == {"staged": ["readme_link"]}
    assert repo.git("ls-files", "-s", "readme_link").startswith("120000")


def test_paths_with_awkward_names_are_literal(server, repo):
    for name in ("-f", "--output=x", "*.md", ":(top)README.md", "sp ace.txt", "ünï.txt"):
        repo.write(name, "x\n")
    ok(server, "add", {"paths": ["-f", "*.md", ":(top)README.md"]})
    assert repo.staged() == ["*.md", "-f", ":(top)README.md"]
    ok(server, "add", {"paths": ["sp ace.txt", "ünï.txt", "--output=x"]})
    assert set(ok(server, "status")["staged"][i]["path"] for i in range(6)) == {
        "-f",
        "*.md",
        ":(top)README.md",
        "sp ace.txt",
        "ünï.txt",
        "--output=x",
    }


def test_a_commit_message_of_shell_metacharacters_is_committed_verbatim(tmp_path, server, repo):
    marker = tmp_path / "pwned"
    message = (
        f"subject $(touch {marker}) `touch {marker}`; touch {marker} && echo | cat > {marker}\n\n"
        f"# not a comment\n  '\"\\ * ? ~ $HOME %s {{}} [] <> ! -- --amend -m x\n\ttrailing spaces   \n"
    )
    repo.write("a.txt")
    repo.git("add", "a.txt")
    sha = ok(server, "commit", {"message": message})["sha"]
    stored = repo.git("cat-file", "commit", sha).split("\n\n", 1)[1]
    assert stored == message
    assert not marker.exists()
    assert refused(server, "commit", {"message": "a\x00b"})["error"] == "invalid_args"


def test_hooks_in_the_repository_do_not_run(tmp_path, server, repo):
    marker = tmp_path / "hook-ran"
    hook = repo.path / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    repo.write("a.txt")
    ok(server, "add", {"paths": ["a.txt"]})
    ok(server, "commit", {"message": "with hooks present"})
    assert not marker.exists()


def test_external_diff_and_textconv_configured_in_the_repository_do_not_run(tmp_path, repo):
    marker = tmp_path / "ran"
    repo.git("config", "diff.external", f"sh -c 'touch {marker}'")
    repo.git("config", "diff.conv.textconv", f"sh -c 'touch {marker}; cat'")
    repo.git("config", "core.pager", f"sh -c 'touch {marker}; cat'")
    (repo.path / ".gitattributes").write_text("*.md diff=conv\n")
    repo.write("README.md", "# changed\n")
    server = make_server(repo.path)
    assert "+# changed" in ok(server, "diff")
    assert "+# readme" in ok(server, "show")
    assert not marker.exists()


@pytest.mark.parametrize("where", ["/", "../..", "{outside}"])
def test_a_work_tree_moved_by_core_worktree_is_refused(tmp_path, repo, outside, where):
    repo.git("config", "core.worktree", where.format(outside=outside))
    (outside / "victim.txt").write_text("keep me\n")
    server = make_server(repo.path)
    for tool, args in (("status", {}), ("add", {"paths": ["."]}), ("restore", {"paths": ["."]})):
        error = refused(server, tool, args)
        assert error["error"] == "not_a_repository" and "core.worktree" in error["message"], error
    assert (outside / "victim.txt").read_text() == "keep me\n"


def test_core_worktree_naming_the_natural_top_is_fine(repo):
    repo.git("config", "core.worktree", str(repo.path))
    assert ok(make_server(repo.path), "status")["branch"] == "main"
