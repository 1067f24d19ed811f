"""Running the git program: argument lists only, a scrubbed environment, a timeout, an output cap."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
from entropic_mcp import ToolError

#: Options given to every git invocation, before the subcommand. They keep git from starting a
#: pager, colouring output, quoting non-ASCII paths, running hooks the work tree could plant,
#: or asking an fsmonitor daemon; ``log.showRoot`` makes ``show``/``log -p`` include the root patch.
GLOBAL_OPTIONS: tuple[str, ...] = (
    "--no-pager",
    "-c", "core.pager=cat",
    "-c", "color.ui=false",
    "-c", "core.quotepath=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "diff.external=",
    "-c", "log.showSignature=false",
    "-c", "log.showRoot=true",
)

#: Variables that would point git at another repository, index or diff program than the work
#: tree's own; the host's environment must not redirect the server.
_DROPPED_ENV = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS",
    "GIT_PAGER", "PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_SSH_COMMAND", "GIT_ASKPASS",
})

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

STDERR_LIMIT = 16 * 1024
DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024
_CHUNK = 1 << 16


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
        return text[len(prefix):] if text.startswith(prefix) else None


def git_failed(subcommand: str, out: GitOutput, hint: str) -> ToolError:
    """The ``git_failed`` refusal: exit code, git's stderr, and what to do next."""
    first = out.stderr.strip().splitlines()[0] if out.stderr.strip() else f"exit code {out.exit_code}"
    return ToolError(
        "git_failed",
        f"git {subcommand} failed: {first}. {hint}",
        exit_code=out.exit_code,
        stderr=out.stderr.strip(),
    )


async def _read(stream: asyncio.StreamReader, limit: int, stop_at_limit: bool) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    over = False
    while True:
        chunk = await stream.read(_CHUNK)
        if not chunk:
            return b"".join(chunks), over
        if size < limit:
            chunks.append(chunk[: limit - size])
        size += len(chunk)
        if size > limit:
            over = True
            if stop_at_limit:
                return b"".join(chunks), True


def _kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    # git runs in its own session; its group includes anything it started (hooks are off,
    # but credential helpers, filters and gpg are not)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


async def _read_stdout(process: asyncio.subprocess.Process, limit: int) -> tuple[bytes, bool]:
    assert process.stdout is not None
    data, over = await _read(process.stdout, limit, stop_at_limit=True)
    if over:
        # stop git now: its stderr (read alongside) only ends when it exits
        _kill_group(process)
    return data, over


@attrs.define(kw_only=True)
class GitRunner:
    """Spawns git for a server: one place for the program, environment, timeout and output cap."""

    program: str = "git"
    timeout: float = 30.0
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    env: dict[str, str] = attrs.field(factory=git_environment)
    _executable: str | None = attrs.field(default=None, init=False)
    # positive answers only: a root that becomes a repository later (git init) is noticed
    _worktrees: dict[Path, WorkTree] = attrs.field(factory=dict, init=False)

    def set_program(self, program: str) -> None:
        self.program = program
        self._executable = None

    def executable(self) -> str:
        if self._executable is None:
            found = shutil.which(self.program, path=self.env.get("PATH"))
            if found is None:
                raise ToolError(
                    "git_not_found",
                    f"the git program {self.program!r} was not found; install git or set "
                    "[servers.git] git = \"/path/to/git\" in entropic-mcp.toml",
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
        limit = self.max_output_bytes if limit is None else limit
        timeout = self.timeout if timeout is None else timeout
        try:
            process = await asyncio.create_subprocess_exec(
                self.executable(), *GLOBAL_OPTIONS, *args,
                cwd=cwd, env=self.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
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
        assert process.stdout is not None and process.stderr is not None
        try:
            async with asyncio.timeout(timeout):
                (stdout, truncated), (stderr, _) = await asyncio.gather(
                    _read_stdout(process, limit),
                    _read(process.stderr, STDERR_LIMIT, stop_at_limit=False),
                )
                exit_code = await process.wait()
        except TimeoutError:
            raise ToolError(
                "timeout",
                f"git {args[0]} did not finish within {timeout:g} s and was stopped; narrow the "
                "request (paths, max_count) or raise [servers.git] timeout_seconds",
            ) from None
        finally:
            if process.returncode is None:
                _kill_group(process)
                # reap it so no zombie outlives the call, even when the call was cancelled
                with contextlib.suppress(BaseException):
                    await asyncio.shield(process.wait())
        return GitOutput(
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr.decode("utf-8", errors="replace"),
            truncated=truncated,
        )
