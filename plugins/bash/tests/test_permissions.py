"""The shell-rule bypass corpus, through a real ServerManager and pipeline."""

from __future__ import annotations

import functools
from pathlib import Path

import orjson
import pytest
from bash_helpers import make_manager
from entropic_mcp import CallContext, ServerManager
from entropic_mcp_bash import BashServer
from hypothesis import given, settings
from hypothesis import strategies as st

ALLOW = ["bash.execute:ls *", "bash.execute:echo *", "bash.execute:cat *", "bash.execute:true *"]
DENY_RM = ["bash.execute:rm *"]

BYPASSES = [
    "ls && rm -rf x",
    "ls; rm x",
    "ls || rm x",
    "ls & rm x",
    "ls | rm x",
    "ls |& rm x",
    "echo $(rm x)",
    "echo `rm x`",
    'echo "$(rm x)"',
    'eval "rm x"',
    "eval rm x",
    'bash -c "rm x"',
    "sh -c 'rm x'",
    "bash -lc 'rm x'",
    "/bin/bash -e -c 'ls; rm x'",
    "timeout 5 rm x",
    "timeout -s KILL 5 rm x",
    "time rm x",
    "nice rm x",
    "nice -n 5 rm x",
    "nohup rm x",
    "stdbuf -oL rm x",
    "command rm x",
    "builtin rm x",
    "env A=1 rm x",
    "env -i A=1 rm x",
    'env "A=1" B=$(x) rm x',
    "timeout $T rm x",
    "xargs rm",
    "FOO=1 rm x",
    "FOO=1 BAR=2 rm -rf x",
    "/bin/rm x",
    "/usr/bin/rm -rf x",
    "ls\nrm x",
    "(rm x)",
    "{ rm x; }",
    "cat <(rm x)",
    "ls > >(rm x)",
    "'rm' x",
    '"r"m x',
    "r\\m x",
    "if true; then rm x; fi",
    "for f in a; do rm $f; done",
    "f() { rm x; }; f",
    "! rm x",
    "ls && eval 'bash -c \"timeout 1 rm x\"'",
    "find . -exec rm {} \\;",
    "trap 'rm x' EXIT",
    "sudo rm x",
]


def outcome(root: Path, command: str, *, permissions: dict) -> str:
    manager, _ = make_manager(root, permissions=permissions)
    return manager.call_sync("bash.execute", {"command": command}, CallContext(conversation_id="c")).kind


@pytest.mark.parametrize("command", BYPASSES)
def test_bypass_denied_by_deny_rule(root: Path, command: str) -> None:
    manager, _ = make_manager(root, permissions={"default": "allow", "deny": DENY_RM})
    result = manager.call_sync("bash.execute", {"command": command}, CallContext(conversation_id="c"))
    assert result.kind == "rejected_permission"
    assert orjson.loads(result.response.result)["error"] == "permission_denied"
    assert result.permission == "deny"


@pytest.mark.parametrize("command", BYPASSES)
def test_bypass_not_allowed_by_allow_rules(root: Path, command: str) -> None:
    assert outcome(root, command, permissions={"default": "ask", "allow": ALLOW}) == "rejected_permission"


@pytest.mark.parametrize("command", ["ls | sh", "ls | bash", "cat x | sh -s"])
def test_piping_into_a_shell_is_never_allowed(root: Path, command: str) -> None:
    manager, server = make_manager(root, permissions={"default": "allow", "allow": [*ALLOW, "bash.execute:sh *"]})
    result = manager.call_sync("bash.execute", {"command": command}, CallContext(conversation_id="c"))
    assert result.kind == "rejected_permission"
    assert result.permission == "ask->deny"


def test_redirection_checked_against_write_deny(root: Path) -> None:
    permissions = {"default": "allow", "allow": ALLOW, "deny": ["filesystem.write_file:/etc/*"]}
    assert outcome(root, "echo hi > /etc/passwd", permissions=permissions) == "rejected_permission"
    assert outcome(root, "echo hi >> /etc/passwd", permissions=permissions) == "rejected_permission"
    assert outcome(root, "echo hi &> /etc/passwd", permissions=permissions) == "rejected_permission"
    assert (
        outcome(root, "cd /etc && echo hi > passwd", permissions=permissions | {"allow": [*ALLOW, "bash.execute:cd *"]})
        == "rejected_permission"
    )


