"""Persistent sandboxes: one ``bwrap`` per policy, a small spawner inside starting each command.

Setting up a user and mount namespace costs more than ``bash -c true`` itself (see
docs/decisions.md): a ``bwrap`` per command made ``bash.execute "true"`` ten times slower than
the shell. Here one ``bwrap`` instance runs per distinct policy (the exact namespaces and
mounts a per-call ``bwrap`` would get), with a spawner inside (``python3 -I -S``, the script
below; it imports nothing of entropic-mcp). The host sends each command's argv, working
directory and environment over an inherited ``SOCK_SEQPACKET`` socket, with its stdin, stdout,
stderr and a per-call socket passed as file descriptors in the same message. One of the
spawner's reapers (``PR_SET_CHILD_SUBREAPER``, forked once and reused call after call) takes
it, starts the command as the leader of its own process group (``posix_spawn``) and sends back
a pidfd of it (the host reads the command's host pid from it, so signalling the group works as
for any child); when the command ends the reaper kills whatever it left (``setsid``, double
fork and ``nohup`` children re-parent to the reaper), reaps it all and only then reports the
wait status: "exited" still means nothing of the call runs. A call costs the spawner itself
nothing (idle reapers are counted in a pipe, not reported to it). The server's death ends the
instance (``--die-with-parent`` from a thread that lives as long as the instance), and with it
the PID namespace.
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("entropic_mcp.sandbox")

#: Seconds an instance with no running call stays up (its placeholders exist as long as it does).
IDLE_SECONDS = 10.0
#: Instances kept at most; the least recently used idle ones beyond are stopped.
MAX_INSTANCES = 8
#: Seconds to wait for the spawner's answer to a start request before giving the instance up.
START_TIMEOUT = 10.0
#: The largest request (command line, directory, environment) a spawner takes: its reapers
#: receive into a buffer this size, kept for their lifetime.
MAX_REQUEST = (1 << 20) - 4096

SPAWNER = r"""
import array, ctypes, errno, fcntl, json, os, select, signal, socket, stat, sys
fd = int(sys.argv[1])
os.set_inheritable(fd, False)
control = socket.socket(fileno=fd)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: a command cannot ptrace the spawner or a reaper
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: what a dead reaper left comes here
ALL = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]

def children(me):
    # The kernel's list of a task's children (one read); a scan of /proc where it is missing.
    try:
        with open("/proc/%d/task/%d/children" % (me, me), "rb") as fh:
            listed = [int(pid) for pid in fh.read().split()]
    except OSError:
        listed = []
    # The list can miss a child created meanwhile ("not reliable" while children come and go):
    # an empty answer is checked with the scan, so a call's end never spins on a hidden child.
    return listed or scan(me)

def scan(me):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2:].split()[1]) == me:
                found.append(int(name))
    return found

