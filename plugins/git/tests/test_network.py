"""fetch, pull, push: off unless configured; no refspecs; no program a repository (or a remote) names."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from entropic_mcp import ConfigError
from entropic_mcp_git import GitServer
from entropic_mcp_git._runner import git_environment
from git_testkit import ISOLATED_ENV, Repo, execute, init_repo, make_server, ok, refused
from hostile_corpus import Case, hostile_command, program, run_trigger

NETWORK = ("fetch", "pull", "push")


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    path.mkdir()
    Repo(path).git("init", "-q", "--bare", "-b", "main")
    return path


@pytest.fixture
def cloned(tmp_path: Path, remote: Path) -> Repo:
    repo = init_repo(tmp_path / "work")
    repo.commit("initial", **{"a.txt": "one\n"})
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "-q", "origin", "main")
    repo.git("branch", "-q", "--set-upstream-to=origin/main")
    return repo


def upstream_commit(tmp_path: Path, remote: Path, name: str = "up.txt") -> str:
    other = init_repo(tmp_path / f"other-{name}")
    other.git("remote", "add", "origin", str(remote))
    other.git("fetch", "-q", "origin")
    other.git("reset", "-q", "--hard", "origin/main")
    sha = other.commit("upstream", **{name: "up\n"})
    other.git("push", "-q", "origin", "main")
    return sha


def net_server(repo: Repo) -> GitServer:
    return make_server(repo.path, network=True)


def test_network_tools_exist_only_when_configured(tmp_path, cloned, remote):
    server = make_server(cloned.path)
    before = Repo(remote).git("rev-parse", "main")
    cloned.commit("local", **{"b.txt": "b\n"})
    upstream_commit(tmp_path, remote)
    assert not set(NETWORK) & set(server.tools)  # not listed: a listing offers no tool that can only refuse
    for tool in NETWORK:  # called by name anyway, they say what to change
        error = refused(server, tool)
        assert error["error"] == "network_disabled"
        assert "[servers.git] network = true" in error["message"]
    assert set(NETWORK) <= set(make_server(cloned.path, network=True).tools)
    assert Repo(remote).git("rev-parse", "main") != before  # only the other clone's push
    assert "origin/main" in cloned.git("branch", "-r") and cloned.git("rev-parse", "origin/main") == before


def test_the_network_setting_must_be_a_boolean(cloned):
    server = GitServer(root=cloned.path)
    for bad in ("yes", 1, None):
        with pytest.raises(ConfigError, match=r"\[servers.git\] network"):
            server.configure({"network": bad})


def test_push_fetch_and_pull(tmp_path, cloned, remote):
    server = net_server(cloned)
    sha = cloned.commit("local work", **{"b.txt": "b\n"})
    assert ok(server, "push")["branch"] == "main"
    assert Repo(remote).git("rev-parse", "main").strip() == sha
    up = upstream_commit(tmp_path, remote)
    ok(server, "fetch")
    assert cloned.git("rev-parse", "origin/main").strip() == up
    assert cloned.git("rev-parse", "HEAD").strip() == sha
    ok(server, "pull")
    assert cloned.git("rev-parse", "HEAD").strip() == up and (cloned.path / "up.txt").exists()


def test_push_of_a_new_branch_with_upstream(cloned, remote):
    server = net_server(cloned)
    cloned.git("switch", "-q", "-c", "feature")
    cloned.commit("feature", **{"f.txt": "f\n"})
    ok(server, "push", {"set_upstream": True})
    assert "feature" in Repo(remote).git("branch")
    assert cloned.git("rev-parse", "--abbrev-ref", "feature@{upstream}").strip() == "origin/feature"


def test_a_push_behind_the_remote_is_rejected_never_forced(tmp_path, cloned, remote):
    server = net_server(cloned)
    up = upstream_commit(tmp_path, remote)
    cloned.commit("diverging", **{"d.txt": "d\n"})
    assert refused(server, "push")["error"] == "push_rejected"
    assert Repo(remote).git("rev-parse", "main").strip() == up
    assert refused(server, "pull")["error"] == "not_fast_forward"


@pytest.mark.parametrize("tool", ["push", "pull"])
@pytest.mark.parametrize("value", ["+main", ":main", "main:other", "-f", "--force", "ma*", "HEAD~1", "main^", " -f"])
def test_refspecs_and_options_are_refused_as_branches(cloned, remote, tool, value):
    server = net_server(cloned)
    before = Repo(remote).git("for-each-ref")
    assert refused(server, tool, {"branch": value})["error"] == "invalid_argument"
    assert Repo(remote).git("for-each-ref") == before


@pytest.mark.parametrize("tool", NETWORK)
@pytest.mark.parametrize(
    "value", ["nope", "-x", "--upload-pack=touch x", "/tmp", "ext::sh -c touch% x", "../remote.git"]
)
def test_only_configured_remotes_are_accepted(tmp_path, cloned, tool, value):
    server = net_server(cloned)
    error = refused(server, tool, {"remote": value})
    assert error["error"] == "invalid_argument"
    assert not (cloned.path / "x").exists()


# -- hostile remotes and transports -----------------------------------------------------------


class _Unauthorized(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="test"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_url() -> Iterator[str]:
    """An HTTP server that asks every request for credentials."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/repo.git"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _remote_hooks(*names: str):
    def setup(repo: Repo, cmd: str) -> None:
        url = repo.git("remote", "get-url", "origin").strip()
        for name in names:
            hook = Path(url) / "hooks" / name
            hook.write_text(f"#!/bin/sh\n{cmd}\n")
            hook.chmod(0o755)
        repo.commit("to push", **{"p.txt": "p\n"})

    return setup


