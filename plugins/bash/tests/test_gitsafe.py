"""Issue 21: a bash run's git gets the git server's config neutralisation (``_gitsafe``)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from bash_helpers import make_manager
from entropic_mcp import CallContext
from entropic_mcp_bash import _gitsafe


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=_clean_env())


@pytest.fixture
def hostile(root: Path) -> Path:
    """A repository whose config runs programs: an fsmonitor, a textconv driver, a pager."""
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    (root / "a.bin").write_text("one\n")
    (root / ".gitattributes").write_text("*.bin diff=evil\n")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "one")
    (root / "a.bin").write_text("two\n")
    with (root / ".git" / "config").open("a") as fh:
        fh.write("[core]\n\tfsmonitor = touch fsmonitor-ran; false\n")
        fh.write('[diff "evil"]\n\ttextconv = "touch textconv-ran; cat"\n')
    return root


def _plain(root: Path, command: str) -> None:
    subprocess.run(["bash", "-c", command], cwd=root, env=_clean_env(), capture_output=True, timeout=30, check=False)


@pytest.mark.parametrize(
    ("command", "rule", "marker"),
    [
        ("git status", "git status *", "fsmonitor-ran"),
        ("git status --short", "git status *", "fsmonitor-ran"),
        ("git diff", "git diff*", "textconv-ran"),
        ("git log -p -1", "git log*", "textconv-ran"),
        ("bash -c 'git status'", "git status *", "fsmonitor-ran"),
    ],
)
def test_an_allowed_git_command_does_not_run_what_the_repository_config_names(
    hostile: Path, command: str, rule: str, marker: str
) -> None:
    _plain(hostile, "git status; git diff; git log -p -1 >/dev/null")
    assert (hostile / marker).exists(), "the hostile config does not run in plain bash"
    (hostile / "fsmonitor-ran").unlink(missing_ok=True)
    (hostile / "textconv-ran").unlink(missing_ok=True)
    manager, _ = make_manager(
        hostile, permissions={"default": "deny", "allow": [f"bash.execute:{rule}", "bash.execute:bash -c *"]}
    )
    try:
        result = manager.call_sync("bash.execute", {"command": command}, CallContext(conversation_id="c"))
    finally:
        manager.close()
    assert result.kind == "ok"
    assert not (hostile / marker).exists()


@pytest.mark.parametrize(
    "command",
    [
        "env -i git status",
        "env -u GIT_CONFIG_COUNT git status",
        "env --unset=GIT_CONFIG_COUNT git status",
        "env - git status",
        "exec -c git status",
        "GIT_CONFIG_COUNT=0 git status",
        "unset GIT_CONFIG_COUNT; git status",
        "unset GIT_CONFIG_PARAMETERS; git status",
        "env -u GIT_CONFIG_PARAMETERS git status",
        "export -n GIT_CONFIG_PARAMETERS; git status",
        "export GIT_CONFIG_COUNT=0; git status",
    ],
)
def test_a_command_that_drops_the_neutralisation_is_not_allowed(hostile: Path, command: str) -> None:
    manager, _ = make_manager(
        hostile,
        permissions={
            "default": "deny",
            "allow": [
                "bash.execute:git status *",
                "bash.execute:env *",
                "bash.execute:exec *",
                "bash.execute:unset *",
                "bash.execute:export *",
            ],
        },
    )
    try:
        result = manager.call_sync("bash.execute", {"command": command}, CallContext(conversation_id="c"))
    finally:
        manager.close()
    assert result.kind == "rejected_permission"
    assert not (hostile / "fsmonitor-ran").exists()


def test_overrides_come_after_the_entries_the_environment_already_has(hostile: Path) -> None:
    env = _clean_env() | {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": "touch ran",
        "GIT_CONFIG_PARAMETERS": "'user.name'='me' 'core.pager'='less'",
    }
    result = _gitsafe.with_git_overrides(env, [hostile])
    assert result["GIT_CONFIG_PARAMETERS"].startswith("'user.name'='me' 'core.pager'='less' ")
    # As git reads them: the environment's entries first, ours after (the last one wins).
    keys = _keys(result)
    assert keys["user.name"] == "me"
    assert keys["core.fsmonitor"] == "false"
    assert keys["core.pager"] == "cat"
    assert keys["diff.evil.textconv"] == ""


def test_keys_git_reads_back_whatever_their_characters(tmp_path: Path) -> None:
    overrides = [("filter.a=b c.clean", ""), ("x.quote", "it's"), ("x.line", "a\nb")]
    env = _clean_env() | {"GIT_CONFIG_PARAMETERS": _gitsafe._parameters(overrides)}
    assert _keys(env) == dict(overrides)


def test_bash_and_the_git_server_use_the_toolkits_one_list() -> None:
    from entropic_mcp import toolkit

    safety = pytest.importorskip("entropic_mcp_git._safety", reason="the git plugin is not installed")
    output_shape = {"color.ui", "core.quotepath", "log.showRoot"}  # the git server's output, not safety
    assert [e for e in safety.STATIC_CONFIG if e.partition("=")[0] not in output_shape] == list(_gitsafe.STATIC_CONFIG)
    assert _gitsafe.STATIC_CONFIG == toolkit.GIT_NEUTRALISING_CONFIG
    assert safety.DYNAMIC_KEYS is _gitsafe.DYNAMIC_KEYS is toolkit.GIT_DYNAMIC_KEYS
    for section, variables in toolkit.GIT_DYNAMIC_KEYS.items():
        for variable, _ in variables:
            key = f"{section}.x.{variable}"
            assert _gitsafe.dynamic_overrides([key]) == safety.overrides_for([key]) != [], key
    for key in ("hook.x.event", "difftool.x.path", "pager.log"):
        assert _gitsafe.dynamic_overrides([key]) == safety.overrides_for([key]) != [], key
    assert _gitsafe.dynamic_overrides(["remote.origin.url", "user.name"]) == []


def _age(*paths: Path) -> None:
    """Move the files' times back, so a listing of them is cached (recent ones never are)."""
    past = time.time() - 60
    for path in paths:
        os.utime(path, (past, past))


