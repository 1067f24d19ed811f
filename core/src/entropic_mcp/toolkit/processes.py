"""Running a program: as the leader of a new process group, in the host's OS sandbox, stopped whole
on timeout or cancellation (TERM, then KILL after a grace), its output's head and tail kept within a cap.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _tracing
from .._errors import ToolError
from .._sandbox import Sandbox, blocked_note
from .._sandbox import sandbox_for as _lookup
from ._output import HeadTail, ProcessResult
from ._watch import POLL_SECONDS, Run, group_alive

if TYPE_CHECKING:  # asyncio and subprocess are imported when a program is run: a plugin reading
    # its arguments or settings does not pay for them at start-up
    import asyncio
    import subprocess

__all__ = [
    "HeadTail",
    "ProcessResult",
    "Sandbox",
    "group_alive",
    "run_process",
    "run_process_sync",
    "sandbox_blocked",
    "sandbox_for",
]


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    timeout: float,
    max_output_bytes: int = 64 * 1024,
    stderr_bytes: int | None = None,
    env: Mapping[str, str] | None = None,
    cancelled: threading.Event | None = None,
    grace: float = 2.0,
    merge_stderr: bool = False,
    stdin: bytes | None = None,
    stop_at_cap: bool = False,
    on_output: Callable[[bytes], None] | None = None,
    sandbox: Sandbox | None = None,
) -> ProcessResult:
    """Run ``argv`` (no shell) as the leader of a new process group and wait for it.

    The program runs in the host's OS sandbox (``sandbox``, by default the one ``[sandbox]``
    configures for every plugin: see docs/sandbox.md; ``sandbox_for(server)`` gives a server's
    own): writes only under the project root and a private ``$TMPDIR``, no policy file, no path
    a deny rule hides, no network unless allowed, and nothing left running after the call.

    On ``timeout`` seconds, on ``cancelled`` being set (pass ``ctx.cancelled``) or when the
    awaiting task is cancelled, the whole group gets SIGTERM, then SIGKILL after ``grace``
    seconds; so does anything the program left running in its group when it exits. stdout
    (and stderr, or both together with ``merge_stderr``) keep their head and tail within
    ``max_output_bytes`` each (stderr: ``stderr_bytes`` when given).

    With ``stop_at_cap`` the program is stopped (its group, as above) once stdout passes the cap,
    and stdout keeps its head only (``stopped_at_cap`` on the result; ``ok`` stays true): for
    output whose beginning is what matters, like ``git log``. ``on_output`` is called on the
    event loop with each piece of stdout as it arrives (for progress reports); an exception it
    raises stops the program and is raised from here.

    The program is watched from the event loop itself (pipes and stdin with ``add_reader`` /
    ``add_writer``, its exit through a pidfd): no task, stream or child-watcher thread per run,
    so a short program costs little more than its own run time.

    Raises:
        ToolError: ``not_found`` when the program does not exist or cannot be run;
            ``sandbox_unavailable`` when ``[sandbox] mode = "required"`` and no sandbox works.
    """
    import asyncio
    import subprocess

    started = time.monotonic()
    argv = tuple(argv)
    loop = asyncio.get_running_loop()
    # Made first: a cap below its least refuses the call before anything starts.
    out = HeadTail(max_output_bytes, keep_tail=not stop_at_cap)
    err = None if merge_stderr else HeadTail(max_output_bytes if stderr_bytes is None else stderr_bytes)
    prepared = _sandboxed(argv, cwd=cwd, env=env, sandbox=sandbox)
    # The output pipes are made here, not by Popen (which wraps its read ends in buffered file
    # objects we never read through) and stdin is one /dev/null kept open: a short program's
    # start costs five system calls and their Python less. Both ends are the run's to close (it
    # keeps the write ends until the program's exit is seen: see ``Run``).
    out_read, out_write = os.pipe()
    err_read, err_write = (-1, -1) if merge_stderr else os.pipe()
    try:
        popen = prepared.popen(
            cwd=str(cwd),
            stdin=subprocess.PIPE if stdin is not None else _devnull(),
            stdout=out_write,
            stderr=subprocess.STDOUT if merge_stderr else err_write,
            start_new_session=True,
        )
    except BaseException as exc:
        prepared.close()
        _close_fds(out_read, out_write, err_read, err_write)
        if isinstance(exc, (FileNotFoundError, PermissionError, NotADirectoryError)):
            raise ToolError("not_found", f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
        raise
    try:
        span = None if _tracing.tracer is None else _traced_start(argv, popen.pid, started)
    except BaseException:
        prepared.close()
        _close_fds(out_read, out_write, err_read, err_write)
        raise
    try:
        result = await _run_popen(
            loop,
            popen,
            (out_read, None if merge_stderr else err_read),
            (out_write,) if merge_stderr else (out_write, err_write),
            argv,
            out,
            err,
            started=started,
            timeout=timeout,
            cancelled=cancelled,
            grace=grace,
            merge_stderr=merge_stderr,
            stdin=stdin,
            stop_at_cap=stop_at_cap,
            on_output=on_output,
        )
    except BaseException as exc:
        if span is not None:
            _traced_end(span, None, exc)
        raise
    finally:
        prepared.close()
    if span is not None:
        _traced_end(span, result, None)
    return result


_DEVNULL: int | None = None


def _devnull() -> int:
    """One ``/dev/null`` for every run's stdin (close-on-exec here; the child gets its own copy)."""
    global _DEVNULL
    if _DEVNULL is None:
        fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        if _DEVNULL is None:
            _DEVNULL = fd
        else:  # another thread opened it meanwhile
            os.close(fd)
    return _DEVNULL


