"""Keeping git from running programs named in a repository's config.

git runs commands that its config names: filter drivers (``filter.<d>.clean/smudge/process``),
diff drivers (``diff.<d>.command/textconv``), merge drivers, signing programs, credential
helpers, an fsmonitor, hooks, pagers, editors, ssh and proxy commands... A repository's own
``.git/config`` (and any file it includes) is written by whoever made the repository, so opening
a hostile one must run none of them.

Two layers, both applied to every git process:

* ``STATIC_CONFIG``: fixed keys, overridden with ``-c key=value`` (command-line config comes after
  every file, so it wins whatever the files or their includes say).
* ``dynamic overrides``: keys whose name carries a driver or remote name chosen by the
  repository (``filter.<d>.clean``). The names are read from ``git config --list`` (which runs
  nothing) and each found name is overridden through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_<n>``/
  ``GIT_CONFIG_VALUE_<n>`` — key and value travel apart, so a name containing ``=`` or ``.`` is
  still overridden exactly. The listing is cached per git directory and re-read as soon as any
  file it came from (or an include target, or HEAD for ``includeIf "onbranch:"``) changes.

Transports are limited by ``GIT_ALLOW_PROTOCOL`` (which overrides every ``protocol.*.allow``):
nothing at all unless network operations are enabled, then https, http, ssh and local paths —
never ``ext::`` (runs a command) or ``git://`` (whose ``core.gitProxy`` takes the *first*
configured value, so a command-line override could not win).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
from entropic_mcp.toolkit import GIT_DYNAMIC_KEYS, GIT_NEUTRALISING_CONFIG, git_overrides_for

#: ``-c`` overrides given to every git process: the neutralising list every git a tool starts
#: gets (``entropic_mcp.toolkit``, shared with bash), then the output shape the tools parse.
STATIC_CONFIG: tuple[str, ...] = (
    *GIT_NEUTRALISING_CONFIG,
    "color.ui=false",
    "core.quotepath=false",
    "log.showRoot=true",
)
#: Keys ``<section>.<name>.<variable>`` whose ``<name>`` the repository chooses (the toolkit's).
DYNAMIC_KEYS = GIT_DYNAMIC_KEYS
overrides_for = git_overrides_for

#: Transports when network operations are off: none (a name no transport has).
NO_PROTOCOLS = "none"
#: Transports when they are on. Not ``ext`` (runs a command), not ``git`` (core.gitProxy).
NETWORK_PROTOCOLS = "https:http:ssh:file"

#: A file changed this recently may change again within the same timestamp tick: not cached.
RACY_SECONDS = 1.0


def config_env(overrides: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The ``GIT_CONFIG_COUNT`` environment entries carrying ``overrides``."""
    env = {"GIT_CONFIG_COUNT": str(len(overrides))}
    for index, (key, value) in enumerate(overrides):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def signature(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


@attrs.frozen
class Listing:
    """One read of a repository's config: the overrides it calls for, and what it depended on."""

    env: Mapping[str, str]
    keys: tuple[str, ...]
    watched: tuple[tuple[Path, tuple[int, ...] | None], ...]
    overrides: tuple[tuple[str, str], ...] = ()
    #: ``key=value`` settings of the user's own (global/system) config that network commands
    #: restore after the resets: credential helpers, an ssh command, an askpass program
    trusted: tuple[str, ...] = ()

    def current(self) -> bool:
        return all(signature(path) == known for path, known in self.watched)


#: Settings a user's own config may give network commands (never a repository's).
_TRUSTED_SCOPES = frozenset({"system", "global"})
_TRUSTED_KEYS = frozenset({"core.sshcommand", "core.askpass"})


def _trusted_key(key: str) -> bool:
    low = key.lower()
    if "=" in key:
        return False  # -c could not carry it
    return low in _TRUSTED_KEYS or (low.startswith("credential.") and low.endswith(".helper"))


def parse_listing(data: bytes, cwd: Path) -> tuple[list[str], list[tuple[str, str, str]], set[Path], list[str]]:
    """``git config --list --show-origin --show-scope -z`` output: keys, (key, value, origin
    file) for includes, every origin file (relative origins taken from ``cwd``), and the
    trusted ``key=value`` settings of the user's own config."""
    fields = data.split(b"\x00")
    keys: list[str] = []
    includes: list[tuple[str, str, str]] = []
    origins: set[Path] = set()
    trusted: list[str] = []
    for index in range(0, len(fields) - 2, 3):
        scope = fields[index].decode("utf-8", "surrogateescape")
        origin = fields[index + 1].decode("utf-8", "surrogateescape")
        key, _, value = fields[index + 2].decode("utf-8", "surrogateescape").partition("\n")
        if scope == "command":
            continue  # the server's own -c settings
        keys.append(key)
        if scope in _TRUSTED_SCOPES and _trusted_key(key):
            trusted.append(f"{key}={value}")
        if origin.startswith("file:"):
            file = origin[len("file:") :]
            origins.add(Path(file) if os.path.isabs(file) else cwd / file)
            low = key.lower()
            if low == "include.path" or (low.startswith("includeif.") and low.endswith(".path")):
                includes.append((key, value, file))
    return keys, includes, origins, trusted


def include_target(value: str, origin: str, cwd: Path) -> Path:
    """Where an ``include.path`` points: ``~`` expanded, relative to the including file."""
    path = os.path.expanduser(value)
    if os.path.isabs(path):
        return Path(path)
    base = Path(origin) if os.path.isabs(origin) else cwd / origin
    return base.parent / path


def default_config_files(git_dir: Path, env: Mapping[str, str]) -> list[Path]:
    """Config files git would read even when absent now (a later one must invalidate the cache)."""
    home = env.get("HOME", "")
    xdg = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    files = [git_dir / "config", git_dir / "config.worktree", git_dir / "commondir", git_dir / "HEAD"]
    if env.get("GIT_CONFIG_GLOBAL"):
        files.append(Path(env["GIT_CONFIG_GLOBAL"]))
    else:
        if home:
            files.append(Path(home) / ".gitconfig")
        if xdg:
            files.append(Path(xdg) / "git" / "config")
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        files.append(Path(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
    return files


def build_listing(data: bytes, cwd: Path, git_dir: Path, env: Mapping[str, str]) -> Listing:
    keys, includes, origins, trusted = parse_listing(data, cwd)
    files = set(origins)
    files.update(include_target(value, origin, cwd) for _, value, origin in includes)
    files.update(default_config_files(git_dir, env))
    # a linked work tree keeps its config in the common directory
    try:
        common = (git_dir / "commondir").read_text("utf-8").strip()
    except OSError:
        common = ""
    if common:
        files.add((git_dir / common / "config").resolve())
    watched = tuple((path, signature(path)) for path in sorted(files))
    overrides = overrides_for(keys)
    return Listing(
        env=config_env(overrides) if overrides else {},
        keys=tuple(keys),
        watched=watched,
        overrides=tuple(overrides),
        trusted=tuple(trusted),
    )


def cacheable(listing: Listing, started: float, racy_seconds: float = RACY_SECONDS) -> bool:
    """A listing may be reused only if nothing it read changed close to (or during) the read."""
    newest = max((max(sig[3], sig[4]) for _, sig in listing.watched if sig is not None), default=0)
    return newest / 1e9 < started - racy_seconds and listing.current()


def now() -> float:
    return time.time()


def nested_git_dir(where: Path) -> Path | None:
    """The git directory of a repository checked out at ``where`` (``.git`` there, or the
    directory a ``gitdir:`` file names), or None when nothing is checked out."""
    dot_git = where / ".git"
    if os.path.isdir(dot_git) and not os.path.islink(dot_git):
        return Path(os.path.realpath(dot_git))
    try:
        text = dot_git.read_text("utf-8", errors="replace") if os.path.isfile(dot_git) else ""
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return Path(os.path.realpath(target if target.is_absolute() else where / target))


def combine(main: Listing, nested: Sequence[Listing]) -> Listing:
    """One listing for a repository and those nested in it: every override, every watched file."""
    if not nested:
        return main
    overrides = dict(main.overrides)
    for listing in nested:
        overrides.update(listing.overrides)
    pairs = list(overrides.items())
    watched = dict(main.watched)
    for listing in nested:
        watched.update(listing.watched)
    return attrs.evolve(
        main, env=config_env(pairs) if pairs else {}, overrides=tuple(pairs), watched=tuple(watched.items())
    )


#: A listing that overrides nothing and watches nothing.
EMPTY = Listing(env={}, keys=(), watched=())
#: How a gitlink's mode (0o160000) is stored in an index entry: four big-endian bytes.
_GITLINK_MODE = (0o160000).to_bytes(4, "big")
#: Indexes larger than this are not scanned: ``ls-files`` decides.
MAX_SCANNED_INDEX = 64 * 1024 * 1024


def may_hold_gitlinks(git_dir: Path) -> bool:
    """False only when the index certainly has no gitlink entry: its bytes never contain a
    gitlink's mode. A split index (entries in ``sharedindex.*``), a missing or huge index, or
    any match (a sha or name may contain the bytes too) answers True — then ``ls-files`` looks."""
    try:
        if any(name.startswith("sharedindex.") for name in os.listdir(git_dir)):
            return True
        with open(git_dir / "index", "rb") as f:
            data = f.read(MAX_SCANNED_INDEX + 1)
    except FileNotFoundError:
        return False  # no index yet: nothing is tracked, so nothing nested is either
    except OSError:
        return True
    return len(data) > MAX_SCANNED_INDEX or _GITLINK_MODE in data
