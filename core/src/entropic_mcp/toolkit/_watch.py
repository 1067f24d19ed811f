"""A program watched from the event loop: its pipes, its stdin, its exit, and its process group."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    import subprocess

    from ._output import HeadTail

#: How often a run checks the synchronous cancellation flag (and a stopped group's leftovers).
POLL_SECONDS = 0.05
#: Bytes read from a pipe at a time.
CHUNK_BYTES = 1 << 16
#: Reads of a pipe done at once when the program's exit is seen (what it left and the end).
LEFT_READS = 4


def _never() -> bool:
    return False


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Run:
    """One program watched from the event loop: its pipes, its stdin and its exit.

    The callbacks only record what happened; they wake the waiting run (one future) only when
    what it waits for holds (``wait(until=...)``): running, the exit, the cap or a failing
    ``on_output``; draining, the pipes' end. Neither every piece of output nor an event the
    run does not wait for costs a task switch.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        popen: subprocess.Popen[bytes],
        pipes: tuple[int, int | None],
        out: HeadTail,
        err: HeadTail | None,
        stdin: bytes | None,
        on_output: Callable[[bytes], None] | None,
        stop_at_cap: bool,
        held: tuple[int, ...] = (),
    ) -> None:
        self.loop = loop
        self.popen = popen
        self.on_output = on_output
        self.stop_at_cap = stop_at_cap
        self.exited = False
        self.overflow = False
        self.failure: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._until: Callable[[], bool] = _never
        # The read ends of the program's stdout (and stderr) pipes: the run's, closed when they end.
        stdout, stderr = pipes
        self._readers: dict[int, tuple[HeadTail, bool]] = {stdout: (out, True)}
        if stderr is not None and err is not None:
            self._readers[stderr] = (err, False)
        # The write ends of those pipes, kept open here until the program's exit is seen: its exit
        # then ends nothing early, so one wake-up (the exit) instead of two (the pipes' end a few
        # microseconds before the exit) ends a short run. Closed at the exit, or before a drain.
        self._held = list(held)
        self._input = memoryview(stdin) if stdin is not None else None
        self._pidfd: int | None = None
        self._reaper: threading.Thread | None = None
        try:
            for fd in self._readers:
                os.set_blocking(fd, False)
                loop.add_reader(fd, self._readable, fd)
            if popen.stdin is not None:
                os.set_blocking(popen.stdin.fileno(), False)
                loop.add_writer(popen.stdin.fileno(), self._writable)
            try:
                # A command of a persistent sandbox is not our child: its status comes on exit_fd.
                exit_fd = getattr(popen, "exit_fd", None)
                self._pidfd = os.dup(exit_fd) if exit_fd is not None else os.pidfd_open(popen.pid)
            except (AttributeError, OSError):  # no pidfds (old kernel, not Linux): a thread waits
                self._reaper = threading.Thread(target=self._wait_in_thread, daemon=True)
                self._reaper.start()
            else:
                loop.add_reader(self._pidfd, self._pidfd_readable)
        except BaseException:
            self.release()
            signal_group(popen.pid, signal.SIGKILL)
            popen.wait()
            raise

    # -- callbacks on the loop ------------------------------------------------------------------

    def _readable(self, fd: int) -> bool:
        """Read a piece; whether the pipe is still watched and may hold more."""
        sink, is_stdout = self._readers[fd]
        try:
            data = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._unwatch(fd)
            self._wake()
            return False
        sink.feed(data)
        if not is_stdout:
            return True
        if self.on_output is not None:
            try:
                self.on_output(data)
            except Exception as exc:  # the caller's: raised from run_process once the group is stopped
                self.failure = exc
                self._unwatch(fd)
                self._wake()
                return False
        if self.stop_at_cap and sink.total > sink.limit:
            self.overflow = True
            self._unwatch(fd)
            self._wake()
            return False
        return True

    def _let_go(self) -> None:
        """Close the pipes' write ends kept here: the pipes end once nothing else holds them."""
        held, self._held = self._held, []
        for fd in held:
            os.close(fd)

    def _unwatch(self, fd: int) -> None:
        if self._readers.pop(fd, None) is not None:
            self.loop.remove_reader(fd)
            os.close(fd)

    def _writable(self) -> None:
        assert self.popen.stdin is not None
        data = self._input
        try:
            if data:
                written = os.write(self.popen.stdin.fileno(), data[:CHUNK_BYTES])
                self._input = data = data[written:]
        except BlockingIOError:
            return
        except OSError:  # a broken pipe: the program does not read (all of) its input
            data = None
        if not data:
            self._close_stdin()

    def _close_stdin(self) -> None:
        stdin = self.popen.stdin
        if stdin is not None and not stdin.closed:
            self.loop.remove_writer(stdin.fileno())
            try:
                stdin.close()
            except OSError:
                pass

    def _pidfd_readable(self) -> None:
        if self.popen.poll() is None:
            return
        self._close_pidfd()
        self._set_exited()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _wait_in_thread(self) -> None:
        self.popen.wait()
        try:
            self.loop.call_soon_threadsafe(self._set_exited)
        except RuntimeError:  # the loop is closed: the run ended without waiting for this
            pass

    def _set_exited(self) -> None:
        self.exited = True
        if self._held:
            self._let_go()
            # What the program left in the pipes and their end (when nothing else holds them),
            # read now rather than on another turn of the loop.
            for fd in list(self._readers):
                for _ in range(LEFT_READS):
                    if fd not in self._readers or not self._readable(fd):
                        break
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done() and self._until():
            self._waiter.set_result(None)

    # -- waiting --------------------------------------------------------------------------------

    def running_ended(self) -> bool:
        return self.exited or self.overflow or self.failure is not None

    def pipes_ended(self) -> bool:
        return not self._readers

    def has_exited(self) -> bool:
        return self.exited

    async def wait(self, timeout: float, until: Callable[[], bool]) -> None:
        """Until ``until()`` holds after an event, or ``timeout`` seconds."""
        if until():
            return
        waiter = self._waiter = self.loop.create_future()
        self._until = until
        handle = self.loop.call_later(max(timeout, 0.0), _settle, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            self._until = _never
            handle.cancel()

    async def stop_group(self, grace: float) -> None:
        """TERM the group (the leader may be gone, its children not), KILL what is left after ``grace``."""
        pgid = self.popen.pid
        if self.exited and not group_alive(pgid):
            return
        signal_group(pgid, signal.SIGTERM)
        end = time.monotonic() + grace
        while True:
            if self.exited and not group_alive(pgid):
                return
            left = end - time.monotonic()
            if left <= 0:
                break
            # the leader's exit wakes the run; leftovers of the group are looked for now and then
            if self.exited:
                await self.wait(min(left, POLL_SECONDS), _never)
            else:
                await self.wait(left, self.has_exited)
        signal_group(pgid, signal.SIGKILL)
        limit = max(grace, 1.0)
        await self._until_exited(limit)
        # SIGKILL is delivered when each member next runs: on a busy machine a killed member can
        # still show as running for a moment after the leader is gone. The call returns once
        # none does, so "stopped" means stopped.
        end = time.monotonic() + limit
        while group_alive(pgid) and (left := end - time.monotonic()) > 0:
            await self.wait(min(left, POLL_SECONDS), _never)

    async def _until_exited(self, limit: float) -> None:
        end = time.monotonic() + limit
        while not self.exited and (left := end - time.monotonic()) > 0:
            await self.wait(left, self.has_exited)

    async def drain(self, grace: float) -> None:
        """Read what is left in the pipes until they end, for ``grace`` seconds at most."""
        self._let_go()
        end = time.monotonic() + grace
        while self._readers and (left := end - time.monotonic()) > 0:
            await self.wait(left, self.pipes_ended)

    async def close(self) -> None:
        """Release the pipes; kill and reap the program if it still runs (no zombie is left)."""
        self.release()
        if not self.exited:
            signal_group(self.popen.pid, signal.SIGKILL)
            await self._until_exited(2.0)
        if not self.exited:  # stuck in the kernel: reaped off the loop when it dies
            self._close_pidfd()
            if self._reaper is None:
                threading.Thread(target=self.popen.wait, daemon=True).start()

    def release(self) -> None:
        """Stop watching and close the pipes (what is unread stays unread)."""
        self._let_go()
        for fd in list(self._readers):
            self._unwatch(fd)
        self._close_stdin()


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Whether a running (not zombie) member of group ``pgid`` is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.scandir("/proc")
    except OSError:
        return True  # no procfs: trust kill(0)
    # Killed orphans are reaped by init, which in some containers takes seconds: their zombies
    # keep the group id alive but are not running.
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
