"""Running the git program: argument lists only, a scrubbed environment, a timeout, an output cap."""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
from entropic_mcp import ToolError
from entropic_mcp.toolkit import run_process, sandbox_for

from ._safety import (
    EMPTY,
    NETWORK_PROTOCOLS,
    NO_PROTOCOLS,
    RACY_SECONDS,
    STATIC_CONFIG,
    Listing,
    build_listing,
    cacheable,
    combine,
    may_hold_gitlinks,
    nested_git_dir,
    now,
    signature,
)

#: Nested repositories (gitlinks, submodules) whose configs are checked, and how deep.
MAX_NESTED = 256
MAX_NESTED_DEPTH = 8
#: Bytes of ``git ls-files --stage`` read to find gitlinks (about 400,000 index entries).
NESTED_INDEX_LIMIT = 64 * 1024 * 1024

#: Config given to every git invocation (``-c``): no pager, colour or path quoting, the root
#: commit's patch in ``show``, and every fixed key that names a program neutralised (see _safety).
SAFE_CONFIG: tuple[str, ...] = STATIC_CONFIG
GLOBAL_OPTIONS: tuple[str, ...] = ("--no-pager", *(arg for item in SAFE_CONFIG for arg in ("-c", item)))

#: Variables that would point git at another repository, index or diff program than the work
#: tree's own; the host's environment must not redirect the server.
_DROPPED_ENV = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_COMMON_DIR",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_EXTERNAL_DIFF",
        "GIT_DIFF_OPTS",
        "GIT_PAGER",
        "PAGER",
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "GIT_SSH_COMMAND",
        "GIT_SSH",
        "GIT_PROXY_COMMAND",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        # config given through the environment is the host's -c: it must not outrank ours
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG",
        # where git finds its own sub-programs and templates, and what it may talk to
        "GIT_EXEC_PATH",
        "GIT_TEMPLATE_DIR",
        "GIT_ALLOW_PROTOCOL",
        "GIT_PROTOCOL_FROM_USER",
        "GIT_ATTR_SOURCE",
        "GIT_REPLACE_REF_BASE",
        "GIT_SHALLOW_FILE",
        "GIT_GRAFT_FILE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_PREFIX",
        # every path the server passes spells its own magic (:(literal), :(exclude,glob))
        "GIT_LITERAL_PATHSPECS",
        "GIT_GLOB_PATHSPECS",
        "GIT_NOGLOB_PATHSPECS",
        "GIT_ICASE_PATHSPECS",
    }
)
#: Prefixes of variables dropped the same way (GIT_CONFIG_KEY_0, GIT_TRACE2_EVENT, ...).
_DROPPED_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "GIT_TRACE")

_FORCED_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    # ':' is the editor git knows not to start
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    # no transport until network operations are enabled (then https, http, ssh, local paths)
    "GIT_ALLOW_PROTOCOL": NO_PROTOCOLS,
    # status and diff must not take the index lock a user's own git might be waiting on
    "GIT_OPTIONAL_LOCKS": "0",
    # stable English messages: the server recognises a few of them (nothing to commit, ...)
    "LC_ALL": "C",
    "LANGUAGE": "C",
    # stdout is a pipe the server reads whole: without this git flushes after every commit
    # (log, show), and each small write costs a write call and an event-loop wake-up
    "GIT_FLUSH": "0",
}

DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024
#: git's stderr kept per run (its head and tail): messages, not data.
STDERR_LIMIT = 16 * 1024
#: Seconds between SIGTERM and SIGKILL when git is stopped (timeout, cancellation, output cap).
STOP_GRACE = 1.0
#: 2.31: GIT_CONFIG_COUNT, which carries the overrides of repository-named drivers.
MINIMUM_GIT = (2, 31)


def git_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git process gets: the host's, minus redirections, plus safety settings."""
    source = os.environ if base is None else base
    env = {
        key: value for key, value in source.items() if key not in _DROPPED_ENV and not key.startswith(_DROPPED_PREFIXES)
    }
    env.update(_FORCED_ENV)
    return env


@attrs.frozen(kw_only=True)
class GitOutput:
    """What one git process produced; ``truncated`` when stdout went past the read limit."""

    exit_code: int
    stdout: bytes
    stderr: str
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """Git succeeded, or was stopped by the server at the output cap (its output stands)."""
        return self.truncated or self.exit_code == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")


