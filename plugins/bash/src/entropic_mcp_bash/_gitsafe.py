"""The git server's config neutralisation, for the git commands a bash run starts.

A rule such as ``bash.execute:git status *`` allows a command, not what a hostile repository's
``.git/config`` makes git run: ``core.fsmonitor``, ``core.pager``, ``diff.external``, hooks,
filter and diff drivers... Every bash run gets the same overrides the git server gives its own
git processes, through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_<n>``/``GIT_CONFIG_VALUE_<n>`` in
the environment (command-line level, so they win over every file and include, and reach every
git the run starts, however deeply nested). Keys whose middle name the repository chooses
(``filter.<name>.clean``) are read from ``git config --list --name-only`` of the repositories
the run starts in (that listing runs nothing).

The lists are the git server's (``entropic_mcp_git._safety``); the two plugins are separate
distributions, so bash keeps its own copy and a test fails when the git server's grows a key this
copy lacks. The analysis refuses to let a command undo them: ``GIT_*`` assignments, ``env -i``,
``env -u GIT_...`` and ``exec -c`` are not understood.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

#: ``key=value`` overrides for every git process (an empty value disables a command).
STATIC_CONFIG: tuple[str, ...] = (
    "core.pager=cat",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "diff.external=",
    "interactive.diffFilter=",
    "core.editor=:",
    "sequence.editor=:",
    "core.sshCommand=ssh",
    "core.askPass=",
    "core.gitProxy=none",
    "credential.helper=",
    "core.alternateRefsCommand=",
    "gpg.program=",
    "gpg.openpgp.program=",
    "gpg.x509.program=",
    "gpg.ssh.program=",
    "gpg.ssh.defaultKeyCommand=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "tag.forceSignAnnotated=false",
    "push.gpgSign=false",
    "merge.verifySignatures=false",
    "log.showSignature=false",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "push.recurseSubmodules=no",
    "gc.auto=0",
    "maintenance.auto=false",
)
#: ``<section>.<name>.<variable>`` keys naming a program: for each name a repository uses with
#: one of the section's variables, every variable listed is overridden.
DYNAMIC_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("command", ""), ("textconv", "")),
    "merge": (("driver", ""),),
    "remote": (("uploadpack", "git-upload-pack"), ("receivepack", "git-receive-pack"), ("vcs", "")),
    "submodule": (("update", "none"),),
    "trailer": (("command", ""), ("cmd", "")),
    "hook": (("command", ""),),
    "difftool": (("cmd", ""),),
    "mergetool": (("cmd", ""),),
    "gpg": (("program", ""),),
    "credential": (("helper", ""),),
    "man": (("cmd", ""),),
    "browser": (("cmd", ""),),
    "guitool": (("cmd", ""),),
}
#: Extra variables whose presence makes a name worth overriding (``hook.<n>.event``, ...).
_ALSO_TRIGGERS = {
    "hook": ("event",),
    "difftool": ("path",),
    "mergetool": ("path",),
    "man": ("path",),
    "browser": ("path",),
}


def _static() -> list[tuple[str, str]]:
    return [(entry.partition("=")[0], entry.partition("=")[2]) for entry in STATIC_CONFIG]


def dynamic_overrides(keys: Iterable[str]) -> list[tuple[str, str]]:
    """The overrides for the repository-named keys among ``keys`` (as ``git config`` lists them)."""
    found: dict[str, str] = {}
    for key in keys:
        section, _, rest = key.partition(".")
        if section == "pager" and rest and "." not in rest:
            found[key] = "false"
            continue
        name, _, variable = rest.rpartition(".")
        variables = DYNAMIC_KEYS.get(section)
        if not name or variables is None:
            continue
        if variable in {v for v, _ in variables} or variable in _ALSO_TRIGGERS.get(section, ()):
            found.update((f"{section}.{name}.{v}", value) for v, value in variables)
    return list(found.items())


def _listed_keys(directory: Path, env: Mapping[str, str]) -> list[str]:
    git = shutil.which("git", path=env.get("PATH"))
    if git is None:
        return []
    try:
        done = subprocess.run(
            [git, "config", "--list", "--name-only", "-z"],
            cwd=directory,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [k for k in done.stdout.decode("utf-8", "surrogateescape").split("\0") if k]


def with_git_overrides(env: Mapping[str, str], directories: Iterable[Path]) -> dict[str, str]:
    """``env`` plus the overrides, after any ``GIT_CONFIG_COUNT`` entries it already carries."""
    result = dict(env)
    try:
        start = int(result.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        start = 0
    overrides = _static()
    listing = _apply(result, start, overrides)
    seen: dict[str, None] = {}
    for directory in directories:
        if directory.is_dir():
            for key in _listed_keys(directory, listing):
                seen[key] = None
    return _apply(result, start, overrides + dynamic_overrides(seen))


def _apply(env: dict[str, str], start: int, overrides: list[tuple[str, str]]) -> dict[str, str]:
    result = dict(env)
    for index, (key, value) in enumerate(overrides, start=start):
        result[f"GIT_CONFIG_KEY_{index}"] = key
        result[f"GIT_CONFIG_VALUE_{index}"] = value
    result["GIT_CONFIG_COUNT"] = str(start + len(overrides))
    return result