def test_redirection_inside_root_matched_by_relative_rule(root: Path) -> None:
    permissions = {"default": "allow", "deny": ["filesystem.write_file:secrets/*"]}
    assert outcome(root, "echo x > secrets/key", permissions=permissions) == "rejected_permission"
    assert outcome(root, "echo x > public.txt", permissions=permissions) == "ok"
    assert not (root / "secrets").exists()


def test_dev_null_redirection_needs_no_rule(root: Path) -> None:
    permissions = {"default": "deny", "allow": ALLOW, "deny": ["filesystem.write_file:/dev/*"]}
    assert outcome(root, "ls > /dev/null 2>&1", permissions=permissions) == "ok"


def test_computed_redirection_target_asks(root: Path) -> None:
    assert (
        outcome(root, 'echo hi > "$HOME/x"', permissions={"default": "allow", "allow": ALLOW}) == "rejected_permission"
    )


def test_allowed_commands_run(root: Path) -> None:
    permissions = {"default": "deny", "allow": ALLOW}
    for command in ("ls", "ls -la", "ls && echo hi | cat", "/bin/ls", "FOO=1 ls", "timeout 5 ls", "echo $(ls)"):
        assert outcome(root, command, permissions=permissions) == "ok", command


def test_ls_rule_does_not_match_lsof(root: Path) -> None:
    permissions = {"default": "deny", "allow": ["bash.execute:ls *"]}
    assert outcome(root, "lsof", permissions=permissions) == "rejected_permission"
    assert outcome(root, "ls", permissions=permissions) == "ok"


def test_prefix_rule_with_subcommand(root: Path) -> None:
    _, server = make_manager(root)
    names = server.permission_parts("execute", {"command": "git log --oneline"})[0].names
    from fnmatch import fnmatchcase

    assert any(fnmatchcase(n, "bash.execute:git log*") for n in names)
    assert not any(
        fnmatchcase(n, "bash.execute:git log *")
        for n in server.permission_parts("execute", {"command": "git logx"})[0].names
    )


@pytest.mark.parametrize(
    "command",
    [
        "$x foo",
        "$(echo rm) x",
        "`echo rm` x",
        "r* x",
        "{rm,x}",
        "${CMD} x",
        "ls | sh",
        "PATH=/tmp ls",
        "LD_PRELOAD=/x.so ls",
        "PATH=/tmp/x; ls",
        "export PATH=/tmp/x; ls",
        "declare -x LD_PRELOAD=/x.so; ls",
        "eval $x",
        'bash -c "$x"',
    ],
)
def test_what_the_parser_cannot_understand_is_never_allowed(root: Path, command: str) -> None:
    _, server = make_manager(root)
    parts = server.permission_parts("execute", {"command": command})
    assert any(not p.understood for p in parts)
    permissions = {"default": "allow", "allow": ["bash.execute", "bash.execute:*", "bash.execute:ls *"]}
    assert outcome(root, command, permissions=permissions) == "rejected_permission"


def test_untrusted_path_needs_its_own_rule_but_base_name_still_denies(root: Path) -> None:
    script = root / "ls"
    script.write_text("#!/bin/sh\necho fake\n")
    script.chmod(0o755)
    assert (
        outcome(root, "./ls", permissions={"default": "deny", "allow": ["bash.execute:ls *"]}) == "rejected_permission"
    )
    assert outcome(root, "./ls", permissions={"default": "deny", "allow": ["bash.execute:./ls *"]}) == "ok"
    assert (
        outcome(root, "./ls", permissions={"default": "allow", "deny": ["bash.execute:ls *"]}) == "rejected_permission"
    )


