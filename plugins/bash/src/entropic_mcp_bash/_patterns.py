"""Findings of the analysis → the permission parts rules are matched against.

Each command becomes ``bash.execute:<command line>`` (plus the same with a trailing space, so
``bash.execute:ls *`` matches a bare ``ls`` but never ``lsof``); each redirection a file write
(``path_part("write", ...)``: every write rule applies, the policy files are protected), neutral
unless it plants code or lands outside the root. Whatever the analysis could not prove harmless
is a part with ``understood=False``. "Always allow" stores ``bash.execute:<base> *``, with the
sub-command for multi-level tools.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from entropic_mcp.toolkit.paths import PathPolicy, PermissionPart, is_within, path_part

from ._analyse import CONSULTED, SHELLS, UNPARSED, Invocation, Unclear, Write, analyse

TOOL = "bash.execute"

#: Tools whose first non-option word is a sub-command that "always allow" keeps.
MULTI_LEVEL = frozenset(
    {
        "git",
        "npm",
        "pnpm",
        "yarn",
        "bun",
        "cargo",
        "rustup",
        "go",
        "docker",
        "podman",
        "kubectl",
        "helm",
        "pip",
        "pip3",
        "uv",
        "poetry",
        "pipx",
        "conda",
        "mamba",
        "gh",
        "glab",
        "brew",
        "apt",
        "apt-get",
        "dnf",
        "yum",
        "systemctl",
        "terraform",
        "make",
        "dotnet",
        "mvn",
        "gradle",
        "bundle",
        "gem",
        "composer",
        "aws",
        "gcloud",
        "az",
        "nox",
        "tox",
        "hatch",
        "pdm",
        "deno",
        "nix",
    }
)
#: Options of multi-level tools that take the next word as their value.
VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"}),
    "docker": frozenset({"-H", "--host", "--context", "-c", "--config", "-l", "--log-level"}),
    "kubectl": frozenset({"-n", "--namespace", "--context", "--kubeconfig", "--cluster", "--user"}),
    "helm": frozenset({"-n", "--namespace", "--kube-context", "--kubeconfig"}),
    "npm": frozenset({"--prefix", "-w", "--workspace"}),
    "make": frozenset({"-C", "-f", "--file", "--directory", "-j", "--jobs", "-I"}),
    "cargo": frozenset({"--manifest-path", "-Z", "--config", "--color"}),
}
#: Interpreters: "always allow" keeps the script or ``-m module``; inline code is stored exactly.
INTERPRETERS = frozenset({"python", "python3", "node", "perl", "ruby", "php", "deno", "bun", "lua", "Rscript"})
INLINE_CODE = frozenset({"-c", "-e", "--eval", "-p", "--print", "-E", "-r"})


#: Answers kept for command lines whose analysis looked at nothing on disk (``permission_parts``).
MEMO_ENTRIES = 1024
#: Longer command lines are analysed each time (their analysis is the smaller cost next to them).
MEMO_TEXT = 4096
_MEMO: dict[tuple[object, ...], tuple[Mapping[str, str] | None, tuple[PermissionPart, ...]]] = {}


def escape(text: str) -> str:
    """``text`` as a glob that matches only itself."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def permission_parts(
    command: str,
    *,
    cwd: Path,
    root: Path,
    env: Mapping[str, str] | None = None,
    cwds: Sequence[Path] = (),
    bash_like: bool = True,
    policy: PathPolicy | None = None,
    syntax_error: Callable[[], str | None] | None = None,
) -> list[PermissionPart]:
    """The parts of one ``bash.execute`` call, commands first in source order.

    Args:
        command: the command line.
        cwd: where it runs; ``cwds`` other directories it may run in.
        root: the project root (writes inside it are matched root-relative too).
        env: the environment the shell starts with (``HOME`` for ``~``).
        bash_like: False when the configured shell is not bash's grammar: nothing is understood.
        policy: the server's outside-root policy; a write outside the root that it does not
            allow outright is not understood (it asks).
        syntax_error: asked when the command line does not parse: a message when bash confirms
            a syntax error. Such a line is never run (the tool answers the error), so it is one
            neutral part: only a rule naming ``bash.execute`` itself decides it.
    """
    key = None
    if len(command) <= MEMO_TEXT and type(env) is dict:
        # The server's environment is one dict until os.environ changes (never changed in place).
        key = (command, cwd, tuple(cwds), bash_like)
        hit = _MEMO.get(key)
        if hit is not None and hit[0] is env:
            return list(hit[1])
    consulted = CONSULTED[0]
    parts: dict[PermissionPart, None] = {}
    commands = False
    writes = False
    findings = analyse(command, cwd, env=env, cwds=cwds)
    if (
        syntax_error is not None
        and bash_like
        and any(isinstance(f, Unclear) and f.reason == UNPARSED for f in findings)
        and syntax_error() is not None
    ):
        return [PermissionPart(names=(TOOL,), store=f"{TOOL}:{escape(command.strip())}", neutral=True)]
    if not bash_like:
        findings.insert(0, Unclear(text=command, reason="the configured shell is not bash"))
    for finding in findings:
        if isinstance(finding, Invocation):
            commands = True
            for part in _invocation_parts(finding):
                parts[part] = None
        elif isinstance(finding, Unclear):
            commands = True
            text = finding.text
            unclear = PermissionPart(
                names=(TOOL, f"{TOOL}:{text}"), store=f"{TOOL}:{escape(text)}", understood=False, contained=True
            )
            parts[unclear] = None
        elif isinstance(finding, Write):
            writes = True
            parts[_write_part(finding, root, policy or PathPolicy())] = None
    if not commands:  # only assignments, tests or comments: still one part for the whole text
        text = command.strip()
        parts = {
            PermissionPart(names=(TOOL, f"{TOOL}:{text}", f"{TOOL}:{text} "), store=f"{TOOL}:{escape(text)}"): None,
            **parts,
        }
    if key is not None and not writes and CONSULTED[0] == consulted:
        # Nothing on disk was looked at (a write's target is, and its hard links): the same
        # text in the same directories and environment gets the same parts.
        if len(_MEMO) >= MEMO_ENTRIES:
            _MEMO.clear()
        _MEMO[key] = (env, tuple(parts))
    return list(parts)


