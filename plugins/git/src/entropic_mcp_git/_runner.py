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

#: Config given to every git invocation (``-c``). It keeps git from starting a pager, colouring
#: output, quoting non-ASCII paths, running hooks the work tree could plant, asking an fsmonitor
#: daemon or an external diff; ``log.showRoot`` makes ``show`` include the root commit's patch.
SAFE_CONFIG: tuple[str, ...] = (
    "core.pager=cat",
    "color.ui=false",
    "core.quotepath=false",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "diff.external=",
    "log.showSignature=false",
    "log.showRoot=true",
)
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
        "GIT_ASKPASS",
    }
)

_FORCED_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    # status and diff must not take the index lock a user's own git might be waiting on
    "GIT_OPTIONAL_LOCKS": "0",
    # paths reach git already confined; magic like ':(top)' or globs would widen them again
    "GIT_LITERAL_PATHSPECS": "1",
    # stable English messages: the server recognises a few of them (nothing to commit, ...)
    "LC_ALL": "C",
    "LANGUAGE": "C",
}

DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024
MINIMUM_GIT = (2, 24)


def git_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git process gets: the host's, minus redirections, plus safety settings."""
    source = os.environ if base is None else base
    env = {key: value for key, value in source.items() if key not in _DROPPED_ENV}
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
    # positive answers only: a root that becomes a repository later (git init) is noticed
    _worktrees: dict[Path, WorkTree] = attrs.field(factory=dict, init=False)

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
        else:
            self._worktrees.pop(root, None)

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
        self._worktrees[root] = found
        return found

    async def _check_version(self, cwd: Path) -> None:
        # once per program: every revision is passed after --end-of-options (git 2.24) and
        # checkout uses git switch (2.23); an older git would misread them, so refuse it
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
                f"{MINIMUM_GIT[0]}.{MINIMUM_GIT[1]} or newer (for --end-of-options); upgrade git or set "
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
    ) -> GitOutput:
        """Run ``git <GLOBAL_OPTIONS> <args>`` in ``cwd``; stdout is read up to ``limit`` bytes.

        Past the limit the process is killed and the output marked truncated. Past the timeout
        the process group is killed and ``ToolError('timeout')`` raised; a cancelled call kills
        it too. Never raises for git's own failures: the caller reads ``exit_code``.
        """
        # imported here, not at module level: listing tools must not pay for asyncio
        import asyncio

        from ._process import Process

        limit = self.max_output_bytes if limit is None else limit
        timeout = self.timeout if timeout is None else timeout
        argv = [self.executable(), *GLOBAL_OPTIONS, *args]
        try:
            process = Process(asyncio.get_running_loop(), argv, cwd, self.env, limit)
        except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
            self._executable = None
            if not cwd.is_dir():
                raise ToolError(
                    "not_a_repository",
                    f"the project root {cwd} does not exist any more; point the server at a repository",
                ) from None
            raise ToolError(
                "git_not_found",
                f"could not start git ({exc}); install git or set [servers.git] git in entropic-mcp.toml",
            ) from None
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                raise ToolError(
                    "invalid_args",
                    "the arguments are too long for one git command; pass fewer paths or a shorter message",
                ) from None
            raise
        try:
            async with asyncio.timeout(timeout):
                stdout, stderr, truncated, exit_code = await process.communicate()
        except TimeoutError:
            raise ToolError(
                "timeout",
                f"git {args[0]} did not finish within {timeout:g} s and was stopped; narrow the "
                "request (paths, max_count) or raise [servers.git] timeout_seconds",
            ) from None
        finally:
            # also on cancellation: the group is killed and reaped before the call ends
            process.close()
        return GitOutput(
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr.decode("utf-8", errors="replace"),
            truncated=truncated,
        )
