"""The git config keys that make git run a program, and the overrides that turn them off.

git runs what its config names: filter, diff and merge drivers, signing programs, credential
helpers, an fsmonitor, hooks, pagers, editors, ssh and proxy commands. A repository's own
``.git/config`` is written by whoever made the repository, so every git process a tool starts
gets these overrides at command-line level (``-c`` or ``GIT_CONFIG_COUNT``), where they win over
every file and include. The git server and bash's runs both use this one list; a key added here
reaches both.
"""

from __future__ import annotations

from collections.abc import Iterable

#: ``key=value`` overrides for every git process. Empty values disable a command (git skips an
#: empty filter, askpass or credential helper list); ``:`` is the editor git knows to skip.
NEUTRALISING_CONFIG: tuple[str, ...] = (
    "core.pager=cat",
    # hooks and the file-system monitor
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    # diff and merge programs
    "diff.external=",
    "interactive.diffFilter=",
    # editors (GIT_EDITOR/GIT_SEQUENCE_EDITOR are ':' too)
    "core.editor=:",
    "sequence.editor=:",
    # transports, credentials and prompts
    "core.sshCommand=ssh",
    "core.askPass=",
    "core.gitProxy=none",
    "credential.helper=",
    "core.alternateRefsCommand=",
    # signing and signature checks (each runs gpg.program / gpg.<format>.program)
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
    # submodules and nested repositories: their own config names their own drivers, which the
    # listing of this repository cannot see; git must not start git inside them (status/diff)
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    # submodule commands (submodule.<n>.update = !cmd) and background processes
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "push.recurseSubmodules=no",
    "gc.auto=0",
    "maintenance.auto=false",
)

#: Keys ``<section>.<name>.<variable>`` whose ``<name>`` the repository chooses, that name a
#: program (or make a missing one fatal): for each name found, every variable listed is set.
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
#: Which of a section's variables make its name worth overriding (a ``remote.origin.url`` alone
#: needs nothing; ``remote.origin.uploadpack`` does): the overridden ones, and a few that point
#: git at a program path or an event.
TRIGGERS: dict[str, frozenset[str]] = {
    section: frozenset(v for v, _ in variables)
    | {"hook": {"event"}, "difftool": {"path"}, "mergetool": {"path"}, "man": {"path"}, "browser": {"path"}}.get(
        section, set()
    )
    for section, variables in DYNAMIC_KEYS.items()
}


def overrides_for(keys: Iterable[str]) -> list[tuple[str, str]]:
    """The ``(key, value)`` overrides that neutralise every program-naming key in ``keys``.

    ``keys`` are as ``git config --list`` prints them: section and variable lower-cased, the
    middle name (``filter "Name"``) as written. ``pager.<command>`` (two parts) may name a
    program too; each is set to ``false``.
    """
    seen: dict[str, str] = {}
    for key in keys:
        section, dot, rest = key.partition(".")
        if not dot:
            continue
        if section == "pager" and rest and "." not in rest:
            seen[f"pager.{rest}"] = "false"
            continue
        name, dot, variable = rest.rpartition(".")
        triggers = TRIGGERS.get(section)
        if not dot or not name or triggers is None or variable not in triggers:
            continue
        for var, value in DYNAMIC_KEYS[section]:
            seen[f"{section}.{name}.{var}"] = value
    return list(seen.items())