def kill_all(me, first=None):
    # What a call left (or a dead reaper): killed and reaped, again for what re-parented to us
    # meanwhile (a double fork's grandchild), until nothing is left: waitpid's ECHILD says no
    # child of ours exists at all, running or a zombie (the common case costs no /proc read).
    while True:
        if first is not None:
            try:
                os.killpg(first, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass  # a zombie reaped: look again
        except ChildProcessError:
            return
        left = children(me)
        for child in left:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        for child in left:
            try:
                os.waitpid(child, 0)
            except ChildProcessError:
                pass

ENV = [b"", {}]

def environment(raw):
    # Commands of one server send the same environment call after call: decoded once.
    if raw != ENV[0]:
        ENV[1] = json.loads(raw)
        ENV[0] = raw
    return ENV[1]

def call(data, fds, sock, lock, taken):
    try:
        head, _, raw = data.partition(b"\n")
        request = json.loads(head)
        os.chdir(request["cwd"])
        argv = request["argv"]
        pid = os.posix_spawnp(
            argv[0], argv, environment(raw),
            file_actions=[(os.POSIX_SPAWN_DUP2, fds[0], 0), (os.POSIX_SPAWN_DUP2, fds[1], 1), (os.POSIX_SPAWN_DUP2, fds[2], 2)],
            setpgroup=0, setsigdef=ALL, setsigmask=(),
        )
    except OSError as exc:
        fcntl.flock(lock, fcntl.LOCK_UN)
        sock.send(json.dumps({"errno": exc.errno, "strerror": exc.strerror or ""}).encode())
        return
    finally:
        for f in fds:
            os.close(f)
    pidfd = os.pidfd_open(pid)
    socket.send_fds(sock, [b'{"pid": %d}' % pid], [pidfd])
    os.close(pidfd)
    taken()  # told after the start, off the command's path
    # Left a zombie (WNOWAIT) while its group is killed: its pid cannot be reused meanwhile, so
    # the group signalled is the command's (another call of this instance may start processes).
    # The host need not have read the pid first: a command reaped before that is one it never
    # needs to signal (``GONE``).
    while True:
        try:
            done = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            break
        except InterruptedError:
            continue
    code = done.si_status if done.si_code == os.CLD_EXITED else -done.si_status
    kill_all(os.getpid(), pid)
    fcntl.flock(lock, fcntl.LOCK_UN)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sock.send(b'{"code": %d}' % code)  # another call runs: the last one to end wipes
        return
    # The status first, then the wipe, off the call's path: the next call's start waits for it
    # (its shared lock), so it still finds /tmp empty.
    try:
        sock.send(b'{"code": %d}' % code)
    finally:
        wipe()
        fcntl.flock(lock, fcntl.LOCK_UN)

def remove(path, dev):
    # Only what lies on the namespace's own tmpfs: a writable directory bound inside /tmp (a
    # project under /tmp) is another file system, never entered.
    try:
        st = os.lstat(path)
    except OSError:
        return
    if st.st_dev != dev:
        return
    if stat.S_ISDIR(st.st_mode):
        try:
            names = os.listdir(path)
        except OSError:
            return
        for name in names:
            remove(os.path.join(path, name), dev)
        try:
            os.rmdir(path)
        except OSError:
            pass  # a mount point of a bound directory stays
    else:
        try:
            os.unlink(path)
        except OSError:
            pass

def private_tmp():
    # The wipe empties /tmp and /dev/shm: only where they are the namespace's own tmpfs, which
    # bwrap mounts for the spawner it starts as the second process of a fresh PID namespace. Run
    # anywhere else (by hand, a test without bwrap) the spawner would empty the host's /tmp: it
    # wipes nothing there.
    if os.getpid() != 2 or os.getppid() != 1:
        return ()
    try:
        with open("/proc/self/mounts", "rb") as fh:
            mounts = fh.read().split(b"\n")
    except OSError:
        return ()
    private = []
    for top in (b"/tmp", b"/dev/shm"):
        kind = None
        for line in mounts:  # the last mount on the path or a parent of it is the one seen there
            fields = line.split()
            if len(fields) > 2 and (fields[1] == top or top.startswith(fields[1].rstrip(b"/") + b"/")):
                kind = fields[2]
        if kind == b"tmpfs":  # bwrap's --tmpfs /tmp; /dev/shm lies in its --dev tmpfs
            private.append(top.decode())
    return tuple(private)

PRIVATE = private_tmp()

def wipe():
    # Each call's /tmp is empty: what the last calls wrote goes once none runs (a call waits
    # for the wipe, an exclusive flock; running calls hold shared ones). Concurrent calls of
    # one policy share /tmp while they overlap.
    for top in PRIVATE:
        try:
            dev = os.lstat(top).st_dev
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            remove(os.path.join(top, name), dev)

def receive(buffer, view):
    # Into a buffer kept for the reaper's life: a fresh megabyte per call was an mmap, page
    # faults and an munmap each time.
    size, ancillary, flags, _ = control.recvmsg_into([buffer], socket.CMSG_SPACE(4 * 4), socket.MSG_CMSG_CLOEXEC)
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return bytes(view[:size]), list(fds), flags

def reaper(state):
    # One call at a time, reused: its first start pays the fork's page faults, later ones do not.
    # The subtree is empty again before the next call is taken.
    me = os.getpid()
    lock = os.open(sys.executable, os.O_RDONLY | os.O_CLOEXEC)
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    while True:
        try:
            data, fds, flags = receive(buffer, view)
        except InterruptedError:
            continue
        if not data and not fds:
            os.write(state, b"x%010d" % me)
            return
        if len(fds) != 4 or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            if len(fds) == 4:  # a request over a megabyte: refused, as exec would refuse it
                reply = socket.socket(fileno=fds.pop())
                reply.send(json.dumps({"errno": errno.E2BIG, "strerror": os.strerror(errno.E2BIG)}).encode())
                reply.close()
            for f in fds:
                os.close(f)
            continue
        told = []

        def taken():
            # A spare's token taken, or the spawner asked for one more reaper: one idle reaper
            # is always ready. Done after the command started, off its path.
            if not told:
                told.append(1)
                try:
                    os.read(spare_r, 1)
                except BlockingIOError:
                    os.write(state, b"n%010d" % me)

        # family, type and protocol given: the socket object is made without asking the kernel
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fds[3])
        fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            call(data, fds[:3], sock, lock, taken)
        except Exception:
            kill_all(me, None)
            fcntl.flock(lock, fcntl.LOCK_UN)
        finally:
            sock.close()
        taken()
        os.write(spare_w, b".")  # idle again: one more spare

