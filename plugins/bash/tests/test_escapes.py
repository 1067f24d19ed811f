"""Issue 13: the escape corpus — every case is live (plain bash really deletes or overwrites the
victim) and the pipeline refuses it, under allow rules and under a deny rule, with the victim intact."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from bash_helpers import make_manager
from entropic_mcp import CallContext, ServerManager, ToolError
from entropic_mcp_bash import BashServer
from escape_corpus import CASES, CONTINUATIONS, OPTION_WRITES, PLANTING, POLICY, REDIRECTS, SED, Case
from hypothesis import given, settings
from hypothesis import strategies as st

PRECIOUS = "precious\n"
EVIL_CONFIG = "[core]\n\tfsmonitor = rm victim; false\n"
ALLOW = {
    "default": "deny",
    "allow": ["bash.execute:ls *", "bash.execute:cat *", "bash.execute:git status *", "bash.execute:echo *"],
}
DENY = {"default": "allow", "deny": ["bash.execute:rm *"]}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=_clean_env())


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "BASH_ENV"))}


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with a victim, a script that removes it, a git repository and hostile configs."""
    root = tmp_path_factory.mktemp("escape-template") / "project"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    (root / "s.sh").write_text("rm victim\n")
    (root / "ls").write_text("#!/bin/sh\n/bin/rm victim\n")  # PATH=. ls
    (root / "ls").chmod(0o755)
    (root / "evil.cfg").write_text(EVIL_CONFIG)
    (root / ".gitconfig").write_text(EVIL_CONFIG)
    (root / "cfg" / "git").mkdir(parents=True)
    (root / "cfg" / "git" / "config").write_text(EVIL_CONFIG)
    (root / "evil").mkdir()
    _git(root / "evil", "init", "-q")
    with (root / "evil" / ".git" / "config").open("a") as fh:
        fh.write("[core]\n\tfsmonitor = rm ../victim; rm victim; false\n")
    (root / "sub").mkdir()
    (root / "link").symlink_to(".")
    (root / "entropic-mcp.toml").write_text(PRECIOUS)
    (root / "entropic-mcp.local.toml").write_text(PRECIOUS)
    (root / ".entropicignore").write_text(PRECIOUS)
    (root / "secrets").mkdir()
    (root / "secrets" / "key").write_text(PRECIOUS)
    # issue 21's option corpus: two commits, a Makefile with a test target, hostile makefiles
    (root / "Makefile").write_text("test:\n\t@echo testing $(MSG)\n")
    (root / "evil.mk").write_text("test:\n\trm victim\n")
    (root / "evil" / "Makefile").write_text("test:\n\trm ../victim\n")
    (root / "evil.awk").write_text('BEGIN { system("rm victim") }\n')
    (root / "test_t.py").write_text("def test_t(tmp_path):\n    pass\n")
    (root / "package.json").write_text('{"name": "t", "version": "1.0.0", "scripts": {"t": "echo t"}}\n')
    _git(root, "add", "s.sh")
    _git(root, "commit", "-q", "-m", "one")
    _git(root, "add", "Makefile")
    _git(root, "commit", "-q", "-m", "two")
    return root


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(template, root, symlinks=True)
    (root / "victim").write_text(PRECIOUS)
    (root / "alias-of-victim").symlink_to("victim")
    return root.resolve()


def intact(root: Path, name: str = "victim") -> bool:
    path = root / name
    return path.is_file() and path.read_text() == PRECIOUS