@attrs.frozen(kw_only=True)
class WorkTree:
    """The work tree a root lies in: its top-level directory and its git directory."""

    top: Path
    git_dir: Path

    def head(self) -> str | None:
        """The branch HEAD names (``None`` when detached), read from the HEAD file — no process."""
        try:
            text = (self.git_dir / "HEAD").read_text("utf-8", errors="replace").strip()
        except OSError:
            return None
        prefix = "ref: refs/heads/"
        return text[len(prefix) :] if text.startswith(prefix) else None


def git_failed(subcommand: str, out: GitOutput, hint: str) -> ToolError:
    """The ``git_failed`` refusal: exit code, git's stderr, and what to do next."""
    lines = [line.strip() for line in out.stderr.strip().splitlines() if line.strip()] or [f"exit code {out.exit_code}"]
    # "The following paths are ignored ...:" says nothing without the line that follows
    first = f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    first = first.rstrip(".")
    return ToolError(
        "git_failed",
        f"git {subcommand} failed: {first}. {hint}",
        exit_code=out.exit_code,
        stderr=out.stderr.strip(),
    )


@attrs.define(kw_only=True)
class GitRunner:
    """Spawns git for a server: one place for the program, environment, timeout and output cap."""

    program: str = "git"
    timeout: float = 30.0
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    env: dict[str, str] = attrs.field(factory=git_environment)
    _executable: str | None = attrs.field(default=None, init=False)
    _version_checked: bool = attrs.field(default=False, init=False)
    network: bool = False
    #: config files changed this recently are re-read on the next call (timestamp granularity)
    racy_seconds: float = RACY_SECONDS
    # positive answers only: a root that becomes a repository later (git init) is noticed
    _worktrees: dict[Path, WorkTree] = attrs.field(factory=dict, init=False)
    #: the config overrides of each git directory, while the files they came from are unchanged
    _listings: dict[Path, Listing] = attrs.field(factory=dict, init=False)
    _last: dict[Path, Listing] = attrs.field(factory=dict, init=False)
    #: the nested repositories' listings (watching the indexes), and the combination in use
    _nested: dict[Path, Listing] = attrs.field(factory=dict, init=False)
    _combined: dict[Path, tuple[Listing, Listing, Listing]] = attrs.field(factory=dict, init=False)

    def set_network(self, enabled: bool) -> None:
        self.network = enabled
        self.env["GIT_ALLOW_PROTOCOL"] = NETWORK_PROTOCOLS if enabled else NO_PROTOCOLS

    def trusted_network_config(self, tree: WorkTree) -> list[str]:
        """The user's own credential helpers, ssh command and askpass (``key=value`` for ``-c``),
        from the last config listing of ``tree`` — restored for fetch, pull and push only."""
        listing = self._last.get(tree.git_dir)
        return list(listing.trusted) if listing is not None else []

    async def guard(self, tree: WorkTree) -> Listing:
        """The overrides that neutralise the drivers this repository's config names — and the
        configs of the repositories nested in its work tree (gitlinks, submodules), inside which
        git runs ``git status`` (``add``, ``stash``): those children inherit the overrides.

        Read with ``git config --list`` (which runs nothing), nested repositories found with
        ``git ls-files --stage``; cached until a file either read, an include target, HEAD or an
        index changes. ``ToolError('config_unreadable')`` when git cannot read a config (then no
        other command would be safe to start either).
        """
        main = self._listings.get(tree.git_dir)
        nested = self._nested.get(tree.git_dir)
        if main is not None and main.current() and nested is not None and nested.current():
            combined = self._combined.get(tree.git_dir)
            if combined is not None and combined[0] is main and combined[1] is nested:
                return combined[2]
        if main is None or not main.current():
            started = now()
            main = await self._config_listing(tree.top, tree.git_dir, f"this repository's config in {tree.git_dir}")
            self._remember(self._listings, tree.git_dir, main, started)
        if nested is None or not nested.current():
            # only the index (and the nested configs) changed: the config listing stands
            started = now()
            nested = combine(EMPTY, await self._nested_listings(tree.top, tree.git_dir, depth=0, seen=set()))
            self._remember(self._nested, tree.git_dir, nested, started)
        listing = combine(main, [nested])
        self._combined[tree.git_dir] = (main, nested, listing)
        self._last[tree.git_dir] = listing
        return listing

    def _remember(self, cache: dict[Path, Listing], key: Path, listing: Listing, started: float) -> None:
        if cacheable(listing, started, self.racy_seconds):
            cache[key] = listing
        else:
            cache.pop(key, None)

    async def _config_listing(self, where: Path, git_dir: Path, what: str) -> Listing:
        out = await self.run(where, ("config", "--list", "--show-origin", "--show-scope", "-z"))
        if out.exit_code != 0 or out.truncated:
            raise ToolError(
                "config_unreadable",
                f"git cannot read {what} ({out.stderr.strip() or 'git config --list failed'}); the server runs "
                "nothing in a repository whose config it cannot check. Fix the config file "
                "(git config --list --show-origin shows where)",
            )
        return build_listing(out.stdout, where, git_dir, self.env)

    async def _nested_listings(self, top: Path, git_dir: Path, *, depth: int, seen: set[Path]) -> list[Listing]:
        """The config listings of the checked-out repositories at the gitlinks of ``top``'s index,
        and of theirs (each listing also watches the index it was found in)."""
        index = git_dir / "index"
        listings = [Listing(env={}, keys=(), watched=((index, signature(index)),))]
        if depth == 0 and not may_hold_gitlinks(git_dir):
            return listings  # the common case: no process at all
        out = await self.run(top, ("ls-files", "--stage", "-z"), limit=NESTED_INDEX_LIMIT)
        if depth == 0 and out.exit_code == 128 and "not a git repository" in out.stderr.lower():
            # the repository went away since it was found
            for root, found in list(self._worktrees.items()):
                if found.git_dir == git_dir:
                    del self._worktrees[root]
            raise ToolError(
                "not_a_repository",
                f"{top} is no longer inside a git work tree; run `git init` there or point the server at a repository",
            )
        if out.exit_code != 0 or out.truncated:
            raise ToolError(
                "config_unreadable",
                f"git cannot list the index of {top} to find nested repositories "
                f"({out.stderr.strip() or 'the index is too large'}); the server runs nothing there",
            )
        for record in out.stdout.split(b"\x00"):
            if not record.startswith(b"160000 "):
                continue
            where = top / record.partition(b"\t")[2].decode("utf-8", "surrogateescape")
            nested_dir = nested_git_dir(where)
            if nested_dir is None or nested_dir in seen:
                continue  # not checked out: git does not look inside
            seen.add(nested_dir)
            if len(seen) > MAX_NESTED or depth >= MAX_NESTED_DEPTH:
                raise ToolError(
                    "config_unreadable",
                    f"{top} holds more than {MAX_NESTED} nested repositories (or nests them deeper than "
                    f"{MAX_NESTED_DEPTH}); the server does not check that many configs",
                )
            listings.append(
                await self._config_listing(where, nested_dir, f"the config of the repository nested at {where}")
            )
            listings += await self._nested_listings(where, nested_dir, depth=depth + 1, seen=seen)
        return listings

    def set_program(self, program: str) -> None:
        self.program = program
        self._executable = None
        self._version_checked = False

    def executable(self) -> str:
        if self._executable is None:
            found = shutil.which(self.program, path=self.env.get("PATH"))
            if found is None:
                raise ToolError(
                    "git_not_found",
                    f"the git program {self.program!r} was not found; install git or set "
                    '[servers.git] git = "/path/to/git" in entropic-mcp.toml',
                )
            self._executable = found
        return self._executable

    def forget(self, root: Path | None = None) -> None:
        """Drop the cached work tree of ``root`` (every root when ``None``)."""
        if root is None:
            self._worktrees.clear()
            self._listings.clear()
            self._nested.clear()
        else:
            tree = self._worktrees.pop(root, None)
            if tree is not None:
                self._listings.pop(tree.git_dir, None)
                self._nested.pop(tree.git_dir, None)

    async def worktree(self, root: Path) -> WorkTree:
        """The work tree containing ``root``, or ``ToolError('not_a_repository')``."""
        found = self._worktrees.get(root)
        if found is not None:
            return found
        if not self._version_checked:
            await self._check_version(root)
        out = await self.run(root, ("rev-parse", "--show-toplevel", "--absolute-git-dir"))
        lines = out.text.splitlines()
        if out.exit_code != 0 or len(lines) != 2:
            raise ToolError(
                "not_a_repository",
                f"{root} is not inside a git work tree ({out.stderr.strip() or 'git rev-parse failed'}); "
                "run `git init` there or point the server at a repository (set_working_dir)",
            )
        found = WorkTree(top=Path(os.path.realpath(lines[0])), git_dir=Path(lines[1]))
        real_root = Path(os.path.realpath(root))
        if not os.path.lexists(found.top / ".git") or not (
            real_root == found.top or real_root.is_relative_to(found.top)
        ):
            # core.worktree in the repository's config moved the work tree away from the
            # repository (to "/", to $HOME, ...): every path and write would follow it there
            raise ToolError(
                "not_a_repository",
                f"the repository's config (core.worktree) makes {found.top} its work tree, which does not "
                f"hold the repository itself or does not contain the project root {root}; the git server "
                "only works on the work tree that contains its .git — remove core.worktree from the "
                "repository's config",
            )
        self._worktrees[root] = found
        return found

    async def _check_version(self, cwd: Path) -> None:
        # once per program: every revision is passed after --end-of-options (git 2.24), checkout
        # uses git switch (2.23) and driver overrides travel in GIT_CONFIG_COUNT (2.31); an older
        # git would misread or ignore them, so refuse it
        out = await self.run(cwd if cwd.is_dir() else Path("/"), ("version",))
        match = re.match(r"git version (\d+)\.(\d+)", out.text)
        if out.exit_code != 0 or match is None:
            raise ToolError(
                "git_not_found",
                f"{self.program!r} did not answer `git version` like git; set [servers.git] git to the path of git",
            )
        found = (int(match[1]), int(match[2]))
        if found < MINIMUM_GIT:
            raise ToolError(
                "git_too_old",
                f"git {found[0]}.{found[1]} is too old: the git server needs git "
                f"{MINIMUM_GIT[0]}.{MINIMUM_GIT[1]} or newer (for --end-of-options and GIT_CONFIG_COUNT); upgrade git or set "
                "[servers.git] git to a newer one",
            )
        self._version_checked = True

    async def run(
        self,
        cwd: Path,
        args: Sequence[str],
        *,
        limit: int | None = None,
        timeout: float | None = None,
        tree: WorkTree | None = None,
        config: Sequence[str] = (),
    ) -> GitOutput:
        """Run ``git <GLOBAL_OPTIONS> <args>`` in ``cwd``; stdout is read up to ``limit`` bytes.

        With ``tree``, the drivers its config names are neutralised first (``guard``): every
        command that may read files, diff, merge, sign or talk to a remote passes it.

        The core toolkit's ``run_process`` runs it (the one runner bash uses too): git leads its
        own process group, watched from the event loop (pipes read with ``add_reader``, the exit
        seen through a pidfd: no thread and no child-watcher round trip per call). Past the limit
        the group is stopped and the output marked truncated. Past the timeout the group is
        stopped and ``ToolError('timeout')`` raised; a cancelled call stops it too. Never raises
        for git's own failures: the caller reads ``exit_code``.
        """
        limit = self.max_output_bytes if limit is None else limit
        timeout = self.timeout if timeout is None else timeout
        env = self.env
        if tree is not None:
            listing = await self.guard(tree)
            if listing.env:
                env = {**env, **listing.env}
        # extra -c settings come after the server's own, so they win over them
        argv = [self.executable(), *GLOBAL_OPTIONS, *(arg for item in config for arg in ("-c", item)), *args]
        try:
            # stop_at_cap: past the limit the output is cut anyway, and git's stderr only ends
            # when it exits; git runs in its own process group, which takes anything it started
            # (hooks are off, but credential helpers, filters and gpg are not)
            done = await run_process(
                argv,
                cwd=cwd,
                timeout=timeout,
                max_output_bytes=limit,
                stderr_bytes=STDERR_LIMIT,
                env=env,
                stop_at_cap=True,
                grace=STOP_GRACE,
                # git may write .git/config itself (branch tracking, remotes): this server reads
                # the repository's config and neutralises it; bash's git may not write it.
                sandbox=sandbox_for("git").allowing(network=self.network, git_config=True),
            )
        except ToolError as exc:
            if exc.code != "not_found":
                raise
            self._executable = None
            if not cwd.is_dir():
                raise ToolError(
                    "not_a_repository",
                    f"the project root {cwd} does not exist any more; point the server at a repository",
                ) from None
            raise ToolError(
                "git_not_found",
                f"could not start git ({exc.message}); install git or set [servers.git] git in entropic-mcp.toml",
            ) from None
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                raise ToolError(
                    "invalid_args",
                    "the arguments are too long for one git command; pass fewer paths or a shorter message",
                ) from None
            raise
        if done.timed_out:
            raise ToolError(
                "timeout",
                f"git {args[0]} did not finish within {timeout:g} s and was stopped; narrow the "
                "request (paths, max_count) or raise [servers.git] timeout_seconds",
            )
        assert done.exit_code is not None and done.stderr is not None
        return GitOutput(
            exit_code=done.exit_code,
            stdout=done.stdout.bytes(),
            stderr=done.stderr.bytes().decode("utf-8", errors="replace"),
            truncated=done.stopped_at_cap or done.stdout.truncated,
        )