@pytest.mark.parametrize(
    ("command", "stored"),
    [
        ("ls -la", ["bash.execute:ls *"]),
        ("git log --oneline -5", ["bash.execute:git log *"]),
        ("git -C sub status", ["bash.execute:git -C sub status *"]),
        ("npm run build", ["bash.execute:npm run *"]),
        ("cargo test --release", ["bash.execute:cargo test *"]),
        ("docker compose up", ["bash.execute:docker compose *"]),
        ("python -m pytest -q", ["bash.execute:python -m pytest *"]),
        ("python -c 'print(1)'", ["bash.execute:python -c print(1)"]),
        ("/usr/bin/make test", ["bash.execute:make test *"]),
        ("./gradlew build", ["bash.execute:./gradlew *"]),
        ("ls && git status", ["bash.execute:ls *", "bash.execute:git status *"]),
    ],
)
def test_always_allow_stores_one_rule_per_command(root: Path, command: str, stored: list[str]) -> None:
    _, server = make_manager(root)
    parts = [p for p in server.permission_parts("execute", {"command": command}) if not p.neutral]
    assert [p.store for p in parts] == stored
    assert server.permission_pattern("execute", {"command": command}) == stored[0]


def test_always_allow_answer_persists_and_applies(root: Path) -> None:
    from entropic_mcp import Plugins, hookimpl

    class Approver:
        @hookimpl
        def entropic_mcp_approve_tool_call(self, request):
            return "always_allow"

    manager, _ = make_manager(root, permissions={"default": "ask"})
    manager.plugins.register(Approver(), name="approver")
    manager.invalidate()
    result = manager.call_sync("bash.execute", {"command": "echo a && git status"}, CallContext(conversation_id="c"))
    assert result.permission == "ask->allow"
    assert {"bash.execute:echo *", "bash.execute:git status *"} <= set(manager.permissions.lists["allow"])
    assert isinstance(Plugins, type)


def test_parts_never_raise_on_odd_arguments(root: Path) -> None:
    _, server = make_manager(root)
    for args in ({}, {"command": None}, {"command": 5}, {"command": ""}, {"command": "ls", "working_dir": 3}):
        parts = server.permission_parts("execute", args)
        assert parts and parts[0].store.startswith("bash.execute")


@functools.cache
def _deciders() -> tuple[BashServer, ServerManager, ServerManager]:
    """One server and two rule sets, shared by the property tests (nothing here runs a command)."""
    deny, server = make_manager(Path("/tmp"), permissions={"default": "allow", "deny": DENY_RM})
    allow, _ = make_manager(Path("/tmp"), permissions={"default": "ask", "allow": ALLOW})
    return server, deny, allow


WRAPPED = st.sampled_from(
    [
        "",
        "FOO=1 ",
        "timeout 5 ",
        "nice -n 2 ",
        "nohup ",
        "env A=1 ",
        "command ",
        "/bin/",
        "/usr/bin/",
        "time ",
        "stdbuf -oL ",
        "builtin ",
    ]
)
AROUND = st.sampled_from(
    [
        "{}",
        "({})",
        "{{ {}; }}",
        "echo $({})",
        "echo `{}`",
        "cat <({})",
        "eval '{}'",
        "bash -c '{}'",
        "sh -c '{}'",
        "if true; then {}; fi",
        "! {}",
        "f() {{ {}; }}",
    ]
)
JOIN = st.sampled_from([" && ", " || ", "; ", " | ", " |& ", " & ", "\n"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["ls", "ls -la", "echo hi", "cat f", "true"]), max_size=3),
    JOIN,
    WRAPPED,
    AROUND,
    st.integers(min_value=0, max_value=3),
)
def test_a_hidden_rm_is_always_denied_and_never_allowed(
    safe: list[str], join: str, wrapper: str, around: str, at: int
) -> None:
    commands = list(safe)
    commands.insert(min(at, len(commands)), around.format(f"{wrapper}rm -rf x"))
    text = join.join(commands)
    server, deny, allow = _deciders()
    parts = server.permission_parts("execute", {"command": text})
    assert deny.permissions.decide(parts, read_only=False)[0] == "deny", text
    assert allow.permissions.decide(parts, read_only=False)[0] != "allow", text


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_permission_parts_never_raise_on_arbitrary_text(text: str) -> None:
    parts = _deciders()[0].permission_parts("execute", {"command": text})
    assert parts and all(isinstance(p.store, str) and p.store for p in parts)