# The idle reapers beyond the first are counted by the bytes in the spare pipe, so a call costs
# the spawner no wake-up: a reaper that takes a call takes a byte, or, finding none, asks the
# spawner (state pipe) for another reaper; one that ends its call puts a byte back.
state_r, state_w = os.pipe()
spare_r, spare_w = os.pipe()
os.set_blocking(spare_r, False)
reapers, need, me = set(), 1, os.getpid()
while True:
    while need > 0:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(state_r)
                libc.prctl(36, 1, 0, 0, 0)
                reaper(state_w)
            except BaseException:
                code = 1
            os._exit(code)
        reapers.add(pid)
        need -= 1
    ready, _, _ = select.select([state_r], [], [], 1.0)
    if ready:
        records = os.read(state_r, 11 * 64)
        kinds = records[::11]
        if b"x" in kinds:
            break  # the host closed the socket: the instance ends (and its PID namespace)
        need += kinds.count(b"n")
    gone = 0
    while True:  # a reaper that died (killed by a command) leaves its call's processes here
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in reapers:
            reapers.discard(pid)
            gone += 1
    if gone:
        # Each may have been idle (its spare's byte stays in the pipe): one new reaper each, so
        # the bytes never outnumber the idle reapers (one too many does no harm).
        need += gone
        for child in children(me):
            if child not in reapers:
                try:
                    os.kill(child, signal.SIGKILL)
                except OSError:
                    pass
"""


_ENV_CACHE: tuple[dict[str, str], bytes] | None = None


def _encoded(env: dict[str, str]) -> bytes:
    """``env`` as JSON, the last one kept: a server sends the same environment call after call
    (about a hundred variables: 30 µs to encode here, as long to decode in the spawner, which
    keeps its last one too)."""
    global _ENV_CACHE
    cached = _ENV_CACHE
    if cached is not None and cached[0] == env:
        return cached[1]
    raw = json.dumps(env).encode()
    _ENV_CACHE = (dict(env), raw)
    return raw


class SpawnerGone(OSError):
    """The instance's spawner did not take the call (it died or stopped): start another."""


#: The pid of a command that was reaped before the host read its pid (it ended that fast). Above
#: the kernel's largest possible pid (PID_MAX_LIMIT, 2**22), so signalling the group finds no
#: process (``ProcessLookupError``) and ``group_alive`` says no: nothing of the call is left once
#: its status comes, and none may be signalled by a pid that is free for reuse.
GONE = (1 << 22) + 1


