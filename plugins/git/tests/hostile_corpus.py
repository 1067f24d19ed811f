"""Hostile repositories: each configures git to run a program (which would create a marker file).

Every case carries a *trigger*: a plain ``git`` command that does run the program when nothing
neutralises it. The corpus test first proves the trigger fires (so the case is real), then runs
every tool of the server against a fresh copy and checks the marker never appears.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import attrs
from git_testkit import ISOLATED_ENV, Repo, init_repo


@attrs.frozen
class Case:
    """One hostile setting: ``setup(repo, command)`` plants it; ``trigger`` fires it in plain git."""

    name: str
    setup: Callable[[Repo, str], None]
    #: one git command, or several (tuples) run in order
    trigger: tuple[str, ...] | tuple[tuple[str, ...], ...]
    #: host environment given to the server (and to the trigger)
    env: dict[str, str] = attrs.field(factory=dict)
    #: the trigger needs a terminal (pagers only start on one)
    tty: bool = False


def base_repo(path: Path) -> Repo:
    """main: a.txt, b.md, sub/c.txt; branch other changes a.txt; a.txt modified in the work tree."""
    repo = init_repo(path)
    repo.commit("one", **{"a.txt": "one\n", "b.md": "# b\n", "sub__c.txt": "c\n"})
    repo.git("branch", "other")
    repo.git("switch", "-q", "other")
    repo.commit("other side", **{"a.txt": "other\n"})
    repo.git("switch", "-q", "main")
    return repo


def _config(*pairs: str) -> Callable[[Repo, str], None]:
    """Set ``key value`` pairs; ``{cmd}`` in a value is the hostile shell command, ``{prog}`` a
    program (for settings git executes without a shell)."""

    def setup(repo: Repo, cmd: str) -> None:
        for pair in pairs:
            key, value = pair.split(" ", 1)
            repo.git("config", "--add", key, value.format(cmd=cmd, prog=program(cmd)))

    return setup


def _attrs(line: str, where: str = ".gitattributes") -> Callable[[Repo, str], None]:
    def setup(repo: Repo, cmd: str) -> None:
        path = repo.path / where
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(line + "\n")

    return setup


def _both(*steps: Callable[[Repo, str], None]) -> Callable[[Repo, str], None]:
    def setup(repo: Repo, cmd: str) -> None:
        for step in steps:
            step(repo, cmd)

    return setup


def _file(name: str, text: str) -> Callable[[Repo, str], None]:
    def setup(repo: Repo, cmd: str) -> None:
        path = repo.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(cmd=cmd, git_dir=repo.path / ".git", top=repo.path))

    return setup


def _hook(directory: str, *names: str) -> Callable[[Repo, str], None]:
    def setup(repo: Repo, cmd: str) -> None:
        hooks = repo.path / directory
        hooks.mkdir(parents=True, exist_ok=True)
        for name in names:
            hook = hooks / name
            hook.write_text(f"#!/bin/sh\n{cmd}\n")
            hook.chmod(0o755)

    return setup


def program(cmd: str) -> str:
    """An executable script next to the marker that runs ``cmd``."""
    marker = Path(cmd.split(" ", 1)[1].split(";", 1)[0])
    script = marker.parent / "hostile-program"
    if not script.exists():
        script.write_text(f"#!/bin/sh\n{cmd}\n")
        script.chmod(0o755)
    return str(script)


def _signed_commit(repo: Repo, cmd: str) -> None:
    """A commit carrying a (fake) signature on main: verifying it runs gpg.program."""
    tree = repo.git("rev-parse", "HEAD^{tree}").strip()
    parent = repo.git("rev-parse", "HEAD").strip()
    body = (
        f"tree {tree}\nparent {parent}\nauthor a <a@b> 1 +0000\ncommitter a <a@b> 1 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n -----END PGP SIGNATURE-----\n\nsigned\n"
    )
    done = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=repo.path,
        env=ISOLATED_ENV,
        input=body,
        capture_output=True,
        text=True,
        check=True,
    )
    repo.git("update-ref", "refs/heads/main", done.stdout.strip())


FILTER = _attrs("* filter=x")
DIFFATTR = _attrs("* diff=d")
MERGEATTR = _attrs("* merge=m")
ADD = ("add", "a.txt")
DIFF = ("diff",)
COMMIT = ("commit", "-q", "-a", "-m", "x")
SMUDGE = ("checkout", "-q", "other", "--", "a.txt")

CASES: list[Case] = [
    # -- filters (clean on add/status/diff/stash, smudge on checkout/restore/stash) ------------
    Case("filter.clean", _both(_config("filter.x.clean {cmd}"), FILTER), ADD),
    Case("filter.smudge", _both(_config("filter.x.smudge {cmd}"), FILTER), SMUDGE),
    Case("filter.process", _both(_config("filter.x.process {cmd}"), FILTER), ADD),
    Case("filter.process smudge", _both(_config("filter.x.process {cmd}"), FILTER), SMUDGE),
    Case("filter.required", _both(_config("filter.x.clean {cmd}", "filter.x.required true"), FILTER), ADD),
    Case("filter name with =", _both(_config("filter.a=b.clean {cmd}"), _attrs("* filter=a=b")), ADD),
    Case("filter name with dots", _both(_config("filter.Up.Case.clean {cmd}"), _attrs("* filter=Up.Case")), ADD),
    Case(
        "filter in .git/info/attributes",
        _both(_config("filter.x.clean {cmd}"), _attrs("* filter=x", ".git/info/attributes")),
        ADD,
    ),
    Case(
        "filter in a nested .gitattributes",
        _both(_config("filter.x.smudge {cmd}"), _attrs("* filter=x", "sub/.gitattributes"), _attrs("a.txt filter=x")),
        SMUDGE,
    ),
    Case(
        "filter through core.attributesFile",
        _both(_config("filter.x.clean {cmd}", "core.attributesFile ../attrs"), _file("../attrs", "* filter=x\n")),
        ADD,
    ),
    Case(
        "filter in an included file",
        _both(_config("include.path ../../inc.cfg"), _file("../inc.cfg", '[filter "x"]\n\tclean = {cmd}\n'), FILTER),
        ADD,
    ),
    Case(
        "filter in an includeIf gitdir file",
        _both(
            _config("includeIf.gitdir:{cmd_dir}.path ../../inc.cfg".replace("{cmd_dir}", "/")),
            _file("../inc.cfg", '[filter "x"]\n\tclean = {cmd}\n'),
            FILTER,
        ),
        ADD,
    ),
    Case(
        "filter in an includeIf onbranch file",
        _both(
            _config("includeIf.onbranch:main.path ../../inc.cfg"),
            _file("../inc.cfg", '[filter "x"]\n\tsmudge = {cmd}\n'),
            FILTER,
        ),
        SMUDGE,
    ),
    Case(
        "filter in an includeIf hasconfig file",
        _both(
            _config(
                "remote.origin.url https://example.invalid/x",
                "includeIf.hasconfig:remote.*.url:https://example.invalid/**.path ../../inc.cfg",
            ),
            _file("../inc.cfg", '[filter "x"]\n\tclean = {cmd}\n'),
            FILTER,
        ),
        ADD,
    ),
    Case(
        "filter in a nested include",
        _both(
            _config("include.path ../../inc1.cfg"),
            _file("../inc1.cfg", "[include]\n\tpath = inc2.cfg\n"),
            _file("../inc2.cfg", '[filter "x"]\n\tclean = {cmd}\n'),
            FILTER,
        ),
        ADD,
    ),
    Case(
        "filter in config.worktree",
        _both(
            _config("extensions.worktreeConfig true", "core.repositoryFormatVersion 1"),
            _file(".git/config.worktree", '[filter "x"]\n\tclean = {cmd}\n'),
            FILTER,
        ),
        ADD,
    ),
    Case(
        "filter written old-style [filter.x]",
        _both(_file("../inc.cfg", "[filter.x]\n\tclean = {cmd}\n"), _config("include.path ../../inc.cfg"), FILTER),
        ADD,
    ),
    # -- diff drivers ---------------------------------------------------------------------------
    Case("diff.external", _config("diff.external {cmd}"), DIFF),
    Case("diff.<d>.command", _both(_config("diff.d.command {cmd}"), DIFFATTR), DIFF),
    Case("diff.<d>.textconv", _both(_config("diff.d.textconv {cmd}"), DIFFATTR), DIFF),
    Case("textconv in git log -p", _both(_config("diff.d.textconv {cmd}"), DIFFATTR), ("log", "-p", "-1", "other")),
    Case("textconv in blame", _both(_config("diff.d.textconv {cmd}"), DIFFATTR), ("blame", "a.txt")),
    Case(
        "textconv in show of a blob",
        _both(_config("diff.d.textconv {cmd}"), DIFFATTR),
        ("show", "--textconv", "other:a.txt"),
    ),
    Case(
        "external diff through an include",
        _both(_config("include.path ../../inc.cfg"), _file("../inc.cfg", "[diff]\n\texternal = {cmd}\n")),
        DIFF,
    ),
    # -- merge drivers ---------------------------------------------------------------------------
    Case("merge.<m>.driver", _both(_config("merge.m.driver {cmd}"), MERGEATTR), (COMMIT, ("merge", "-q", "other"))),
    # -- signing and verification ------------------------------------------------------------------
    Case("commit.gpgSign + gpg.program", _config("commit.gpgSign true", "gpg.program {prog}"), COMMIT),
    Case("gpg.openpgp.program", _config("commit.gpgSign true", "gpg.openpgp.program {prog}"), COMMIT),
    Case(
        "gpg.ssh.program",
        _config(
            "commit.gpgSign true", "gpg.format ssh", "user.signingKey key::ssh-ed25519 AAAA", "gpg.ssh.program {prog}"
        ),
        COMMIT,
    ),
    Case(
        "gpg.ssh.defaultKeyCommand",
        _config("commit.gpgSign true", "gpg.format ssh", "gpg.ssh.defaultKeyCommand {prog}"),
        COMMIT,
    ),
    Case("gpg.x509.program", _config("commit.gpgSign true", "gpg.format x509", "gpg.x509.program {prog}"), COMMIT),
    Case("tag.gpgSign", _config("tag.gpgSign true", "gpg.program {prog}"), ("tag", "-a", "-m", "t", "t1")),
    Case(
        "tag.forceSignAnnotated", _config("tag.forceSignAnnotated true", "gpg.program {prog}"), ("tag", "-m", "t", "t1")
    ),
    Case(
        "log.showSignature on a signed commit",
        _both(_signed_commit, _config("log.showSignature true", "gpg.program {prog}")),
        ("log", "-1"),
    ),
    # -- hooks and the file-system monitor ---------------------------------------------------------
    Case("core.fsmonitor", _config("core.fsmonitor {cmd}"), ("status",)),
    Case(
        "core.fsmonitor in an include",
        _both(_config("include.path ../../inc.cfg"), _file("../inc.cfg", "[core]\n\tfsmonitor = {cmd}\n")),
        ("status",),
    ),
    Case(
        "hooks in .git/hooks",
        _hook(
            ".git/hooks",
            "pre-commit",
            "commit-msg",
            "post-commit",
            "post-checkout",
            "reference-transaction",
            "post-index-change",
            "prepare-commit-msg",
        ),
        COMMIT,
    ),
    Case(
        "core.hooksPath in the work tree",
        _both(
            _config("core.hooksPath hooks"),
            _hook("hooks", "pre-commit", "post-checkout", "reference-transaction", "post-index-change"),
        ),
        COMMIT,
    ),
    Case(
        "reference-transaction hook on branch creation",
        _hook(".git/hooks", "reference-transaction"),
        ("branch", "newb"),
    ),
    Case("post-checkout hook", _hook(".git/hooks", "post-checkout"), ("checkout", "-q", "-b", "newb")),
    Case(
        "post-commit hook through an include",
        _both(
            _config("include.path ../../inc.cfg"),
            _file("../inc.cfg", "[core]\n\thooksPath = {top}/hooks\n"),
            _hook("hooks", "post-commit"),
        ),
        COMMIT,
    ),
    # -- pagers and editors ----------------------------------------------------------------------------
    Case("core.pager", _config("core.pager {cmd}"), ("log",), tty=True),
    Case("pager.<command>", _config("pager.log {cmd}"), ("log",), tty=True),
    Case("pager.<command> for show", _config("pager.show {cmd}"), ("show",), tty=True),
    Case("core.editor", _config("core.editor {cmd}"), ("commit", "--allow-empty")),
    # -- aliases never shadow the commands the server runs ------------------------------------------
    Case(
        "alias.status etc.",
        _config(
            "alias.st !{cmd}", "alias.status !{cmd}", "alias.log !{cmd}", "alias.diff !{cmd}", "alias.commit !{cmd}"
        ),
        ("st",),
    ),
    # -- trailers ---------------------------------------------------------------------------------
    Case(
        "trailer.<t>.command",
        _config("trailer.t.command {cmd}"),
        ("interpret-trailers", "--trailer", "t=x", "/dev/null"),
    ),
]


def host_env_cases() -> list[Case]:
    """Settings in the *host's* environment that would run a program (dropped by the server)."""
    return [
        Case(
            "GIT_CONFIG_PARAMETERS",
            lambda repo, cmd: None,
            ("status",),
            env={"GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='{cmd}'"},
        ),
        Case(
            "GIT_CONFIG_COUNT",
            lambda repo, cmd: None,
            ("status",),
            env={"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "{cmd}"},
        ),
        Case("GIT_EXTERNAL_DIFF", lambda repo, cmd: None, DIFF, env={"GIT_EXTERNAL_DIFF": "{cmd}"}),
        Case("GIT_EDITOR", lambda repo, cmd: None, ("commit", "--allow-empty"), env={"GIT_EDITOR": "{cmd}"}),
        Case("GIT_PAGER", lambda repo, cmd: None, ("log",), env={"GIT_PAGER": "{cmd}"}, tty=True),
        Case("PAGER", lambda repo, cmd: None, ("log",), env={"PAGER": "{cmd}"}, tty=True),
        Case(
            "GIT_SEQUENCE_EDITOR",
            lambda repo, cmd: None,
            (COMMIT, ("rebase", "-i", "HEAD~1")),
            env={"GIT_SEQUENCE_EDITOR": "{cmd}", "GIT_EDITOR": ":"},
        ),
    ]


def hostile_command(marker: Path) -> str:
    # a shell command: git appends arguments ("$@"), which the ':' swallows
    return f"touch {marker};:"


def run_trigger(repo: Repo, case: Case, cmd: str) -> None:
    env = {**ISOLATED_ENV, **{k: v.format(cmd=cmd) for k, v in case.env.items()}}
    commands = case.trigger if isinstance(case.trigger[0], tuple) else (case.trigger,)
    for command in commands:
        if case.tty:
            primary, secondary = os.openpty()
            try:
                subprocess.run(
                    ["git", *command],
                    cwd=repo.path,
                    env={**env, "TERM": "dumb"},
                    stdout=secondary,
                    stderr=subprocess.DEVNULL,
                    stdin=subprocess.DEVNULL,
                    timeout=30,
                )
            finally:
                os.close(primary)
                os.close(secondary)
        else:
            subprocess.run(
                ["git", *command], cwd=repo.path, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=30
            )


def prepare(path: Path, case: Case, marker: Path) -> Repo:
    repo = base_repo(path)
    case.setup(repo, hostile_command(marker))
    (repo.path / "a.txt").write_text("changed\n")
    os.utime(repo.path / "a.txt", (1, 1))  # racily clean: git must re-read (and filter) it
    return repo
