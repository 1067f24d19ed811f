"""One foreground shell run on the toolkit's runner, with bash's output, progress and exit codes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
from entropic_mcp import ToolError, toolkit
from entropic_mcp.toolkit import sandbox_blocked as blocked_note

from ._output import PROGRESS_INTERVAL, OutputBuffer, ProgressLines
from ._runs import TRAILER_VARIABLE


@attrs.frozen(kw_only=True)
class Completed:
    """How a run ended: ``exit_code`` is None when it was stopped (timeout or cancellation)."""

    exit_code: int | None
    output: OutputBuffer
    elapsed_ms: int
    timed_out: bool = False
    cancelled: bool = False


def with_trailer(sandbox: toolkit.Sandbox, env: Mapping[str, str] | None) -> toolkit.Sandbox:
    """The sandbox plus the private directory where the shell reports its last directory
    (``CwdTrailer``): writable for the report, its start-up script read-only."""
    report = env.get(TRAILER_VARIABLE) if env is not None else None
    if not sandbox.active or not report:
        return sandbox
    directory = Path(report).parent
    return sandbox.allowing(writable=(directory,), read_only=(directory / "start.sh",))


class ShellRun:
    """``argv`` run by ``toolkit.run_process`` (new process group, stdin ``/dev/null``, stdout and
    stderr on one pipe; TERM then KILL of the whole group on timeout, cancellation or when the
    shell leaves processes behind).

    The output is kept here, fed as it arrives, rather than taken from the runner's result: when
    the awaiting task itself is cancelled there is no result, and the pipeline still wants what
    was printed so far (``buffer``).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None,
        timeout: float,
        max_output_bytes: int,
        grace: float,
        progress: Callable[[float, float | None, str | None], None] | None = None,
        cancelled: threading.Event | None = None,
        sandbox: toolkit.Sandbox | None = None,
    ) -> None:
        self.argv = list(argv)
        self.sandbox = with_trailer(sandbox if sandbox is not None else toolkit.sandbox_for("bash"), env)
        self.cwd = cwd
        self.env = env
        self.timeout = timeout
        self.grace = grace
        self.cancelled = cancelled
        self.buffer = OutputBuffer(max_output_bytes)
        self.progress = ProgressLines(progress) if progress is not None else None
        self._progress_timer: asyncio.TimerHandle | None = None

    async def run(self) -> Completed:
        """Run to the end, the timeout or cancellation.

        Raises:
            ToolError: ``not_directory`` when the working directory is gone, ``shell_unavailable``
                when the shell cannot be started.
        """
        # The runner's ``not_found`` does not tell a missing program from a missing directory: the
        # directory is looked at when the start fails (a missing one fails the start, in the
        # sandbox too), not before every run.
        try:
            done = await toolkit.run_process(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                timeout=self.timeout,
                # The output is ours (on_output feeds the buffer); the runner's own copy is never
                # read, so it keeps the least it can instead of a second copy of up to the cap.
                max_output_bytes=2,
                merge_stderr=True,
                cancelled=self.cancelled,
                grace=self.grace,
                on_output=self._on_output,
                sandbox=self.sandbox,
            )
        except ToolError as exc:
            if exc.code != "not_found":
                raise
            if not self.cwd.is_dir():
                raise self._directory_gone() from None
            reason = exc.message.rpartition(": ")[2]
            raise ToolError(
                "shell_unavailable",
                f"the shell {self.argv[0]!r} could not be started in {self.cwd} ({reason}); ask the operator "
                "to set [servers.bash] shell to an installed shell, or use another working_dir",
            ) from None
        finally:
            if self._progress_timer is not None:
                self._progress_timer.cancel()
                self._progress_timer = None
            if self.progress is not None:
                self.progress.flush(final=True)
        code = done.exit_code
        # Read only for a failed sandboxed run: a successful one never pays for decoding its output here.
        failed = self.sandbox.active and code not in (0, None)
        note = blocked_note(self.buffer.text(), self.sandbox, exit_code=code) if failed else None
        if note is not None:
            self.buffer.feed(f"\n{note}\n".encode())
        return Completed(
            # bash's convention for a shell killed by signal N: 128 + N.
            exit_code=128 - code if code is not None and code < 0 else code,
            output=self.buffer,
            elapsed_ms=round(done.elapsed * 1000),
            timed_out=done.timed_out,
            cancelled=done.cancelled,
        )

    def _directory_gone(self) -> ToolError:
        return ToolError(
            "not_directory",
            f"the directory {self.cwd} no longer exists; pass an existing "
            "working_dir or ask the operator to restore the project root",
        )

    def _on_output(self, data: bytes) -> None:
        self.buffer.feed(data)
        if self.progress is not None and self.progress.feed(data) and self._progress_timer is None:
            self._progress_timer = asyncio.get_running_loop().call_later(PROGRESS_INTERVAL, self._flush_progress)

    def _flush_progress(self) -> None:
        self._progress_timer = None
        if self.progress is not None:
            self.progress.flush()
