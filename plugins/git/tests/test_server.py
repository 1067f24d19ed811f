"""The server: config, listing and annotations, the pipeline, no repository, processes, timeouts."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from importlib.metadata import entry_points
from pathlib import Path

import entropic_mcp_git
import orjson
import pytest
from entropic_mcp import AccessLevel, CallContext, ConfigError
from entropic_mcp.testing import call, check_plugin, make_manager
from entropic_mcp_git import GitServer
from entropic_mcp_git._runner import git_environment
from git_testkit import execute, init_repo, make_server, ok, refused

READ_TOOLS = ["status", "diff", "log", "show", "branch", "blame", "stash_list", "tag"]
WRITE_TOOLS = [
    "add",
    "commit",
    "create_branch",
    "checkout",
    "reset",
    "restore",
    "stash",
    "create_tag",
    "fetch",
    "pull",
    "push",
]
DESTRUCTIVE = {"checkout", "reset", "restore", "stash", "pull"}
NETWORK_TOOLS = {"fetch", "pull", "push"}
VALID_ARGS = {
    "status": {},
    "diff": {},
    "log": {},
    "show": {},
    "branch": {},
    "blame": {"path": "README.md"},
    "stash_list": {},
    "tag": {},
    "add": {"paths": ["."]},
    "commit": {"message": "m"},
    "create_branch": {"name": "b"},
    "checkout": {"target": "main"},
    "reset": {},
    "restore": {"paths": ["."]},
    "stash": {},
    "create_tag": {"name": "t"},
}


def _fake_git(tmp_path: Path, body: str) -> Path:
    """A `git` program that logs its argv and environment, then runs ``body``."""
    log = tmp_path / "calls.log"
    script = tmp_path / "bin" / "git"
    script.parent.mkdir(exist_ok=True)
    real = shutil.which("git")
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "ARGS $*" "PROMPT=$GIT_TERMINAL_PROMPT PAGER=$GIT_PAGER GIT_DIR=$GIT_DIR" >> {log}\n'
        + body.replace("REAL_GIT", real or "git")
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


# -- listing, annotations, permissions ---------------------------------------------------------


def test_the_network_tools_are_listed_only_with_the_network_on(repo):
    offline = [tool["name"] for tool in make_server(repo.path).list_tools()]
    assert offline == READ_TOOLS + [name for name in WRITE_TOOLS if name not in NETWORK_TOOLS]
    online = [tool["name"] for tool in make_server(repo.path, network=True).list_tools()]
    assert online == READ_TOOLS + WRITE_TOOLS


def test_the_tools_with_access_levels_and_annotations(repo):
    server = make_server(repo.path, network=True)
    listing = {tool["name"]: tool for tool in server.list_tools()}
    assert list(listing) == READ_TOOLS + WRITE_TOOLS
    for name in READ_TOOLS:
        assert server.access_level(name) == AccessLevel.READ
        assert listing[name]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    for name in WRITE_TOOLS:
        assert server.access_level(name) == AccessLevel.WRITE
        assert listing[name]["annotations"]["readOnlyHint"] is False
        assert listing[name]["annotations"]["openWorldHint"] is (name in NETWORK_TOOLS)
        assert listing[name]["annotations"]["destructiveHint"] is (name in DESTRUCTIVE), name


def test_permission_pattern_is_the_tool_name(server):
    assert server.permission_pattern("commit", {"message": "x"}) == "git.commit"
    assert server.permission_pattern("status", {}) == "git.status"


def test_permission_rules_read_naturally_through_the_pipeline(repo):
    manager = make_manager(
        repo.path,
        servers=[make_server(repo.path)],
        config={"permissions": {"default": "deny", "allow": ["git.status", "git.diff", "git.log"]}},
    )
    assert call(manager, "git.status").kind == "ok"
    assert call(manager, "git.diff").kind == "ok_empty"
    denied = call(manager, "git.commit", {"message": "x"})
    assert denied.kind == "rejected_permission"
    assert orjson.loads(denied.response.result)["error"] == "permission_denied"


def test_identical_calls_see_the_repository_as_it_is_now(repo):
    manager = make_manager(repo.path, servers=[make_server(repo.path)], config={"permissions": {"default": "allow"}})
    assert orjson.loads(call(manager, "git.status", conversation="c").response.result)["untracked"] == []
    repo.write("new.txt")
    outcome = call(manager, "git.status", conversation="c")
    assert outcome.kind == "ok"
    assert orjson.loads(outcome.response.result)["untracked"] == ["new.txt"]


def test_schema_stage_catches_bad_arguments_before_git_runs(repo):
    manager = make_manager(repo.path, servers=[make_server(repo.path)], config={"permissions": {"default": "allow"}})
    outcome = call(manager, "git.log", {"max_count": 500})
    assert outcome.kind == "rejected_schema"
    assert call(manager, "git.branch", {"kind": "tags"}).kind == "rejected_schema"


def test_the_plugin_is_found_through_its_entry_point():
    found = {ep.name: ep.value for ep in entry_points(group="entropic_mcp.plugins")}
    assert found.get("git") == "entropic_mcp_git"


def test_the_plugin_passes_the_conformance_checks(repo):
    assert check_plugin(entropic_mcp_git, root=repo.path, examples=15) == []


# -- config ------------------------------------------------------------------------------------


def test_config_keys_are_validated(repo):
    server = GitServer(root=repo.path)
    with pytest.raises(ConfigError, match=r"\[servers.git\] unknown key"):
        server.configure({"pager": "less"})
    for bad in (0, -1, "big", True, 10):
        with pytest.raises(ConfigError, match="max_output_bytes"):
            server.configure({"max_output_bytes": bad})
    for bad in ("", 3, "/no/such/git"):
        with pytest.raises(ConfigError, match=r"\[servers.git\] git"):
            server.configure({"git": bad})
    with pytest.raises(ConfigError, match="timeout_seconds"):
        server.configure({"timeout_seconds": 0})
    server.configure({"timeout_seconds": 5, "max_output_bytes": 2048, "git": shutil.which("git")})
    assert (server.default_timeout_seconds, server.runner.timeout, server.runner.max_output_bytes) == (5.0, 5.0, 2048)
    # the toolkit's one number rule: a whole number written as a float is that integer
    server.configure({"max_output_bytes": 4096.0})
    assert server.runner.max_output_bytes == 4096 and type(server.runner.max_output_bytes) is int
    for bad in ("yes", 1, None):
        with pytest.raises(ConfigError, match=r"\[servers.git\] network: expected true or false"):
            server.configure({"network": bad})


def test_default_timeout_is_thirty_seconds(repo):
    server = make_server(repo.path)
    assert server.default_timeout_seconds == 30.0 and server.runner.timeout == 30.0


def test_configured_program_gets_an_argument_list_and_a_safe_environment(tmp_path, repo):
    fake = _fake_git(tmp_path, 'exec REAL_GIT "$@"\n')
    server = make_server(repo.path, git=str(fake))
    os.environ["GIT_DIR"] = str(tmp_path / "elsewhere")
    try:
        server.runner.env = git_environment()
    finally:
        del os.environ["GIT_DIR"]
    ok(server, "status")
    ok(server, "diff", {"target": "HEAD"})
    lines = (tmp_path / "calls.log").read_text().splitlines()
    assert "PROMPT=0 PAGER=cat GIT_DIR=" in lines
    args = [line for line in lines if line.startswith("ARGS ")]
    assert all(line.startswith("ARGS --no-pager -c core.pager=cat") for line in args)
    assert "diff --no-ext-diff --no-textconv --no-color -U3 --end-of-options HEAD --" in args[-1]


def test_git_buffers_its_output_whatever_the_host_sets():
    # flushing after every commit would cost a write and an event-loop wake-up per commit
    assert git_environment({"GIT_FLUSH": "1"})["GIT_FLUSH"] == "0"


def test_work_tree_discovery_is_cached_and_each_read_is_one_process(tmp_path, repo):
    fake = _fake_git(tmp_path, 'exec REAL_GIT "$@"\n')
    server = make_server(repo.path, git=str(fake))
    server.runner.racy_seconds = 0  # the fixture's config files were written a moment ago
    for tool in ("status", "log", "diff", "branch"):
        ok(server, tool)
    args = [line for line in (tmp_path / "calls.log").read_text().splitlines() if line.startswith("ARGS ")]
    # version, discovery, one config listing (cached while the files it read are unchanged), 4
    # reads; no index listing: the index holds no gitlink (its bytes say so), so nothing is nested
    assert len(args) == 7
    assert sum(" config --list" in line for line in args) == 1
    assert sum(" ls-files" in line for line in args) == 0
    assert sum("rev-parse --show-toplevel" in line for line in args) == 1
    assert sum(line.endswith(" version") for line in args) == 1


def test_an_index_change_does_not_reread_the_config(tmp_path, repo):
    fake = _fake_git(tmp_path, 'exec REAL_GIT "$@"\n')
    server = make_server(repo.path, git=str(fake))
    server.runner.racy_seconds = 0
    ok(server, "status")
    repo.write("new.txt")
    ok(server, "add", {"paths": ["new.txt"]})
    ok(server, "status")
    args = [line for line in (tmp_path / "calls.log").read_text().splitlines() if line.startswith("ARGS ")]
    assert sum(" config --list" in line for line in args) == 1


def test_gitlinks_in_the_index_are_found_by_its_bytes(tmp_path, repo):
    from entropic_mcp_git._safety import may_hold_gitlinks

    assert may_hold_gitlinks(repo.path / ".git") is False
    nested = init_repo(repo.path / "nested")
    nested.commit("n", **{"f": "x\n"})
    repo.git("add", "nested")
    assert may_hold_gitlinks(repo.path / ".git") is True
    assert may_hold_gitlinks(init_repo(tmp_path / "fresh").path / ".git") is False  # no index yet


# -- no repository -----------------------------------------------------------------------------


def test_every_tool_answers_not_a_repository_outside_a_work_tree(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    server = make_server(plain)
    for tool, args in VALID_ARGS.items():
        error = refused(server, tool, args)
        assert error["error"] == "not_a_repository", (tool, error)
    init_repo(plain)
    assert ok(server, "status")["branch"] == "main"


def test_not_a_repository_inside_the_git_directory(repo):
    server = make_server(repo.path / ".git")
    assert refused(server, "status")["error"] == "not_a_repository"


def test_set_working_dir_re_roots_the_server(tmp_path, repo):
    plain = tmp_path / "plain"
    plain.mkdir()
    server = make_server(plain)
    assert refused(server, "status")["error"] == "not_a_repository"
    assert server.set_working_dir(repo.path) is True
    assert ok(server, "log")[0]["subject"] == "initial commit"
    assert server.set_working_dir(tmp_path / "missing") is False


def test_a_repository_removed_after_discovery_is_reported(tmp_path):
    repo = init_repo(tmp_path / "gone")
    server = make_server(repo.path)
    ok(server, "status")
    shutil.rmtree(repo.path / ".git")
    assert refused(server, "status")["error"] == "not_a_repository"


def test_a_git_older_than_2_31_is_refused_with_a_clear_error(tmp_path, repo):
    fake = _fake_git(tmp_path, 'case "$*" in *" version") echo "git version 2.30.9";; *) exec REAL_GIT "$@";; esac\n')
    server = make_server(repo.path, git=str(fake))
    error = refused(server, "status")
    assert error["error"] == "git_too_old" and "2.30" in error["message"] and "2.31" in error["message"]


def test_a_missing_git_program_is_reported_not_raised(repo):
    server = make_server(repo.path)
    server.runner.set_program("no-such-git-program")
    error = refused(server, "status")
    assert error["error"] == "git_not_found" and "[servers.git] git" in error["message"]


# -- processes: failures, timeouts, cancellation -----------------------------------------------


def test_git_failures_carry_exit_code_and_stderr(tmp_path, repo):
    fake = _fake_git(
        tmp_path,
        'case "$*" in *rev-parse*|*" version"|*" config --list"*|*" ls-files --stage -z") exec REAL_GIT "$@";; esac\necho "fatal: disk on fire" >&2\nexit 3\n',
    )
    server = make_server(repo.path, git=str(fake))
    error = refused(server, "status")
    assert error == {
        "error": "git_failed",
        "message": error["message"],
        "exit_code": 3,
        "stderr": "fatal: disk on fire",
    }
    assert "disk on fire" in error["message"]


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _hanging_git(tmp_path: Path) -> Path:
    return _fake_git(
        tmp_path,
        f'case "$*" in *rev-parse*|*" version"|*" config --list"*|*" ls-files --stage -z") exec REAL_GIT "$@";; esac\necho $$ > {tmp_path}/pid\nexec sleep 30\n',
    )


def test_a_hanging_git_is_killed_at_the_timeout(tmp_path, repo):
    server = make_server(repo.path, git=str(_hanging_git(tmp_path)), timeout_seconds=0.5)
    error = refused(server, "status")
    assert error["error"] == "timeout" and "timeout_seconds" in error["message"]
    assert _pid_gone(int((tmp_path / "pid").read_text()))


def test_a_stopped_git_gets_term_first_so_it_can_remove_its_lock_files(tmp_path, repo):
    # git removes index.lock (and every lock file) in its TERM handler; a KILL leaves the lock
    # behind and the user's own next git refuses to run
    lock = tmp_path / "index.lock"
    fake = _fake_git(
        tmp_path,
        'case "$*" in *rev-parse*|*" version"|*" config --list"*|*" ls-files --stage -z") exec REAL_GIT "$@";; esac\n'
        f"touch {lock}\ntrap 'rm -f {lock}; exit 143' TERM\nsleep 30 &\nwait\n",
    )
    server = make_server(repo.path, git=str(fake), timeout_seconds=0.5)
    assert refused(server, "status")["error"] == "timeout"
    assert not lock.exists()


def test_a_git_ignoring_term_is_killed(tmp_path, repo):
    fake = _fake_git(
        tmp_path,
        'case "$*" in *rev-parse*|*" version"|*" config --list"*|*" ls-files --stage -z") exec REAL_GIT "$@";; esac\n'
        f"echo $$ > {tmp_path}/pid\ntrap '' TERM\nwhile :; do sleep 0.05; done\n",
    )
    server = make_server(repo.path, git=str(fake), timeout_seconds=0.3)
    assert refused(server, "status")["error"] == "timeout"
    assert _pid_gone(int((tmp_path / "pid").read_text()))


def test_a_hanging_git_times_out_through_the_pipeline(tmp_path, repo):
    table = {"git": str(_hanging_git(tmp_path)), "timeout_seconds": 0.5}
    manager = make_manager(
        repo.path,
        plugins=[entropic_mcp_git],
        config={"permissions": {"default": "allow"}, "servers": {"git": table}},
    )
    assert call(manager, "git.log").kind == "timeout"
    assert _pid_gone(int((tmp_path / "pid").read_text()))


def test_a_cancelled_call_kills_git(tmp_path, repo):
    pipe = tmp_path / "started"
    os.mkfifo(pipe)
    fake = _fake_git(
        tmp_path,
        f'case "$*" in *rev-parse*|*" version"|*" config --list"*|*" ls-files --stage -z") exec REAL_GIT "$@";; esac\necho $$ > {pipe}\nexec sleep 30\n',
    )
    server = make_server(repo.path, git=str(fake))

    async def scenario() -> int:
        task = asyncio.create_task(server.execute("diff", {}, CallContext()))
        pid = int(await asyncio.to_thread(pipe.read_text))  # blocks until git has started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pid

    assert _pid_gone(asyncio.run(scenario()))


def test_huge_output_is_cut_and_git_stopped(tmp_path, repo):
    fake = _fake_git(
        tmp_path,
        'case "$*" in *rev-parse*|*" version"|*" config --list"*|*" ls-files --stage -z") exec REAL_GIT "$@";; esac\nexec yes "+ a line of diff"\n',
    )
    server = make_server(repo.path, git=str(fake), max_output_bytes=8192)
    text = execute(server, "diff").result
    assert len(text.encode()) < 8192 + 300
    assert "[... output cut at 8192 bytes;" in text


def test_concurrent_calls_leak_no_descriptor_and_no_process(tmp_path, repo):
    server = make_server(repo.path)
    repo.write("README.md", "# changed\n")
    ok(server, "status")  # discovery done before counting
    fds = len(os.listdir("/proc/self/fd"))

    async def burst() -> list[bool]:
        calls = [server.execute(tool, {}, CallContext()) for tool in ("status", "log", "diff", "branch", "show") * 8]
        return [response.is_error for response in await asyncio.gather(*calls)]

    assert asyncio.run(burst()) == [False] * 40
    assert len(os.listdir("/proc/self/fd")) == fds
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    assert children == []
