"""The persistent sandbox (``_sandbox._zygote``): one ``bwrap`` per policy, commands started inside."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from entropic_mcp._config import config_from_dict
from entropic_mcp._pipeline._rules import PermissionRules
from entropic_mcp._sandbox import HostSandbox, Sandbox, _zygote, find
from entropic_mcp.toolkit import run_process, run_process_sync

FOUND = find()
pytestmark = pytest.mark.skipif(
    FOUND.path is None and os.environ.get("CI") != "true", reason=f"no working bwrap here: {FOUND.problem}"
)


@pytest.fixture(autouse=True)
def fresh_pool():
    _zygote.POOL.stop_all()
    _zygote.POOL.broken = None
    yield
    _zygote.POOL.stop_all()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "entropic-mcp.toml").write_text("", encoding="utf-8")
    return project


def bash_box(root: Path, deny: tuple[str, ...] = ()) -> Sandbox:
    config = config_from_dict({"sandbox": {"mode": "required"}, "permissions": {"deny": list(deny)}}, root=root)
    return HostSandbox(config, PermissionRules(config.permissions), found=FOUND).for_server("bash")


def run(sb: Sandbox, script: str, root: Path, timeout: float = 20) -> tuple[int | None, str, bool]:
    done = run_process_sync(["bash", "-c", script], cwd=root, timeout=timeout, merge_stderr=True, sandbox=sb)
    return done.exit_code, done.stdout.text(), done.timed_out


def alive_with(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def the_instance() -> _zygote.Instance:
    (instance,) = _zygote.POOL.instances()
    return instance


def spawner_pid(instance: _zygote.Instance) -> int:
    """The python spawner inside the instance's bwrap (the outer bwrap's grandchild)."""
    pid = instance.popen.pid
    for _ in range(2):
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            pid = int(fh.read().split()[0])
    return pid


def test_commands_run_in_one_persistent_instance_with_the_sandboxs_guarantees(root):
    sb = bash_box(root)
    code, out, _ = run(
        sb,
        "echo in > new.txt; touch /etc/zygote-test; echo $ENTROPIC_MCP_TOKEN; grep NoNewPrivs /proc/self/status",
        root,
    )
    first = the_instance()
    assert (root / "new.txt").read_text() == "in\n"
    assert "Read-only file system" in out and not Path("/etc/zygote-test").exists()
    assert "NoNewPrivs:\t1" in out
    code, out, _ = run(sb, "exit 7", root)
    assert code == 7
    assert the_instance() is first


@pytest.mark.parametrize(
    "script",
    [
        "setsid sleep {m} & disown; true",
        "( ( sleep {m} & ) & ); true",
        "nohup sleep {m} >/dev/null 2>&1 & true",
        "python3 -c \"import os\nif os.fork()==0:\n os.setsid()\n if os.fork()==0: os.execvp('sleep',['sleep','{m}'])\"",
    ],
    ids=["setsid", "double fork", "nohup", "python daemon"],
)
def test_what_a_call_left_running_is_gone_when_the_call_returns(root, script):
    marker = f"6{abs(hash(script)) % 1000}.{os.getpid()}"
    code, _, _ = run(bash_box(root), script.format(m=marker), root)
    assert code == 0
    assert _zygote.POOL.instances(), "the call did not go through a persistent sandbox"
    assert alive_with(marker) == []  # at once: the reaper reports only after killing them


def test_concurrent_calls_run_side_by_side_in_one_instance(root):
    sb = bash_box(root)

    async def both() -> list[str]:
        # Each waits for the other's file: they finish only if both run at the same time.
        a = run_process(
            ["bash", "-c", "touch a; until [ -e b ]; do sleep 0.01; done; echo A"], cwd=root, timeout=20, sandbox=sb
        )
        b = run_process(
            ["bash", "-c", "touch b; until [ -e a ]; do sleep 0.01; done; echo B"], cwd=root, timeout=20, sandbox=sb
        )
        done = await asyncio.gather(a, b)
        return [d.stdout.text() for d in done if not d.timed_out]

    assert asyncio.run(both()) == ["A\n", "B\n"]
    assert len(_zygote.POOL.instances()) == 1


def test_a_timeout_kills_the_command_and_its_leftovers_through_the_instance(root):
    marker = f"7123.{os.getpid()}"
    code, _, timed_out = run(bash_box(root), f"setsid sleep {marker} & sleep {marker}", root, timeout=0.5)
    assert timed_out and code is None
    assert alive_with(marker) == []
    assert run(bash_box(root), "echo after", root)[1] == "after\n"


def test_a_dead_spawner_is_replaced_and_the_next_call_runs(root):
    sb = bash_box(root)
    assert run(sb, "true", root)[0] == 0
    first = the_instance()
    os.kill(spawner_pid(first), signal.SIGKILL)
    first.popen.wait(10)
    code, out, _ = run(sb, "echo again", root)
    assert (code, out) == (0, "again\n"), out
    assert the_instance() is not first and _zygote.POOL.broken is None


def test_a_changed_deny_rule_starts_a_fresh_instance_and_stops_the_old(root):
    (root / "notes.txt").write_text("secret\n", encoding="utf-8")
    assert run(bash_box(root), "cat notes.txt", root)[1] == "secret\n"
    old = the_instance()
    code, out, _ = run(bash_box(root, deny=("filesystem.read_file:notes.txt",)), "cat notes.txt", root)
    assert code != 0 and "secret" not in out
    assert the_instance() is not old
    old.popen.wait(10)  # retired with no call running: stopped


def test_a_server_killed_with_sigkill_leaves_no_process(root):
    marker = f"8123.{os.getpid()}"
    script = textwrap.dedent(
        f"""
        import os, subprocess
        from pathlib import Path
        from entropic_mcp._config import config_from_dict
        from entropic_mcp._sandbox import HostSandbox
        sb = HostSandbox(config_from_dict({{"sandbox": {{"mode": "required"}}}}, root=Path({str(root)!r}))).for_server("bash")
        prepared = sb.prepare(["bash", "-c", "setsid sleep $M & (sleep $M &); sleep $M"], cwd={str(root)!r}, env={{**os.environ, "M": os.environ["MARK"]}})
        process = prepared.popen(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd={str(root)!r})
        print(type(process).__name__, flush=True)
        process.wait()
        """
    )
    env = {**os.environ, "MARK": marker}
    server = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "Process"  # started by a persistent sandbox
        end = time.monotonic() + 20
        while len(alive_with(marker)) < 3 and time.monotonic() < end:
            time.sleep(0.05)  # polling the process table for a bounded time
        assert len(alive_with(marker)) == 3
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
    end = time.monotonic() + 20
    while alive_with(marker) and time.monotonic() < end:
        time.sleep(0.05)  # the kernel ends the PID namespace: bounded wait for it
    assert alive_with(marker) == []


def test_the_per_call_bwrap_is_used_when_no_instance_can_start(root, monkeypatch, caplog):
    monkeypatch.setattr(_zygote, "SPAWNER", "import sys; sys.exit(3)")
    code, out, _ = run(bash_box(root), "echo fallback", root)
    assert (code, out) == (0, "fallback\n")
    assert _zygote.POOL.broken is not None
    assert "each command gets its own bwrap" in caplog.text


def test_a_command_that_stops_its_reaper_still_leaves_nothing_running(root, monkeypatch):
    monkeypatch.setattr(_zygote.Watchdog, "LATE", 0.5)
    marker = f"9123.{os.getpid()}"
    code, _, _ = run(bash_box(root), f"setsid sleep {marker} & kill -STOP $PPID; true", root, timeout=20)
    assert code == -9 or code == 128 + 9 or code is None
    assert alive_with(marker) == []


def test_a_server_that_exits_leaves_no_placeholder_behind(root):
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from entropic_mcp._config import config_from_dict
        from entropic_mcp._sandbox import HostSandbox
        from entropic_mcp.toolkit import run_process_sync
        sb = HostSandbox(config_from_dict({{"sandbox": {{"mode": "required"}}}}, root=Path({str(root)!r}))).for_server("bash")
        done = run_process_sync(["bash", "-c", "ls -a"], cwd={str(root)!r}, timeout=20, sandbox=sb)
        print(done.stdout.text())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert ".mcp.json" in done.stdout  # covered while the sandbox ran
    assert sorted(p.name for p in root.iterdir()) == ["entropic-mcp.toml"]


def test_an_ignore_file_written_between_two_calls_hides_the_file_at_once(root):
    """The policy is kept between calls (a burst of commands works it out once), but never past
    a change of the ignore file: the very next call has the new mounts."""
    (root / "notes.txt").write_text("secret\n", encoding="utf-8")
    sb = bash_box(root)
    assert run(sb, "cat notes.txt", root)[1] == "secret\n"
    (root / ".entropicignore").write_text("notes.txt\n", encoding="utf-8")
    code, out, _ = run(sb, "cat notes.txt", root)
    assert code != 0 and "secret" not in out


def test_a_large_command_line_runs_in_the_instance_and_an_oversized_one_is_e2big(root):
    """A request larger than the default socket buffer (about 200 KiB) still goes to the
    instance; one larger than the spawner takes is refused as exec refuses it, and neither
    gives the persistent sandbox up."""
    import errno

    sb = bash_box(root)
    words = ["x" * 100_000] * 3
    done = run_process_sync(["bash", "-c", 'echo "$#"', "_", *words], cwd=root, timeout=20, sandbox=sb)
    assert done.stdout.text() == "3\n"
    assert _zygote.POOL.broken is None and len(_zygote.POOL.instances()) == 1
    with pytest.raises(OSError) as refused:
        run_process_sync(["bash", "-c", "true", "_", *["x" * 100_000] * 12], cwd=root, timeout=20, sandbox=sb)
    assert refused.value.errno == errno.E2BIG
    assert _zygote.POOL.broken is None
    assert run(sb, "echo after", root)[1] == "after\n"


def private_tmp_check() -> str:
    """The spawner's own test of where it may wipe, as a script printing what it finds."""
    start = _zygote.SPAWNER.index("def private_tmp():")
    end = _zygote.SPAWNER.index("PRIVATE = private_tmp()")
    return "import os\n" + _zygote.SPAWNER[start:end] + "print(repr(private_tmp()))\n"