def run_plain(root: Path, command: str) -> None:
    """The case with no checks at all: plain bash in the project."""
    subprocess.run(
        ["bash", "-c", command],
        cwd=root,
        env=_clean_env() | {"HOME": str(root.parent)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=20,
    )


def run_checked(root: Path, command: str, permissions: dict) -> str:
    manager, _ = make_manager(root, permissions=permissions)
    try:
        return manager.call_sync("bash.execute", {"command": command}, CallContext(conversation_id="c")).kind
    finally:
        manager.close()


def _ids(cases: list[Case]) -> list[str]:
    return [c.command[:60] for c in cases]


LIVE = [c for c in CASES + SED if c.live]


def test_the_corpus_is_large() -> None:
    assert len(CASES) + len(SED) + len(REDIRECTS) + len(POLICY) + len(PLANTING) >= 330
    assert len(CONTINUATIONS) >= 60


@pytest.mark.parametrize("case", LIVE, ids=_ids(LIVE))
def test_each_case_really_runs_hidden_code_in_plain_bash(project: Path, case: Case) -> None:
    run_plain(project, case.command)
    assert not intact(project), "the case does not remove the victim: fix it or mark it live=False"


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_allow_rules_never_allow_a_case(project: Path, case: Case) -> None:
    assert run_checked(project, case.command, ALLOW) == "rejected_permission"
    assert intact(project)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_a_deny_rule_on_rm_stops_every_case(project: Path, case: Case) -> None:
    assert run_checked(project, case.command, DENY) == "rejected_permission"
    assert intact(project)


@pytest.mark.parametrize("case", SED, ids=_ids(SED))
def test_sed_scripts_that_run_or_write_are_not_allowed_by_a_sed_rule(project: Path, case: Case) -> None:
    rules = {"default": "deny", "allow": ["bash.execute:sed *"]}
    assert run_checked(project, case.command, rules) == "rejected_permission"
    assert intact(project)
    assert run_checked(project, "sed -n 's/rm/x/p' s.sh", rules) == "ok"


def _redirects(root: Path) -> list[str]:
    return [
        *REDIRECTS,
        f"echo x > /dev/fd/../../..{root}/victim",
        f"echo x > /proc/self/root{root}/victim",
        f"echo x > {root}/victim",
        f"cd /; echo x > {root}/sub/../victim",
    ]


@pytest.mark.parametrize("index", range(len(REDIRECTS) + 4))
def test_redirections_land_where_bash_puts_them(project: Path, index: int) -> None:
    command = _redirects(project)[index]
    run_plain(project, command)
    assert not intact(project), f"{command!r} does not overwrite the victim in plain bash"
    (project / "victim").write_text(PRECIOUS)
    for rule in ("filesystem.edit_file:victim", "filesystem.write:victim", f"filesystem.write_file:{project}/victim"):
        kind = run_checked(project, command, {"default": "allow", "deny": [rule]})
        assert kind == "rejected_permission", (command, rule)
        assert intact(project), (command, rule)


@pytest.mark.parametrize("command", POLICY)
def test_policy_files_are_never_written_by_a_redirection(project: Path, command: str) -> None:
    assert run_checked(project, command, {"default": "allow"}) == "rejected_permission"
    assert run_checked(project, command, {"default": "allow", "allow": ["bash.execute", "bash.execute:*"]}) == (
        "rejected_permission"
    )
    for name in ("entropic-mcp.toml", "entropic-mcp.local.toml", ".entropicignore"):
        assert intact(project, name)


@pytest.mark.parametrize("command", PLANTING)
def test_writes_that_plant_code_are_asked_about_even_when_everything_is_allowed(project: Path, command: str) -> None:
    config = (project / ".git" / "config").read_text()
    rules = {"default": "allow", "allow": ["bash.execute", "bash.execute:*"]}
    assert run_checked(project, command, rules) == "rejected_permission"
    assert (project / ".git" / "config").read_text() == config
    assert not (project / ".git" / "hooks" / "pre-commit").exists()


def test_outside_writes_follow_the_outside_root_policy(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    manager, _ = make_manager(project, permissions={"default": "allow"}, bash={"outside_root_allow": [str(tmp_path)]})
    try:
        result = manager.call_sync("bash.execute", {"command": f"echo x > {target}"}, CallContext(conversation_id="c"))
        assert result.kind == "ok"
        assert target.read_text() == "x\n"
    finally:
        manager.close()


@pytest.mark.parametrize(
    "command",
    [
        "ls",
        "ls -la && echo hi | cat",
        "echo hi > out.txt",
        "echo $((1 + 2)) ${#HOME} ${HOME:-x} ${HOME:1:2} ${arr[0]} ${arr[@]}",
        "[[ 1 -eq 1 ]] && echo yes",
        '[ "$#" -eq 0 ] && echo none',
        "cat <<'EOF'\n$(rm victim) `rm victim`\nEOF",
        "cat <<EOF\nhello $HOME ${HOME}\nEOF",
        "x=1; echo $x",
        "export FOO=bar; echo $FOO",
        "GIT_AUTHOR_NAME=x git status",
        "git status --short",
        "cat < s.sh > /dev/null",
        "echo hi > /dev/stdout 2> /dev/stderr",
        "cd sub && echo hi > out.txt",
    ],
)
def test_plain_commands_stay_understood_and_allowed(project: Path, command: str) -> None:
    rules = {
        "default": "deny",
        "allow": [*ALLOW["allow"], "bash.execute:cd *", "bash.execute:export *", "bash.execute:[ *"],
    }
    assert run_checked(project, command, rules) == "ok"
    assert intact(project)


@functools.cache
def _deciders() -> tuple[BashServer, ServerManager, ServerManager]:
    root = Path(tempfile.mkdtemp(prefix="escape-decide-")).resolve()
    deny, server = make_manager(root, permissions=DENY)
    allow, _ = make_manager(root, permissions=ALLOW)
    return server, deny, allow


AROUND = [
    "{}",
    "({})",
    "{{ {}; }}",
    "echo $({})",
    "eval '{}'",
    "if true; then {}; fi",
    "ls && {}",
    "{} || ls",
    "echo hi\n{}",
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([c.command for c in CASES]), st.sampled_from(AROUND))
def test_a_case_wrapped_in_more_shell_is_still_never_allowed(case: str, around: str) -> None:
    if "'" in around and "'" in case:
        around = "({})"  # the case's own quotes would end eval's
    text = around.format(case)
    server, deny, allow = _deciders()
    parts = server.permission_parts("execute", {"command": text})
    if server.syntax.known(text, server.settings.shell) is not None:
        # Broken shell (bash -n agrees): answered as a syntax error by the tool, never run.
        with pytest.raises(ToolError) as refused:
            tool = server.get_tool("execute")
            assert tool is not None
            asyncio.run(tool.execute({"command": text}, CallContext(conversation_id="c")))
        assert refused.value.code == "syntax_error"
        return
    assert allow.permissions.decide(parts, read_only=False)[0] != "allow", text
    assert deny.permissions.decide(parts, read_only=False)[0] != "allow", text


@pytest.mark.parametrize(
    "command",
    [
        "env -C sub bash -c 'echo x > victim'",
        "env --chdir=sub bash -c 'echo x > victim'",
        "env -Csub bash -c 'echo x > victim'",
        "unshare -w sub sh -c 'echo x > victim'",
        "sudo -D sub sh -c 'echo x > victim'",
    ],
)
def test_a_wrapper_that_changes_directory_makes_relative_targets_unknown(project: Path, command: str) -> None:
    (project / "sub" / "victim").write_text(PRECIOUS)
    kind = run_checked(project, command, {"default": "allow", "deny": ["filesystem.write_file:sub/victim"]})
    assert kind == "rejected_permission"
    assert intact(project / "sub")


@pytest.mark.parametrize("command", ["unset X", "export X", "local x", "readonly R", "unset -f f"])
def test_bare_names_in_declarations_are_understood(project: Path, command: str) -> None:
    _, server = make_manager(project)
    assert all(p.understood for p in server.permission_parts("execute", {"command": command}))


@pytest.mark.parametrize(
    ("command", "rules", "expected"),
    [
        ("uv run pytest -q", {"default": "deny", "allow": ["bash.execute:uv run *"]}, "allow"),
        (
            "uv run rm -rf x",
            {"default": "deny", "allow": ["bash.execute:uv run *"], "deny": ["bash.execute:rm *"]},
            "deny",
        ),
        ("npx eslint .", {"default": "deny", "allow": ["bash.execute:npx *"]}, "allow"),
        ("poetry run pytest", {"default": "allow", "ask": ["bash.execute:pytest *"]}, "ask"),
    ],
)
def test_a_tool_runner_is_allowed_by_its_own_rule_and_denied_by_rules_on_what_it_runs(
    project: Path, command: str, rules: dict, expected: str
) -> None:
    manager, server = make_manager(project, permissions=rules)
    parts = server.permission_parts("execute", {"command": command})
    assert manager.permissions.decide(parts, read_only=False)[0] == expected


def test_a_hard_linked_target_is_asked_about(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-secret"
    outside.write_text(PRECIOUS)
    os.link(outside, project / "innocent.txt")
    rules = {"default": "allow", "allow": ["bash.execute", "bash.execute:*"]}
    assert run_checked(project, "echo x > innocent.txt", rules) == "rejected_permission"
    assert outside.read_text() == PRECIOUS


#: Issue 21's rules: only echo, printf and git status allowed; rm and writes to secrets/ denied.
ISSUE_21 = {
    "default": "deny",
    "allow": ["bash.execute:echo *", "bash.execute:printf *", "bash.execute:git status *"],
    "deny": ["bash.execute:rm *", "filesystem.write_file:secrets/*"],
}
N = "\\\n"
SECRET_WRITES = [
    f"echo x > sec{N}rets/key",
    f"echo x > secrets/k{N}ey",
    f"printf x >> se{N}crets/key",
    f"echo x > sec{N}rets{N}/key",
    f"echo x > ./sec{N}rets/key",
    f"echo x >{N} secrets/key",
    f'echo x > "sec{N}rets/key"',
    f"cd sec{N}rets && echo x > key",
]


@pytest.mark.parametrize("command", SECRET_WRITES, ids=[c.replace(N, "<nl>") for c in SECRET_WRITES])
def test_a_continuation_in_a_target_does_not_hide_a_denied_write(project: Path, command: str) -> None:
    run_plain(project, command)
    assert not intact(project, "secrets/key"), "the case does not overwrite the key in plain bash"
    (project / "secrets" / "key").write_text(PRECIOUS)
    for rules in (ISSUE_21, {"default": "allow", "deny": ["filesystem.write_file:secrets/*"]}):
        assert run_checked(project, command, rules) == "rejected_permission"
        assert intact(project, "secrets/key")


@pytest.mark.parametrize(
    ("command", "program"), [(f"r{N}m x", "rm x"), (f"ls{N}of", "lsof"), (f"git sta{N}tus", "git status")]
)
def test_rules_see_the_joined_command_name(project: Path, command: str, program: str) -> None:
    _, server = make_manager(project)
    names = {name for part in server.permission_parts("execute", {"command": command}) for name in part.names}
    assert f"bash.execute:{program}" in names


def test_a_split_name_does_not_match_the_rule_of_its_first_half(project: Path) -> None:
    assert run_checked(project, f"ls{N}of", {"default": "deny", "allow": ["bash.execute:ls *"]}) == (
        "rejected_permission"
    )
    assert run_checked(project, f"r{N}m victim", ISSUE_21 | {"default": "allow"}) == "rejected_permission"
    assert intact(project)


@pytest.mark.parametrize(
    "command",
    [
        "echo 'a\\\nb'",
        "echo $'a\\\nb'",
        "echo hi # a comment \\\necho there",
        "printf x <<'EOF'\na\\\nb\nEOF",
        f"echo a{N}b",
        f'echo "a{N}b"',
        f"git st{N}atus --short",
        f"printf '%s\\n' x{N}y",
    ],
)
def test_continuations_bash_keeps_or_joins_harmlessly_stay_allowed(project: Path, command: str) -> None:
    assert run_checked(project, command, ISSUE_21) == "ok"


#: What an option case may harm: the victim, the policy files, a denied file, git's config and hooks.
GUARDED = ("victim", "entropic-mcp.toml", "entropic-mcp.local.toml", ".entropicignore", "secrets", ".git/config")


def _guarded(root: Path) -> dict[str, bytes | None]:
    state: dict[str, bytes | None] = {}
    for name in (*GUARDED, ".git/hooks"):
        path = root / name
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                state[str(child.relative_to(root))] = child.read_bytes() if child.is_file() else None
        else:
            state[name] = path.read_bytes() if path.is_file() else None
    return state


def _option_rules(case: Case) -> dict:
    return {
        "default": "deny",
        "allow": [f"bash.execute:{case.rule}", "bash.execute:echo *", "bash.execute:cat *"],
        "deny": ["bash.execute:rm *", "filesystem.write_file:secrets/*"],
    }


LIVE_OPTIONS = [c for c in OPTION_WRITES if c.live]


def test_the_option_corpus_covers_every_modelled_program() -> None:
    assert len(OPTION_WRITES) >= 100
    programs = {
        c.rule.split()[0] if not c.rule.startswith("git") else " ".join(c.rule.split()[:2]) for c in OPTION_WRITES
    }
    assert {"git log*", "git grep*", "sort", "make", "find", "sed", "tee", "awk", "less", "pytest", "npm"} <= programs


@pytest.mark.parametrize("case", LIVE_OPTIONS, ids=_ids(LIVE_OPTIONS))
def test_each_option_case_really_writes_or_runs_in_plain_bash(project: Path, case: Case) -> None:
    before = _guarded(project)
    run_plain(project, case.command)
    assert _guarded(project) != before, "the case harms nothing in plain bash: fix it or mark it live=False"


@pytest.mark.parametrize("case", OPTION_WRITES, ids=_ids(OPTION_WRITES))
def test_an_option_that_writes_or_runs_is_not_allowed_by_the_programs_narrow_rule(project: Path, case: Case) -> None:
    before = _guarded(project)
    assert run_checked(project, case.command, _option_rules(case)) == "rejected_permission"
    assert _guarded(project) == before


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git log --oneline -5", "git log*"),
        ("git log -p --stat --format=%H -n 2 -- s.sh", "git log*"),
        ("git show HEAD --name-only", "git show*"),
        ("git diff HEAD~1 --stat", "git diff*"),
        ("git status --short --branch", "git status *"),
        ("git grep -n rm", "git grep*"),
        ("sort -r -k 1 s.sh", "sort *"),
        ("sort -o out.txt s.sh", "sort *"),
        ("make test", "make test *"),
        ("make -s test", "make *"),
        ("find . -maxdepth 1 -name '*.sh'", "find *"),
        ("sed -n 's/rm/x/p' s.sh", "sed *"),
        ("sed -i s/rm/x/ s.sh", "sed *"),
        ("echo x | tee out.txt", "tee *"),
        ("awk '{print $1}' s.sh", "awk *"),
        ("cat s.sh | less", "less *"),
    ],
)
def test_options_that_only_read_or_write_unprotected_files_stay_allowed(project: Path, command: str, rule: str) -> None:
    assert run_checked(project, command, _option_rules(Case(command, rule=rule))) == "ok"
    assert intact(project)