def _host_pid(pidfd: int) -> int:
    """The command's pid in the host's namespace (``GONE`` when it was reaped already)."""
    fd = os.open(f"/proc/self/fdinfo/{pidfd}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = os.read(fd, 4096)
    finally:
        os.close(fd)
    at = text.find(b"\nPid:")
    if at < 0:
        raise OSError("no Pid in the pidfd's fdinfo")
    pid = int(text[at + 5 :].split(None, 1)[0])
    return pid if pid > 0 else GONE


class Process:
    """A command started by a spawner, with what ``toolkit`` and bash use of ``subprocess.Popen``.

    ``pid`` is the command's pid as the host sees it (its process group's id too); ``exit_fd``
    becomes readable when the wait status arrives, after everything the call started is gone.
    """

    def __init__(self, instance: Instance, pid: int, call: socket.socket, stdin: Any, stdout: Any, stderr: Any):
        self.instance = instance
        self.pid = pid
        self.args: list[str] = []
        self._call = call
        self.exit_fd = call.fileno()
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def _finish(self, data: bytes) -> int:
        code = json.loads(data).get("code") if data else None
        # No status: the reaper or the whole instance died; its PID namespace took the call along.
        self.returncode = -9 if code is None else int(code)
        self._call.close()
        self.instance.call_ended()
        return self.returncode

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            try:
                data = self._call.recv(4096, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return None
            except OSError:
                data = b""
            return self._finish(data)

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            code = self.poll()
            if code is not None:
                return code
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            try:
                select.select([self.exit_fd], [], [], left)
            except (OSError, ValueError):  # closed by a concurrent poll
                continue

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)


class Instance:
    """One ``bwrap`` running the spawner, for one policy (``prefix``: its argv before ``--``)."""

    def __init__(self, prefix: Sequence[str], holds: Callable[[], None] | None) -> None:
        self.prefix = tuple(prefix)
        self._release = holds
        self._lock = threading.Lock()
        self.calls = 0
        self.last_used = time.monotonic()
        self.retired = False
        self.dead = False
        host, inner = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:  # room for a request up to MAX_REQUEST (the system may cap it lower: then E2BIG sooner)
            host.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 * MAX_REQUEST)
        except OSError:
            pass
        self.control = host
        started = threading.Event()
        failure: list[BaseException] = []

        def keep() -> None:
            # bwrap's parent-death signal follows the thread that started it: this one lives
            # exactly as long as the instance.
            try:
                self.popen = subprocess.Popen(
                    [*self.prefix, "--", sys.executable, "-I", "-S", "-c", SPAWNER, str(inner.fileno())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    pass_fds=(inner.fileno(),),
                    env={},
                    cwd="/",
                    start_new_session=True,
                )
            except BaseException as exc:
                failure.append(exc)
                started.set()
                return
            finally:
                inner.close()
            started.set()
            self.popen.wait()
            self._died()

        self._thread = threading.Thread(target=keep, name="sandbox-zygote", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            host.close()
            self._died()
            raise failure[0]

    def _died(self) -> None:
        with self._lock:
            if self.dead:
                return
            self.dead = True
            release, self._release = self._release, None
        try:
            self.control.close()
        except OSError:
            pass
        if release is not None:
            release()

    def start(
        self, argv: Sequence[str], *, cwd: str, env: dict[str, str], fds: Sequence[int]
    ) -> tuple[int, socket.socket]:
        """Start ``argv`` with ``fds`` as its stdin, stdout and stderr: (host pid, the call's socket).

        Raises:
            SpawnerGone: the spawner did not take the call (nothing started: try another instance).
            OSError: the program could not be started (its errno, as ``subprocess.Popen`` raises).
        """
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request = json.dumps({"argv": list(argv), "cwd": cwd}).encode() + b"\n" + _encoded(env)
        with self._lock:
            if self.dead or self.retired:
                mine.close()
                theirs.close()
                raise SpawnerGone("instance stopped")
            self.calls += 1
            self.last_used = time.monotonic()
        try:
            try:
                if len(request) > MAX_REQUEST:
                    raise OSError(errno.E2BIG, f"{os.strerror(errno.E2BIG)} (command line and environment over 1 MiB)")
                socket.send_fds(self.control, [request], [*fds, theirs.fileno()])
            except OSError as exc:
                if exc.errno == errno.E2BIG:
                    raise
                if exc.errno == errno.EMSGSIZE:  # the system's socket buffers are smaller
                    raise OSError(errno.E2BIG, f"{os.strerror(errno.E2BIG)} ({exc.strerror})") from None
                raise SpawnerGone(str(exc)) from None
            finally:
                theirs.close()
            ready, _, _ = select.select([mine], [], [], START_TIMEOUT)
            if not ready:
                self.stop()
                raise SpawnerGone("the spawner did not answer")
            data, got, _, _ = socket.recv_fds(mine, 512, 1)
            if not data:
                raise SpawnerGone("the spawner ended")
            answer = json.loads(data)
            if "errno" in answer:
                raise OSError(answer["errno"], answer["strerror"])
            try:
                pid = _host_pid(got[0])
            except BaseException:
                for fd in got:
                    os.close(fd)
                raise
            WATCHDOG.watch(self, got[0], mine)
            return pid, mine
        except BaseException:
            mine.close()
            self.call_ended()
            raise

    def call_ended(self) -> None:
        with self._lock:
            self.calls -= 1
            self.last_used = time.monotonic()
            stop = self.retired and self.calls == 0
        if stop:
            self.stop()

    def idle_for(self) -> float:
        with self._lock:
            return 0.0 if self.calls else time.monotonic() - self.last_used

    def retire(self) -> None:
        """No new calls; stopped once its running calls end."""
        with self._lock:
            self.retired = True
            stop = self.calls == 0
        if stop:
            self.stop()

    def stop(self, *, wait: bool = False) -> None:
        """End the instance: its ``bwrap`` is killed, and the PID namespace with everything in it;
        its placeholders go once it is gone (``wait``: before this returns)."""
        with self._lock:
            self.retired = True
        try:
            self.control.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        popen = getattr(self, "popen", None)
        if popen is not None and popen.poll() is None:
            try:
                popen.kill()
            except OSError:
                pass
        if wait and self._thread is not threading.current_thread():
            self._thread.join(10)


class Watchdog:
    """Stops an instance whose reaper does not report a call it should have ended.

    A command can stop its own reaper (``kill -STOP $PPID``: same user, same PID namespace); its
    leftovers would then outlive the call. Once the command itself has exited (its pidfd), the
    status must follow within ``LATE`` seconds, or the whole instance is killed, and its PID
    namespace with everything in it.

    One thread looks at every call every ``TICK`` seconds (it is not woken by a call's start or
    end) and stays for ``LINGER`` seconds after the last one ended, so a burst of calls starts
    it once.
    """

    LATE = 5.0
    TICK = 0.5
    LINGER = IDLE_SECONDS

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[int, tuple[Instance, socket.socket, float | None]] = {}
        self._thread: threading.Thread | None = None

    def watch(self, instance: Instance, pidfd: int, call: socket.socket) -> None:
        with self._lock:
            self._calls[pidfd] = (instance, call, None)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sandbox-watchdog", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        empty_since: float | None = None
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:
                if self._calls:
                    empty_since = None
                elif empty_since is None:
                    empty_since = now
                elif now - empty_since >= self.LINGER:
                    self._thread = None
                    return
                waiting = [fd for fd, (_, _, exited) in self._calls.items() if exited is None]
                sockets = [call.fileno() for _, call, _ in self._calls.values() if call.fileno() != -1]
            # A look, not a wait: a call's end does not wake this thread (it costs the server
            # nothing per call); a command's exit is seen within TICK of happening.
            ready: list[tuple[int, int]] = []
            if waiting or sockets:
                poller = select.poll()
                for fd in (*waiting, *sockets):
                    poller.register(fd, select.POLLIN)
                try:
                    ready = poller.poll(0)
                except OSError:  # a socket closed meanwhile: looked at below
                    pass
            readable = {fd for fd, _ in ready}
            now = time.monotonic()
            late = []
            with self._lock:
                for fd in list(self._calls):
                    instance, call, exited = self._calls[fd]
                    # reported (readable, or read and closed by the host) or the instance is gone
                    if call.fileno() in readable or call.fileno() == -1 or instance.dead:
                        del self._calls[fd]
                        os.close(fd)
                    elif exited is None and fd in readable:
                        self._calls[fd] = (instance, call, now)
                    elif exited is not None and now - exited > self.LATE:
                        late.append(instance)
                        del self._calls[fd]
                        os.close(fd)
            for instance in late:
                log.warning("sandbox: a call's reaper did not report in %.0f s; its sandbox is stopped", self.LATE)
                instance.stop()


WATCHDOG = Watchdog()


class Pool:
    """The running instances, one per policy; a changed policy of the same family retires the old one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._instances: dict[tuple[str, ...], Instance] = {}
        self._families: dict[object, tuple[str, ...]] = {}
        self.broken: str | None = None
        self._timer: threading.Timer | None = None

    def get(self, prefix: tuple[str, ...], family: object, holds: Callable[[], Callable[[], None] | None]) -> Instance:
        with self._lock:
            instance = self._instances.get(prefix)
            if instance is not None and not instance.dead and not instance.retired:
                self._families[family] = prefix
                return instance
            old = self._families.get(family)
            retire = [self._instances.pop(old)] if old is not None and old in self._instances and old != prefix else []
            self._instances.pop(prefix, None)
            try:
                instance = Instance(prefix, holds())
            except OSError as exc:  # bwrap or the interpreter could not be started
                raise SpawnerGone(str(exc)) from exc
            self._instances[prefix] = instance
            self._families[family] = prefix
            if len(self._instances) > MAX_INSTANCES:
                idle = sorted((i for i in self._instances.values() if i is not instance), key=lambda i: i.last_used)
                for extra in idle[: len(self._instances) - MAX_INSTANCES]:
                    retire.append(self._instances.pop(extra.prefix))
            self._arm()
        for each in retire:
            each.retire()
        return instance

    def _arm(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(IDLE_SECONDS / 2, self._sweep)
            self._timer.daemon = True
            self._timer.start()

    def _sweep(self) -> None:
        with self._lock:
            self._timer = None
            idle = [p for p, i in self._instances.items() if i.dead or i.idle_for() >= IDLE_SECONDS]
            stopped = [self._instances.pop(p) for p in idle]
            if self._instances:
                self._arm()
        for each in stopped:
            each.retire()

    def instances(self) -> list[Instance]:
        with self._lock:
            return list(self._instances.values())

    def stop_all(self, *, wait: bool = True) -> None:
        """Stop every instance (the next command starts a fresh one); ``wait``: until they are gone."""
        with self._lock:
            stopped = list(self._instances.values())
            self._instances.clear()
            self._families.clear()
        for each in stopped:
            each.stop(wait=wait)


POOL = Pool()
# A server that exits normally stops its instances, so their placeholders do not stay behind.
atexit.register(POOL.stop_all)


_DEVNULL: int | None = None


def _devnull() -> int:
    """One ``/dev/null`` descriptor, passed to every command that gets it (the spawner dups it)."""
    global _DEVNULL
    if _DEVNULL is None:
        _DEVNULL = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    return _DEVNULL


def _pipe_ends(spec: Any, *, reading: bool, stdout_end: int | None = None) -> tuple[int, Any, bool]:
    """(the child's fd, the parent's file or None, whether the child's fd is ours to close)."""
    if spec == subprocess.PIPE:
        r, w = os.pipe()
        if reading:  # the child reads (stdin)
            return r, open(w, "wb", buffering=0), True
        return w, open(r, "rb", buffering=0), True
    if spec == subprocess.DEVNULL:
        return _devnull(), None, False
    if spec == subprocess.STDOUT:
        assert stdout_end is not None
        return stdout_end, None, False
    if isinstance(spec, int):
        return spec, None, False
    raise ValueError(f"unsupported stdio for a sandboxed start: {spec!r}")


def spawn(
    prefix: tuple[str, ...],
    family: object,
    holds: Callable[[], Callable[[], None] | None],
    argv: Sequence[str],
    *,
    cwd: str,
    env: dict[str, str],
    stdin: Any,
    stdout: Any,
    stderr: Any,
) -> Process:
    """Start ``argv`` in the instance for ``prefix`` (started now if none runs), retried once on a
    fresh instance when the spawner did not take the call.

    Raises:
        OSError: the program or the instance could not be started.
    """
    ends = []
    try:
        child_in, parent_in, close_in = _pipe_ends(stdin, reading=True)
        ends.append((child_in, parent_in, close_in))
        child_out, parent_out, close_out = _pipe_ends(stdout, reading=False)
        ends.append((child_out, parent_out, close_out))
        child_err, parent_err, close_err = _pipe_ends(stderr, reading=False, stdout_end=child_out)
        ends.append((child_err, parent_err, close_err))
        for attempt in (1, 2):
            instance = POOL.get(prefix, family, holds)
            try:
                pid, call = instance.start(argv, cwd=cwd, env=env, fds=(child_in, child_out, child_err))
            except SpawnerGone:
                instance.stop()
                if attempt == 2:
                    raise
                continue
            process = Process(instance, pid, call, parent_in, parent_out, parent_err)
            process.args = list(argv)
            for child, _, ours in ends:
                if ours:
                    os.close(child)
            return process
        raise AssertionError("unreachable")
    except BaseException:
        for child, parent, ours in ends:
            if ours:
                os.close(child)
            if parent is not None:
                parent.close()
        raise


def broken_once(reason: str) -> None:
    """Say once that instances cannot start (the per-call ``bwrap`` is used from now on)."""
    if POOL.broken is None:
        POOL.broken = reason
        log.warning("sandbox: a persistent sandbox could not start (%s); each command gets its own bwrap", reason)