def _invocation_parts(invocation: Invocation) -> list[PermissionPart]:
    line = invocation.line
    store = f"{TOOL}:{_store(invocation)}"
    if invocation.neutral:
        base_line = " ".join([invocation.base, *(w.shown for w in invocation.args)])
        names = dict.fromkeys((f"{TOOL}:{line}", f"{TOOL}:{line} ", f"{TOOL}:{base_line}", f"{TOOL}:{base_line} "))
        return [PermissionPart(names=tuple(names), store=store, neutral=True)]
    main = PermissionPart(
        names=(TOOL, f"{TOOL}:{line}", f"{TOOL}:{line} "),
        store=store,
        understood=invocation.understood,
        contained=True,
    )
    if invocation.trusted or invocation.base == invocation.program:
        return [main]
    # A program outside the system directories is not what its base name means: it needs a
    # rule naming its path to be allowed, but rules on the base name still deny or ask.
    base_line = " ".join([invocation.base, *(w.shown for w in invocation.args)])
    return [main, PermissionPart(names=(f"{TOOL}:{base_line}", f"{TOOL}:{base_line} "), store=store, neutral=True)]


def _store(invocation: Invocation) -> str:
    """The rule "always allow" writes: ``<base> *``, ``git log *``, ``python -m pytest *``."""
    words = [invocation.program, *(w.shown for w in invocation.args)]
    if not invocation.understood:
        return escape(" ".join(words))
    name = invocation.base if invocation.trusted else invocation.program
    end = 1
    if name in INTERPRETERS or name in SHELLS:
        for i, word in enumerate(words[1:], start=1):
            if word in INLINE_CODE:
                return escape(" ".join(words))  # inline code: only this exact command
            if word == "-m" and i + 1 < len(words):
                end = i + 2
                break
            if not word.startswith("-"):
                end = i + 1
                break
        else:
            return escape(" ".join(words))
    elif name in MULTI_LEVEL:
        valued = VALUE_OPTIONS.get(name, frozenset())
        i = 1
        while i < len(words):
            word = words[i]
            if word in valued:
                i += 2
            elif word.startswith(("-", "+")):
                i += 1
            else:
                end = i + 1
                break
    return escape(" ".join(words[:end])) + " *"


def _hard_linked(path: Path) -> bool:
    try:
        info = path.lstat()
    except OSError:
        return False
    import stat

    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1


def _write_part(write: Write, root: Path, policy: PathPolicy) -> PermissionPart:
    """A redirection as a file write: every write rule (write_file, edit_file, ...) applies.

    Writes inside the root only matter when a rule names them, except inside a ``.git``
    directory (its config and hooks name programs git runs). Writes outside the root ask unless
    the outside-root policy allows them outright (``~/.bashrc`` runs in the user's next shell).
    """
    if write.path is None:
        # A target that cannot be known (``> "$f"``, ``> /dev/fd/5``) can be any file: it asks.
        return path_part("write", write.text, understood=False)
    path = write.path
    if is_within(path, root):
        display = "." if path == root else path.relative_to(root).as_posix()
        # Inside .git: config and hooks name programs git runs. A hard link: nothing in the path
        # says that the file is also a file somewhere else (outside the root, say).
        code = ".git" in path.relative_to(root).parts or _hard_linked(path)
        return path_part("write", display, also=(str(path),), understood=not code, neutral=not code)
    allowed = not any(is_within(path, d) for d in policy.outside_root_deny) and (
        policy.allow_outside_root is True or any(is_within(path, d) for d in policy.outside_root_allow)
    )
    return path_part("write", str(path), understood=allowed, neutral=allowed)
