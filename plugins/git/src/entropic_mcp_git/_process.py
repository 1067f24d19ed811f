"""One git process watched from the event loop: pipes read with ``add_reader``, exit seen through a
pidfd — no worker thread and no child-watcher round trip per call."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

STDERR_LIMIT = 16 * 1024
_CHUNK = 1 << 16


class Pipe:
    """One of git's output pipes, read on the event loop (no thread) into memory up to ``limit``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        file: IO[bytes],
        limit: int,
        on_done: Callable[[Pipe], None],
        stop_at_limit: bool,
    ) -> None:
        self.loop, self.file, self.limit, self.stop_at_limit = loop, file, limit, stop_at_limit
        self.on_done: Callable[[Pipe], None] | None = on_done
        self.fd = file.fileno()
        self.chunks: list[bytes] = []
        self.size = 0
        self.over = False
        os.set_blocking(self.fd, False)
        loop.add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.finish()
            return
        if self.size < self.limit:
            self.chunks.append(data[: self.limit - self.size])
        self.size += len(data)
        if self.size > self.limit:
            self.over = True
            if self.stop_at_limit:
                self.finish()

    def finish(self) -> None:
        if self.on_done is not None:
            self.loop.remove_reader(self.fd)
            on_done, self.on_done = self.on_done, None
            on_done(self)

    def close(self) -> None:
        if self.on_done is not None:
            self.loop.remove_reader(self.fd)
            self.on_done = None
        self.file.close()

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)


class Process:
    """A git process watched from the event loop: its pipes and its exit (a pidfd, where the
    kernel has them), so a call costs no thread hop and no child-watcher round trip. The three
    events resolve one future, so the waiting call wakes once."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, argv: list[str], cwd: Path, env: dict[str, str], limit: int
    ) -> None:
        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self.loop = loop
        self.finished: asyncio.Future[None] = loop.create_future()
        self.pending = 3  # stdout, stderr, exit
        self.stdout = Pipe(loop, self.popen.stdout, limit, self._pipe_done, stop_at_limit=True)
        self.stderr = Pipe(loop, self.popen.stderr, STDERR_LIMIT, self._pipe_done, stop_at_limit=False)
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):
            waiter = loop.run_in_executor(None, self.popen.wait)
            waiter.add_done_callback(lambda _: self._one_done())
        else:
            loop.add_reader(self.pidfd, self._exit)

    def _pipe_done(self, pipe: Pipe) -> None:
        if pipe.over:
            # stop git now: the output is cut anyway, and its stderr only ends when it exits
            self.kill()
        self._one_done()

    def _exit(self) -> None:
        self._close_pidfd()
        self.popen.wait()
        self._one_done()

    def _one_done(self) -> None:
        self.pending -= 1
        if self.pending == 0 and not self.finished.done():
            self.finished.set_result(None)

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            self.loop.remove_reader(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None

    async def communicate(self) -> tuple[bytes, bytes, bool, int]:
        """Wait for both pipes to end and git to exit: (stdout, stderr, stdout cut, exit code)."""
        await self.finished
        exit_code = self.popen.returncode
        assert exit_code is not None
        return self.stdout.data, self.stderr.data, self.stdout.over, exit_code

    def kill(self) -> None:
        if self.popen.returncode is not None:
            return
        # git runs in its own session; its group includes anything it started (hooks are off,
        # but credential helpers, filters and gpg are not)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()

    def close(self) -> None:
        """Kill git if it still runs, release the pipes and the pidfd, and reap it (no zombie)."""
        self.kill()
        self.stdout.close()
        self.stderr.close()
        self._close_pidfd()
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:  # stuck in the kernel: reap it off the loop
            threading.Thread(target=self.popen.wait, daemon=True).start()