def _keys(env: dict[str, str]) -> dict[str, str]:
    """The command-line config git itself reads from ``env`` (the last value of each key)."""
    done = subprocess.run(
        ["git", "config", "--list", "--show-scope", "-z"], env=env, capture_output=True, check=True, cwd="/"
    )
    fields = done.stdout.decode().split("\0")
    pairs = [
        entry.partition("\n") for scope, entry in zip(fields[::2], fields[1::2], strict=False) if scope == "command"
    ]
    return {key: value for key, _, value in pairs}


def test_a_cached_listing_is_read_again_when_the_config_or_an_include_changes(hostile: Path, tmp_path: Path) -> None:
    overrides = _gitsafe.GitOverrides()
    included = tmp_path / "included.cfg"
    included.write_text("[user]\n\tname = x\n")
    with (hostile / ".git" / "config").open("a") as fh:
        fh.write(f"[include]\n\tpath = {included}\n")
    _age(included, hostile / ".git" / "config", hostile / ".git" / "HEAD")
    first = _keys(overrides.environment(_clean_env(), [hostile]))
    assert "diff.evil.textconv" in first and "filter.sneaky.clean" not in first
    included.write_text('[filter "sneaky"]\n\tclean = touch ran\n')
    _age(included)
    assert _keys(overrides.environment(_clean_env(), [hostile]))["filter.sneaky.clean"] == ""
    with (hostile / ".git" / "config").open("a") as fh:
        fh.write('[merge "m"]\n\tdriver = touch ran\n')
    _age(hostile / ".git" / "config")
    assert _keys(overrides.environment(_clean_env(), [hostile]))["merge.m.driver"] == ""


def test_a_repository_made_after_the_first_listing_is_listed(root: Path) -> None:
    overrides = _gitsafe.GitOverrides()
    plain = root / "later"
    plain.mkdir()
    assert "diff.d.textconv" not in _keys(overrides.environment(_clean_env(), [plain]))
    _git(plain, "init", "-q")
    _git(plain, "config", "diff.d.textconv", "touch ran")
    _age(plain / ".git" / "config", plain / ".git" / "HEAD")
    assert _keys(overrides.environment(_clean_env(), [plain]))["diff.d.textconv"] == ""