@pytest.mark.parametrize(
    ("command", "programs"),
    [
        ("find . -name x -exec rm {} \\;", ["find", "rm"]),
        ("find . -name '*.pyc' -exec rm -f {} +", ["find", "rm"]),
        ("ls | xargs -I{} echo {}", ["ls", "echo"]),
        ("ls | xargs -I {} cp {} {}.bak", ["ls", "cp"]),
        ("ls | xargs -i echo {}", ["ls", "echo"]),
        ("echo {}", ["echo"]),
        ("echo -I{}x", ["echo"]),
    ],
)
def test_unquoted_empty_braces_are_inert_and_the_commands_are_modelled(
    root: Path, command: str, programs: list[str]
) -> None:
    _, server = make_manager(root)
    parts = server.permission_parts("execute", {"command": command})
    assert all(p.understood for p in parts), [p.store for p in parts if not p.understood]
    assert [p.store.partition(":")[2].split()[0] for p in parts] == programs
    allow = {"default": "ask", "allow": [f"bash.execute:{p} *" for p in programs]}
    assert outcome(root, command, permissions=allow) == "ok"
    if "rm" in programs:
        assert outcome(root, command, permissions={"default": "allow", "deny": DENY_RM}) == "rejected_permission"


@pytest.mark.parametrize("command", ["ls | xargs -I{} {} x", "ls | xargs -I cmd cmd x", "ls | xargs -i sh{} x"])
def test_xargs_replacing_into_the_program_name_is_not_understood(root: Path, command: str) -> None:
    _, server = make_manager(root)
    assert any(not p.understood for p in server.permission_parts("execute", {"command": command}))


@pytest.mark.parametrize(
    ("command", "construct", "where"),
    [
        ("echo hi; $CMD x", "$CMD x", "line 1, column 10"),
        ('ls\necho ok && eval "$x"', 'eval "$x"', "line 2, column 12"),
    ],
)
def test_a_not_fully_analysed_refusal_names_the_construct_and_its_column(
    root: Path, command: str, construct: str, where: str
) -> None:
    manager, _ = make_manager(root, permissions={"default": "allow"})
    result = manager.call_sync("bash.execute", {"command": command}, CallContext(conversation_id="c"))
    assert result.kind == "rejected_permission"
    message = orjson.loads(result.response.result)["message"]
    assert construct in message and where in message, message


def test_the_environment_and_working_directory_are_worked_out_once_per_call(root: Path, monkeypatch) -> None:
    """The permission check's environment and directory are the run's (ctx.prepared_for): not built twice."""
    from entropic_mcp import _paths
    from entropic_mcp_bash._settings import BashSettings

    (root / "sub").mkdir()
    manager, _ = make_manager(root)
    envs: list[int] = []
    dirs: list[object] = []
    environment, canonical = BashSettings.environment, _paths._canonical
    monkeypatch.setattr(BashSettings, "environment", lambda self: envs.append(1) or environment(self))
    monkeypatch.setattr(_paths, "_canonical", lambda raw, *rest: dirs.append(raw) or canonical(raw, *rest))
    for n in range(3):
        envs.clear()
        dirs.clear()
        result = manager.call_sync(
            "bash.execute", {"command": f"pwd; echo {n}", "working_dir": "sub"}, CallContext(conversation_id="c")
        )
        assert not result.response.is_error, result.response.result
        assert str(root / "sub") in result.response.result
        assert (len(envs), dirs.count("sub")) == (1, 1)


def test_a_working_dir_link_swapped_after_the_judgement_still_runs_where_judged(root: Path) -> None:
    """The approver (asked after the judgement, before the run) flips the link: the command runs
    in the directory its redirections were judged in, not where the link points now."""
    from entropic_mcp import hookimpl

    (root / "ok").mkdir()
    (root / "denied").mkdir()
    (root / "link").symlink_to("ok")

    class Swapper:
        @hookimpl
        def entropic_mcp_approve_tool_call(self, request):
            (root / "link").unlink()
            (root / "link").symlink_to("denied")
            return "allow_once"

    manager, _ = make_manager(root, permissions={"default": "ask", "deny": ["filesystem.write:denied/*"]})
    manager.plugins.register(Swapper(), name="swapper")
    manager.invalidate()
    args = {"command": "echo hi > out.txt; pwd -P", "working_dir": "link"}
    result = manager.call_sync("bash.execute", args, CallContext(conversation_id="c"))
    assert result.permission == "ask->allow", result.response.result
    assert str(root / "ok") in result.response.result and str(root / "denied") not in result.response.result
    assert (root / "ok" / "out.txt").read_text() == "hi\n" and not (root / "denied" / "out.txt").exists()
