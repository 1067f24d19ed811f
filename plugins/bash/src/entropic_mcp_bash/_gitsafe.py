"""The git server's config neutralisation, for the git commands a bash run starts.

A rule such as ``bash.execute:git status *`` allows a command, not what a hostile repository's
``.git/config`` makes git run: ``core.fsmonitor``, ``core.pager``, ``diff.external``, hooks,
filter and diff drivers... Every bash run gets the same overrides the git server gives its own
git processes, through ``GIT_CONFIG_PARAMETERS`` in the environment (where ``git -c`` puts its
pairs for the gits it starts: command-line level, so they win over every file and include, come
after any ``GIT_CONFIG_COUNT`` entries, and reach every git the run starts, however deeply
nested). One variable, not the 70-odd ``GIT_CONFIG_KEY_<n>``/``VALUE_<n>``: every bash start
copies and imports the environment, and those cost a trivial call 6 % of its time. Keys whose middle name the repository chooses
(``filter.<name>.clean``) are read from ``git config --list --name-only`` of the repositories
the run starts in (that listing runs nothing).

The lists are the ones the git server uses too, kept once in ``entropic_mcp.toolkit``
(``GIT_NEUTRALISING_CONFIG``, ``GIT_DYNAMIC_KEYS``, ``git_overrides_for``). The analysis refuses to let a command undo them: ``GIT_*`` assignments, ``env -i``,
``env -u GIT_...`` and ``exec -c`` are not understood.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs
from entropic_mcp.toolkit import GIT_DYNAMIC_KEYS, GIT_NEUTRALISING_CONFIG, git_overrides_for

#: ``key=value`` overrides for every git process (an empty value disables a command).
STATIC_CONFIG: tuple[str, ...] = GIT_NEUTRALISING_CONFIG
#: ``<section>.<name>.<variable>`` keys naming a program (the toolkit's, as the git server's).
DYNAMIC_KEYS = GIT_DYNAMIC_KEYS


def _static() -> list[tuple[str, str]]:
    return [(entry.partition("=")[0], entry.partition("=")[2]) for entry in STATIC_CONFIG]


def dynamic_overrides(keys: Iterable[str]) -> list[tuple[str, str]]:
    """The overrides for the repository-named keys among ``keys`` (as ``git config`` lists them)."""
    return git_overrides_for(keys)


#: The variable git reads ``-c`` pairs from (and adds its own ``-c`` to for the gits it starts).
PARAMETERS = "GIT_CONFIG_PARAMETERS"

#: A file changed this recently may change again within the same timestamp tick: not cached.
RACY_SECONDS = 1.0


def _signature(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode) and path.endswith("/.git"):
        # Only whether it is there: git writes inside it (the index) on most commands.
        return (st.st_dev, st.st_ino, 0, 0, 0, st.st_mode)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


@attrs.frozen
class _Listing:
    keys: tuple[str, ...]
    watched: tuple[tuple[str, tuple[int, ...] | None], ...]
    #: per watched path, the ``.git`` it lies in when both were missing at the listing (else None):
    #: while that ``.git`` is still missing, so is the path, and it is not looked at (a project
    #: outside any repository: 2 stats per parent directory less on every call)
    inside: tuple[str | None, ...] = ()

    def current(self) -> bool:
        missing: set[str] = set()
        for (path, known), git in zip(self.watched, self.inside or (None,) * len(self.watched), strict=True):
            if git is not None and git in missing:
                continue
            found = _signature(path)
            if found != known:
                return False
            if found is None and path.endswith("/.git"):
                missing.add(path)
        return True


def _list(directory: Path, env: Mapping[str, str]) -> _Listing:
    """The keys ``git config --list`` shows in ``directory``, and the files the answer depends on:
    every file it came from (includes too), the ``.git`` of the directory and of each parent (a
    repository made later), its HEAD (``includeIf "onbranch:"``) and the user's config files."""
    home = env.get("HOME")
    xdg = env.get("XDG_CONFIG_HOME") or (f"{home}/.config" if home else None)
    candidates = [Path("/etc/gitconfig")]
    candidates += [Path(home) / ".gitconfig"] if home else []
    candidates += [Path(xdg) / "git" / "config"] if xdg else []
    for parent in (directory, *directory.parents):
        candidates += [parent / ".git", parent / ".git" / "config", parent / ".git" / "HEAD"]
    keys: list[str] = []
    git = shutil.which("git", path=env.get("PATH"))
    if git is not None:
        try:
            done = subprocess.run(
                [git, "config", "--list", "--show-origin", "--name-only", "-z"],
                cwd=directory,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
                check=False,
            )
            fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
        except (OSError, subprocess.SubprocessError):
            fields = []
        for origin, key in zip(fields[::2], fields[1::2], strict=False):
            keys.append(key)
            if origin.startswith("file:"):
                candidates.append(directory / origin[5:])
    watched = tuple((path, _signature(path)) for path in dict.fromkeys(map(str, candidates)))
    absent = {path for path, known in watched if known is None and path.endswith("/.git")}
    inside = tuple(
        git if known is None and (git := path.rpartition("/")[0]) in absent else None for path, known in watched
    )
    return _Listing(keys=tuple(keys), watched=watched, inside=inside)