def _close_fds(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def _traced_start(argv: tuple[str, ...], pid: int, started: float) -> Any:
    from .._traced import start_process

    return start_process(_tracing.tracer, argv, pid, started)


def _traced_end(span: Any, result: ProcessResult | None, exc: BaseException | None) -> None:
    from .._traced import end_process

    end_process(span, result, exc)


def sandbox_for(server: str | None = None) -> Sandbox:
    """The OS sandbox of ``server``'s programs as ``[sandbox]`` configures it (``None``: the
    default every plugin gets). Off when the host set none up (a server used bare, a test)."""
    return _lookup(server)


def sandbox_blocked(output: str, sandbox: Sandbox, *, exit_code: int | None) -> str | None:
    """A note for the model when a failed run's ``output`` shows the sandbox refusing a write,
    a read or a connection: what was blocked and which setting the user can change (else None)."""
    return blocked_note(output, sandbox, exit_code=exit_code)


def _sandboxed(argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str] | None, sandbox: Sandbox | None) -> Any:
    chosen = _lookup(None) if sandbox is None else sandbox
    if chosen.active:
        import shutil

        # Inside the sandbox a missing program is bwrap's exit 1, not an OSError: say it as before.
        path = (env if env is not None else os.environ).get("PATH")
        if shutil.which(argv[0], path=path) is None and not (os.sep in argv[0] and os.access(argv[0], os.X_OK)):
            raise ToolError("not_found", f"cannot run {argv[0]!r}: No such file or directory")
        if not Path(cwd).is_dir():
            raise ToolError("not_found", f"cannot run {argv[0]!r}: No such file or directory: {str(cwd)!r}")
    return chosen.prepare(argv, cwd=cwd, env=env)


async def _run_popen(
    loop: asyncio.AbstractEventLoop,
    popen: subprocess.Popen[bytes],
    pipes: tuple[int, int | None],
    held: tuple[int, ...],
    argv: tuple[str, ...],
    out: HeadTail,
    err: HeadTail | None,
    *,
    started: float,
    timeout: float,
    cancelled: threading.Event | None,
    grace: float,
    merge_stderr: bool,
    stdin: bytes | None,
    stop_at_cap: bool,
    on_output: Callable[[bytes], None] | None,
) -> ProcessResult:
    import asyncio

    run = Run(loop, popen, pipes, out, err, stdin, on_output, stop_at_cap, held)
    timed_out = was_cancelled = False
    try:
        deadline = started + timeout
        while not run.exited and not run.overflow and run.failure is None:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if cancelled is not None and cancelled.is_set():
                was_cancelled = True
                break
            await run.wait(min(left, POLL_SECONDS) if cancelled is not None else left, run.running_ended)
        await run.stop_group(grace)
        # A program that left the group (setsid) may still hold the pipes: read for a grace at most.
        await run.drain(grace)
    except asyncio.CancelledError:
        await _despite_cancellation(run.stop_group(grace))
        raise
    finally:
        if run.exited:
            run.release()  # the common case: nothing to wait for, no task to start
        else:
            await _despite_cancellation(run.close())
    if run.failure is not None:
        raise run.failure
    return ProcessResult(
        argv=argv,
        exit_code=None if timed_out or was_cancelled else popen.returncode,
        stdout=out,
        stderr=err,
        elapsed=time.monotonic() - started,
        timed_out=timed_out,
        cancelled=was_cancelled,
        stopped_at_cap=run.overflow,
    )


def run_process_sync(argv: Sequence[str], **options: Any) -> ProcessResult:
    """``run_process`` for a synchronous tool (which runs in a worker thread with no event loop)."""
    import asyncio

    return asyncio.run(run_process(argv, **options))


async def _despite_cancellation(coro: Any) -> None:
    """Run ``coro`` (a bounded clean-up) to its end even if the caller is cancelled meanwhile —
    anyio repeats a cancellation at every await until the task ends, so ``asyncio.shield``
    alone would abandon it — then pass the cancellation on."""
    import asyncio

    task = asyncio.ensure_future(coro)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