def test_the_spawner_wipes_only_a_private_tmp_of_its_own_pid_namespace(tmp_path):
    # Started outside bwrap (by hand, a test) the spawner must not empty the host's /tmp.
    outside = subprocess.run([sys.executable, "-c", private_tmp_check()], capture_output=True, text=True, check=True)
    assert outside.stdout.strip() == "()"
    assert FOUND.path is not None
    # The check needs only ``os``: the base interpreter runs it, and a checkout under /tmp (its
    # venv's python hidden by the fresh tmpfs) gets the interpreter's directory bound back.
    python = os.path.realpath(sys.executable)
    rebind = []
    if python.startswith("/tmp/"):
        rebind = ["--ro-bind", os.path.dirname(python), os.path.dirname(python)]
    inside = subprocess.run(
        [
            FOUND.path,
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            *rebind,
            "--unshare-pid",
            "--die-with-parent",
            "--",
            python,
            "-c",
            private_tmp_check(),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert inside.stdout.strip() == "('/tmp', '/dev/shm')"
    # a PID namespace of its own but the host's /tmp: nothing is wiped there either
    shared = subprocess.run(
        [
            FOUND.path,
            "--bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--unshare-pid",
            "--die-with-parent",
            "--",
            sys.executable,
            "-c",
            private_tmp_check(),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shared.stdout.strip() == "('/dev/shm',)"
