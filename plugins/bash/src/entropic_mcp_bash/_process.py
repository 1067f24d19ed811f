"""One shell process: started as a new process group, read, stopped with its whole group."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from ._output import PROGRESS_INTERVAL, OutputBuffer, ProgressLines
from ._settings import KILL_GRACE

#: How often a running command checks the host's synchronous cancellation flag.
CANCEL_POLL = 0.1
#: How often a stopping group is checked for members that are still alive.
GROUP_POLL = 0.02
#: Reads served per wake-up, so a flood of output never starves the event loop's timers.
READS_PER_WAKE = 8
READ_SIZE = 65536


@attrs.frozen(kw_only=True)
class Completed:
    """How a run ended: ``exit_code`` is None when it was stopped (timeout or cancellation)."""

    exit_code: int | None
    output: OutputBuffer
    elapsed_ms: int
    timed_out: bool = False
    cancelled: bool = False


class ShellProcess:
    """``argv`` as the leader of a new session, stdin ``/dev/null``, stdout+stderr on one pipe.

    ``run()`` waits for the leader to exit, the timeout, or ``cancelled``; in every case no
    member of the process group outlives it, the leader is reaped and both pipe ends are
    closed — also when the awaiting task itself is cancelled.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None,
        timeout: float,
        max_output_bytes: int,
        progress: Callable[[float, float | None, str | None], None] | None = None,
        cancelled: threading.Event | None = None,
        grace: float = KILL_GRACE,
    ) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = env
        self.timeout = timeout
        self.grace = grace
        self.cancelled = cancelled
        self.buffer = OutputBuffer(max_output_bytes)
        self.progress = ProgressLines(progress) if progress is not None else None
        self._progress_timer: asyncio.TimerHandle | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._read_fd = -1
        self._exit_fd = -1
        self._reading = False
        self._watching_exit = False
        self._exited = False
        self._eof = False
        self._returncode: int | None = None
        self._wake: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the run -------------------------------------------------------------------------

    async def run(self) -> Completed:
        loop = self._loop = asyncio.get_running_loop()
        started = time.monotonic()
        self._start()
        try:
            deadline = started + self.timeout
            timed_out = cancelled = False
            while not self._exited:
                now = time.monotonic()
                if now >= deadline:
                    timed_out = True
                    break
                if self.cancelled is not None and self.cancelled.is_set():
                    cancelled = True
                    break
                wait = deadline - now if self.cancelled is None else min(deadline - now, CANCEL_POLL)
                await self._sleep(wait)
            if timed_out or cancelled:
                await self._stop_group()
            else:
                self._reap()
                if self._group_alive():  # the shell is gone; what it left running is not
                    await self._stop_group()
            await self._drain()
            return Completed(
                exit_code=None if timed_out or cancelled else self._returncode,
                output=self.buffer,
                elapsed_ms=round((time.monotonic() - started) * 1000),
                timed_out=timed_out,
                cancelled=cancelled,
            )
        except asyncio.CancelledError:
            await self._stop_group()
            raise
        finally:
            self._close(loop)

    # -- starting ------------------------------------------------------------------------

    def _start(self) -> None:
        loop = self._loop
        assert loop is not None
        read_fd, write_fd = os.pipe()
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self._read_fd = read_fd
        os.set_blocking(read_fd, False)
        loop.add_reader(read_fd, self._on_output)
        self._reading = True
        try:
            self._exit_fd = os.pidfd_open(self._proc.pid)
        except (AttributeError, OSError):
            # No pidfd (old kernel, not Linux): a thread waits without reaping.
            threading.Thread(target=self._wait_exit_thread, args=(self._proc.pid,), daemon=True).start()
        else:
            loop.add_reader(self._exit_fd, self._on_exit)
            self._watching_exit = True

    def _wait_exit_thread(self, pid: int) -> None:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._on_exit)
            except RuntimeError:  # the loop closed meanwhile; the synchronous cleanup reaped
                pass

    # -- event callbacks -------------------------------------------------------------------

    def _notify(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _on_exit(self) -> None:
        if self._watching_exit and self._loop is not None:
            self._loop.remove_reader(self._exit_fd)
            self._watching_exit = False
        self._exited = True
        self._notify()

    def _check_exited(self) -> None:
        """At end of output the shell has usually exited too: see it now, not one wake-up later."""
        if self._exited or self._proc is None:
            return
        try:
            state = os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except (ChildProcessError, AttributeError):
            return
        if state is not None:
            self._on_exit()

    def _on_output(self) -> None:
        for _ in range(READS_PER_WAKE):
            try:
                data = os.read(self._read_fd, READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._eof = True
                if self._reading and self._loop is not None:
                    self._loop.remove_reader(self._read_fd)
                    self._reading = False
                self._check_exited()
                self._notify()
                return
            self.buffer.feed(data)
            if self.progress is not None and self.progress.feed(data) and self._progress_timer is None:
                assert self._loop is not None
                self._progress_timer = self._loop.call_later(PROGRESS_INTERVAL, self._flush_progress)

    def _flush_progress(self) -> None:
        self._progress_timer = None
        if self.progress is not None:
            self.progress.flush()

    async def _sleep(self, seconds: float) -> None:
        """Sleep until ``seconds`` pass or an event (exit, end of output) arrives."""
        loop = self._loop
        assert loop is not None
        self._wake = wake = loop.create_future()
        handle = loop.call_later(seconds, self._notify)
        try:
            await wake
        finally:
            handle.cancel()
            self._wake = None

    # -- stopping -------------------------------------------------------------------------

    def _reap(self) -> None:
        if self._returncode is None and self._proc is not None:
            code = self._proc.wait()
            self._returncode = 128 - code if code < 0 else code

    def _signal_group(self, sig: int) -> None:
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _group_alive(self) -> bool:
        """True while a live (not zombie) process is left in the group; the leader is reaped."""
        # Only asked once the leader is reaped: until then its zombie keeps the group (and its
        # id) alive. Afterwards the id stays reserved for as long as any member exists, so a
        # positive answer always means our own stray processes.
        pgid = self._proc.pid  # type: ignore[union-attr]
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return _live_members(pgid)

    async def _stop_group(self) -> None:
        """TERM the group; KILL whatever is left after the grace; wait until it is empty."""
        self._signal_group(signal.SIGTERM)
        end = time.monotonic() + self.grace
        while time.monotonic() < end:
            if self._exited:
                self._reap()
                if not self._group_alive():
                    return
            await self._sleep(min(GROUP_POLL, max(0.0, end - time.monotonic())))
        self._signal_group(signal.SIGKILL)
        end = time.monotonic() + self.grace
        while not self._exited and time.monotonic() < end:
            await self._sleep(GROUP_POLL)
        self._reap()
        while self._group_alive() and time.monotonic() < end:
            await self._sleep(GROUP_POLL)

    async def _drain(self) -> None:
        """Read what is left in the pipe; a process that left the group may hold it open."""
        end = time.monotonic() + self.grace
        while not self._eof and time.monotonic() < end:
            await self._sleep(end - time.monotonic())
        if self._read_fd >= 0 and not self._eof:
            self._on_output()

    def _close(self, loop: asyncio.AbstractEventLoop) -> None:
        """Synchronous last resort and cleanup: nothing of the run survives this."""
        if self._proc is not None and self._returncode is None:
            self._signal_group(signal.SIGKILL)
            self._reap()
        if self._progress_timer is not None:
            self._progress_timer.cancel()
            self._progress_timer = None
        if self.progress is not None:
            self.progress.flush(final=True)
        if self._reading:
            loop.remove_reader(self._read_fd)
        if self._watching_exit:
            loop.remove_reader(self._exit_fd)
        self._reading = self._watching_exit = False
        for fd in (self._read_fd, self._exit_fd):
            if fd >= 0:
                os.close(fd)
        self._read_fd = self._exit_fd = -1
        self._wake = None


def _live_members(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies awaiting their reaper are not).

    Killed orphans are reaped by init, which in some containers takes seconds; counting their
    zombies would hold every stopped command for the whole grace period.
    """
    try:
        entries = os.scandir("/proc")
    except OSError:
        return True  # no procfs: trust kill(0)
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 2 and fields[2] == b"%d" % pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False
