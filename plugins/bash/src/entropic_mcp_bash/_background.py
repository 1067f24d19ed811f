"""Background runs: a command started now, read later, stopped with its whole process group.

Each run has one thread that reads its output pipe, watches the shell, enforces the timeout and
stops the group: the same guarantees as a foreground call (new session, stdin ``/dev/null``,
TERM then KILL for every member, the shell reaped, both pipe ends closed), without tying the run
to the event loop of the call that started it.
"""

from __future__ import annotations

import atexit
import codecs
import os
import select
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from entropic_mcp.toolkit import Sandbox, group_alive, sandbox_blocked, sandbox_for

from ._shared import shown_command

#: Seconds between the reader thread's checks of the shell, the deadline and a stop request.
POLL = 0.1
READ_SIZE = 65536
TAIL_BYTES = 65536
#: Runs not yet ended, killed at interpreter exit: a host that exits without closing the server
#: must not leave them running in their own sessions.
_LIVE: weakref.WeakSet[BackgroundRun] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _kill_leftovers() -> None:
    with _LIVE_LOCK:
        runs = list(_LIVE)
    for run in runs:
        if run.running:
            run._signal(signal.SIGKILL)


class BackgroundRun:
    """One command running in the background; ``read()`` returns what it printed since the last read.

    Unread output is capped at ``max_unread_bytes``: beyond it the oldest unread bytes are
    dropped (and counted), so a chatty run costs bounded memory however long it goes unread.
    """

    def __init__(
        self,
        run_id: str,
        argv: Sequence[str],
        *,
        command: str,
        conversation: str,
        cwd: Path,
        env: Mapping[str, str] | None,
        timeout: float,
        max_unread_bytes: int,
        grace: float,
        sandbox: Sandbox | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.command = command
        self.conversation = conversation
        self.cwd = cwd
        self.timeout = timeout
        self.grace = grace
        self.max_unread = max_unread_bytes
        #: Where output goes instead of this process's unread buffer (a shared run's spool).
        self._sink = sink
        self.started = time.monotonic()
        self.ended: float | None = None
        self.status = "running"  # running | exited | killed | timeout
        self.exit_code: int | None = None
        self.total = 0
        self._unread = bytearray()
        # The last bytes printed, read or not: a reader that polls while the run goes on has
        # taken the sandbox's refusal by the time the run ends, and the note must still see it.
        self._tail = bytearray()
        self._dropped = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self.sandbox = sandbox if sandbox is not None else sandbox_for("bash")
        prepared = self.sandbox.prepare(argv, cwd=cwd, env=env)
        self._prepared = prepared
        self._spawned = threading.Event()
        self._spawn_error: BaseException | None = None
        # The watcher thread starts the shell: a sandboxed run dies with the thread that started
        # it (bwrap's parent-death signal), and this thread lives exactly as long as the run.
        self._thread = threading.Thread(target=self._start_and_watch, name=f"bash-{run_id}", daemon=True)
        self._thread.start()
        self._spawned.wait()
        if self._spawn_error is not None:
            prepared.close()
            raise self._spawn_error
        with _LIVE_LOCK:
            _LIVE.add(self)

    def _start_and_watch(self) -> None:
        try:
            read_fd, write_fd = os.pipe()
            try:
                self._proc = self._prepared.popen(
                    stdin=subprocess.DEVNULL,
                    stdout=write_fd,
                    stderr=write_fd,
                    cwd=self.cwd,
                    start_new_session=True,
                    close_fds=True,
                )
            except BaseException:
                os.close(read_fd)
                raise
            finally:
                os.close(write_fd)
        except BaseException as exc:  # raised in the caller's thread by __init__
            self._spawn_error = exc
            self._done.set()
            self._spawned.set()
            return
        self._fd = read_fd
        self._spawned.set()
        try:
            self._watch()
        finally:
            self._prepared.close()

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def elapsed_ms(self) -> int:
        end = self.ended if self.ended is not None else time.monotonic()
        return round((end - self.started) * 1000)

    def read(self) -> tuple[str, int]:
        """The output printed since the last read, and how many unread bytes were dropped."""
        with self._lock:  # the decoder keeps a split character between reads: one reader at a time
            data = bytes(self._unread)
            dropped = self._dropped
            self._unread.clear()
            self._dropped = 0
            return self._decoder.decode(data, final=self._done.is_set()), dropped

    def unread_bytes(self) -> int:
        with self._lock:
            return len(self._unread)

    def stop(self) -> None:
        """Ask the run to stop its group (TERM, then KILL after the grace); returns at once."""
        self._stop.set()
        self._signal(signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run has ended and been cleaned up; True when it has."""
        return self._done.wait(timeout)

    # -- the watcher thread ------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        with self._lock:
            self.total += len(data)
            self._unread += data
            self._tail += data
            if len(self._tail) > TAIL_BYTES:
                del self._tail[: len(self._tail) - TAIL_BYTES]
            if self._sink is not None:
                self._sink(data)
                return
            excess = len(self._unread) - self.max_unread
            if excess > 0:
                del self._unread[:excess]
                self._dropped += excess

    def _read_available(self, wait: float) -> bool:
        """Read what the pipe holds (waiting up to ``wait``); False at end of file."""
        try:
            ready, _, _ = select.select([self._fd], [], [], wait)
        except (OSError, ValueError):
            return False
        if not ready:
            return True
        try:
            data = os.read(self._fd, READ_SIZE)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        self._feed(data)
        return True

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self._proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _group_alive(self) -> bool:
        return group_alive(self._proc.pid)

    def _watch(self) -> None:
        deadline = self.started + self.timeout
        eof = False
        reason = "exited"
        try:
            while self._proc.poll() is None:
                if self._stop.is_set():
                    reason = "killed"
                    break
                if time.monotonic() >= deadline:
                    reason = "timeout"
                    break
                if not eof:
                    eof = not self._read_available(POLL)
                else:
                    time.sleep(POLL)
            if self._stop.is_set():
                reason = "killed"  # the TERM of stop() may end the shell before the loop sees the request
            self._stop_group()
            code = self._proc.wait()
            # Whatever is still in the pipe; a process that left the group may hold it open.
            end = time.monotonic() + self.grace
            while not eof and time.monotonic() < end:
                eof = not self._read_available(min(POLL, max(0.0, end - time.monotonic())))
            if reason == "exited":
                self.exit_code = 128 - code if code < 0 else code
                self._note_blocked()
        finally:
            if self._proc.returncode is None:
                self._signal(signal.SIGKILL)
                self._proc.wait()
            os.close(self._fd)
            self.ended = time.monotonic()
            # Reported only now: "exited", "killed" or "timeout" means every process is gone.
            self.status = reason
            self._done.set()

    def _note_blocked(self) -> None:
        with self._lock:
            tail = bytes(self._tail).decode("utf-8", "replace")
        note = sandbox_blocked(tail, self.sandbox, exit_code=self.exit_code)
        if note is not None:
            self._feed(f"\n{note}\n".encode())

    def _stop_group(self) -> None:
        """TERM the group, KILL what is left after the grace; the shell itself is reaped by the caller."""
        if self._proc.poll() is not None and not self._group_alive():
            return
        self._signal(signal.SIGTERM)
        end = time.monotonic() + self.grace
        while time.monotonic() < end:
            if self._proc.poll() is not None and not self._group_alive():
                return
            self._read_available(0.02)
        self._signal(signal.SIGKILL)
        self._proc.wait()
        end = time.monotonic() + self.grace
        while self._group_alive() and time.monotonic() < end:
            time.sleep(0.02)


def describe(run: BackgroundRun) -> dict[str, object]:
    """A run's status as the tools report it."""
    data: dict[str, object] = {
        "run_id": run.run_id,
        "command": shown_command(run.command),
        "status": run.status,
        "elapsed_ms": run.elapsed_ms(),
    }
    if run.exit_code is not None:
        data["exit_code"] = run.exit_code
    return data