class GitOverrides:
    """The overrides for a run's environment; each directory's listing is kept until a file it
    depends on changes (a bash call must not pay two git processes)."""

    def __init__(self) -> None:
        self._listings: dict[Path, _Listing] = {}
        self._lock = threading.Lock()
        #: the last answer, by the base environment object (kept alive here, so ``is`` is safe)
        #: and the listed keys: the same call after call, built once instead of per call
        self._last: tuple[Mapping[str, str], tuple[str, ...], dict[str, str]] | None = None

    def environment(self, env: Mapping[str, str], directories: Iterable[Path]) -> dict[str, str]:
        """``env`` plus the overrides, after any ``GIT_CONFIG_PARAMETERS`` pairs it already carries."""
        keys: dict[str, None] = {}
        for directory in directories:
            # A listing still current answers without looking at the directory itself (one stat
            # a call less): were the directory gone since, its keys only add overrides to a run
            # that fails to start there. A directory not listed is listed only if it is one.
            with self._lock:
                listing = self._listings.get(directory)
            if listing is not None and listing.current():
                keys.update(dict.fromkeys(listing.keys))
            elif os.path.isdir(directory):
                keys.update(dict.fromkeys(self._relist(directory, env)))
        listed = tuple(keys)
        last = self._last
        if last is not None and last[0] is env and last[1] == listed:
            return dict(last[2])  # a copy: the caller may add its own variables
        result = dict(env)
        ours = _static_parameters()
        dynamic = _dynamic_for(listed)
        if dynamic:
            ours = f"{ours} {_parameters(dynamic)}"
        # Later pairs win: ours after the ones the environment carries.
        result[PARAMETERS] = f"{env[PARAMETERS]} {ours}" if env.get(PARAMETERS) else ours
        self._last = (env, listed, result)
        return dict(result)

    def _relist(self, directory: Path, env: Mapping[str, str]) -> tuple[str, ...]:
        """List ``directory`` afresh (its listing is missing or out of date) and keep the listing."""
        # Listed with the static overrides in force (the listing itself must run nothing).
        listing = _list(directory, {**env, PARAMETERS: _static_parameters()})
        now = time.time()
        racy = any(sig is not None and now - sig[3] / 1e9 < RACY_SECONDS for _, sig in listing.watched)
        with self._lock:
            if racy:
                self._listings.pop(directory, None)
            else:
                if len(self._listings) > 256:
                    self._listings.clear()
                self._listings[directory] = listing
        return listing.keys


def with_git_overrides(env: Mapping[str, str], directories: Iterable[Path]) -> dict[str, str]:
    """``env`` plus the overrides, listing each directory afresh (no cache)."""
    return GitOverrides().environment(env, directories)


@functools.lru_cache(maxsize=64)
def _dynamic_for(keys: tuple[str, ...]) -> list[tuple[str, str]]:
    """``dynamic_overrides`` of a listing's keys, kept: the same listing answers call after call."""
    return dynamic_overrides(keys)


@functools.lru_cache(maxsize=1)
def _static_parameters() -> str:
    """The static overrides as ``GIT_CONFIG_PARAMETERS`` pairs."""
    return _parameters(_static())


def _parameters(overrides: list[tuple[str, str]]) -> str:
    """``'key'='value'`` pairs, single-quoted as git reads them: a key may hold ``=`` or spaces
    (``filter."a=b".clean``), so both halves are quoted (git 2.31 on, as ``GIT_CONFIG_COUNT``)."""
    return " ".join(f"{_quoted(key)}={_quoted(value)}" for key, value in overrides)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