def _remote_config(*pairs: str):
    def setup(repo: Repo, cmd: str) -> None:
        url = repo.git("remote", "get-url", "origin").strip()
        for pair in pairs:
            key, value = pair.split(" ", 1)
            Repo(Path(url)).git("config", "--add", key, value.format(cmd=cmd))
        repo.commit("to push", **{"p.txt": "p\n"})

    return setup


def _local(*pairs: str, url: str | None = None):
    def setup(repo: Repo, cmd: str) -> None:
        if url is not None:
            repo.git("remote", "set-url", "origin", url.format(cmd=cmd.replace(" ", "% ")))
        for pair in pairs:
            key, value = pair.split(" ", 1)
            repo.git("config", "--add", key, value.format(cmd=cmd, prog=program(cmd)))
        repo.commit("to push", **{"p.txt": "p\n"})

    return setup


def _alternates(repo: Repo, cmd: str) -> None:
    alt = repo.path.parent / "alt.git"
    Repo(repo.path.parent).git("init", "-q", "--bare", str(alt))
    (repo.path / ".git" / "objects" / "info" / "alternates").write_text(f"{alt}/objects\n")
    repo.git("config", "core.alternateRefsCommand", cmd)


FETCH = ("fetch", "origin")
PUSH = ("push", "origin", "main")

NETWORK_CASES = [
    Case("remote.<r>.uploadpack", _local("remote.origin.uploadpack {cmd} git-upload-pack"), FETCH),
    Case("remote.<r>.receivepack", _local("remote.origin.receivepack {cmd} git-receive-pack"), PUSH),
    Case(
        "hooks of a local destination",
        _remote_hooks(
            "pre-receive", "update", "post-receive", "post-update", "reference-transaction", "push-to-checkout"
        ),
        PUSH,
    ),
    Case("destination's alternateRefsCommand", _remote_config("core.alternateRefsCommand {cmd}"), PUSH),
    Case("core.alternateRefsCommand on fetch", _alternates, FETCH),
    Case("ext:: remote with protocol.ext.allow", _local("protocol.ext.allow always", url="ext::sh -c {cmd}"), FETCH),
    Case("ext:: through url.insteadOf", _local("protocol.allow always"), FETCH),
    Case("core.gitProxy with a git:// remote", _local("core.gitProxy {prog}", url="git://127.0.0.1:1/x"), FETCH),
    Case("core.sshCommand", _local("core.sshCommand {cmd}", url="ssh://127.0.0.1:1/x"), FETCH),
    Case("remote.<r>.vcs helper", _local("remote.origin.vcs {cmd}"), FETCH),
]


def _insteadof(case: Case, repo: Repo, cmd: str) -> None:
    if "insteadOf" in case.name:
        # a subsection with spaces: written into the file (git config cannot take it as a key)
        repo.git("remote", "set-url", "origin", "origin-url")
        with (repo.path / ".git" / "config").open("a") as f:
            f.write(f'[url "ext::sh -c {cmd.replace(" ", "% ")}"]\n\tinsteadOf = origin-url\n')


def _prepare(tmp_path: Path, sub: str, case: Case, marker: Path) -> Repo:
    remote = tmp_path / sub / "remote.git"
    remote.mkdir(parents=True)
    Repo(remote).git("init", "-q", "--bare", "-b", "main")
    repo = init_repo(tmp_path / sub / "work")
    repo.commit("initial", **{"a.txt": "one\n"})
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "-q", "origin", "main")
    case.setup(repo, hostile_command(marker))
    _insteadof(case, repo, hostile_command(marker))
    return repo


@pytest.mark.parametrize("case", [c for c in NETWORK_CASES if c.name != "remote.<r>.vcs helper"], ids=lambda c: c.name)
def test_no_network_tool_runs_a_program_a_repository_or_remote_names(tmp_path, case):
    proof = tmp_path / "proof-marker"
    run_trigger(_prepare(tmp_path, "proof", case, proof), case, hostile_command(proof))
    assert proof.exists(), f"the trigger of {case.name} did not fire; the case proves nothing"
    marker = tmp_path / "marker"
    repo = _prepare(tmp_path, "target", case, marker)
    server = net_server(repo)
    for tool in NETWORK:
        execute(server, tool)
    assert not marker.exists(), case.name


def test_a_remote_helper_named_by_the_repository_is_not_started(tmp_path):
    marker = tmp_path / "marker"
    case = next(c for c in NETWORK_CASES if c.name == "remote.<r>.vcs helper")
    repo = _prepare(tmp_path, "target", case, marker)
    # a helper program on PATH that would run for remote.origin.vcs = <its suffix>
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helper = bin_dir / "git-remote-evil"
    helper.write_text(f"#!/bin/sh\ntouch {marker}\n")
    helper.chmod(0o755)
    repo.git("config", "--unset-all", "remote.origin.vcs")
    repo.git("config", "remote.origin.vcs", "evil")
    env = {**ISOLATED_ENV, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    import subprocess

    subprocess.run(["git", "fetch", "origin"], cwd=repo.path, env=env, capture_output=True, check=False)
    assert marker.exists()
    marker.unlink()
    server = net_server(repo)
    server.runner.env["PATH"] = env["PATH"]
    for tool in NETWORK:
        execute(server, tool)
    assert not marker.exists()


CREDENTIAL_SETTINGS = [
    ("credential.helper", "!{cmd}"),
    ("credential.{url}.helper", "!{cmd}"),
    ("credential.useHttpPath", "true"),
    ("core.askPass", "{prog}"),
]


@pytest.mark.parametrize(("key", "value"), CREDENTIAL_SETTINGS)
def test_credential_helpers_and_askpass_of_the_repository_never_run(tmp_path, http_url, key, value):
    marker = tmp_path / "marker"
    cmd = hostile_command(marker)
    repo = init_repo(tmp_path / "work")
    repo.commit("initial", **{"a.txt": "one\n"})
    repo.git("remote", "add", "origin", http_url)
    if key == "credential.useHttpPath":
        key, value = "credential.helper", "!{cmd}"
        repo.git("config", "credential.useHttpPath", "true")
    repo.git("config", key.format(url=http_url), value.format(cmd=cmd, prog=program(cmd)))
    run_trigger(repo, Case("proof", lambda r, c: None, FETCH), cmd)
    assert marker.exists(), "plain git would have run it"
    marker.unlink()
    server = net_server(repo)
    for tool in NETWORK:
        assert refused(server, tool)["error"] in ("git_failed", "push_rejected", "not_fast_forward")
    assert not marker.exists()


@pytest.mark.parametrize(
    "env",
    [
        {"GIT_ASKPASS": "{prog}"},
        {"SSH_ASKPASS": "{prog}", "DISPLAY": ":0"},
        {"GIT_CONFIG_PARAMETERS": "'credential.helper'='!{cmd}'"},
    ],
)
def test_the_host_environment_cannot_name_an_askpass_or_helper(tmp_path, http_url, env):
    marker = tmp_path / "marker"
    cmd = hostile_command(marker)
    repo = init_repo(tmp_path / "work")
    repo.commit("initial", **{"a.txt": "one\n"})
    repo.git("remote", "add", "origin", http_url)
    filled = {k: v.format(cmd=cmd, prog=program(cmd)) for k, v in env.items()}
    server = make_server(repo.path, network=True)
    server.runner.env = git_environment({**os.environ, **filled})
    server.runner.set_network(True)
    server.runner.env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    for tool in NETWORK:
        execute(server, tool)
    assert not marker.exists()


def test_the_users_own_credential_helper_is_used_for_network_commands(tmp_path, http_url):
    marker = tmp_path / "marker"
    global_config = tmp_path / "global.gitconfig"
    global_config.write_text(f'[credential]\n\thelper = "!touch {marker}; echo username=u; echo password=p; :"\n')
    repo = init_repo(tmp_path / "work")
    repo.commit("initial", **{"a.txt": "one\n"})
    repo.git("remote", "add", "origin", http_url)
    server = make_server(repo.path, network=True)
    server.runner.env["GIT_CONFIG_GLOBAL"] = str(global_config)
    ok(server, "status")  # a local command never asks for credentials
    assert not marker.exists()
    assert refused(server, "fetch")["error"] == "git_failed"  # the server keeps saying 401
    assert marker.exists()


def test_fetch_never_moves_local_branches_whatever_the_configured_refspec(tmp_path, cloned, remote):
    cloned.git("branch", "side")
    side = cloned.git("rev-parse", "side").strip()
    # a repository-chosen mapping that would force remote branches onto local ones
    cloned.git("config", "--replace-all", "remote.origin.fetch", "+refs/heads/*:refs/heads/*")
    other = init_repo(tmp_path / "pusher")
    other.commit("unrelated", **{"u.txt": "u\n"})
    other.git("push", "-q", "--force", str(remote), "main:side")
    up = upstream_commit(tmp_path, remote)
    server = net_server(cloned)
    ok(server, "fetch")
    assert cloned.git("rev-parse", "side").strip() == side
    assert cloned.git("rev-parse", "origin/side").strip() == other.git("rev-parse", "HEAD").strip()
    assert cloned.git("rev-parse", "origin/main").strip() == up
    ok(server, "pull", {"branch": "main"})
    assert cloned.git("rev-parse", "side").strip() == side
    assert cloned.git("rev-parse", "HEAD").strip() == up
