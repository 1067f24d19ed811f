"""Issue 22: the OS sandbox holds where the rules cannot judge, through a real `entropic-mcp serve`.

A corpus of commands that each do harm with plain bash (writes outside the project, changes to
the policy files, reads of denied paths, network connections, processes that outlive their
call) runs with ``[sandbox] mode = "required"`` under broad allow rules (``bash.execute:*``,
``python *``, ``git *``, ``make *``, ``find *``) through the official MCP client. Measured over
the whole corpus: 0 writes outside the writable set, 0 policy-file changes, 0 denied reads,
0 connections, 0 processes left after a call or after the server is killed with SIGKILL. A
representative subset is first shown doing its harm with ``mode = "off"``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sandbox_helpers import alive_with, gone, kill_marked, result_of

from conftest import ENTROPIC_MCP, connect, serve_env

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ERA = "2026-07-28"
ENV_CANARY = "CANARY-ENV-7f3a"
KEY_CANARY = "CANARY-KEY-19bd"
ALLOW = '"bash.execute:*", "bash.execute:python *", "bash.execute:git *", "bash.execute:make *", "bash.execute:find *"'
CONFIG = f"""\
[entropic_mcp]
plugins = ["bash"]
[storage]
backend = "none"
[permissions]
default = "allow"
auto_approve = true
allow = [{ALLOW}]
deny = ["filesystem.read_file:.env"]
[pipeline]
same_tool_limit = 10000
duplicate_stop_after = 10000
identical_failure_limit = 10000
[sandbox]
mode = "{{mode}}"
[servers.bash]
timeout_seconds = 20
"""
POLICY = ("entropic-mcp.toml", "entropic-mcp.local.toml", ".mcp.json", ".entropicignore", ".git/config")
HOOK = ".git/hooks/pre-commit"


# -- the corpus ----------------------------------------------------------------------------------
# {out}: a directory outside the project; {port}: a listener on the host's loopback; {m}: a marker
# in the argv of processes meant to outlive the call.

WRITE_METHODS = {
    "redirect": "echo pwned > {t}",
    "append": "echo pwned >> {t}",
    "tee": "echo pwned | tee {t}",
    "tee -a": "echo pwned | tee -a {t}",
    "dd": "echo pwned | dd of={t} status=none",
    "cp": "echo pwned > src/p && cp src/p {t}",
    "mv": "echo pwned > src/q && mv src/q {t}",
    "sort -o": "sort -o {t} src/a.py",
    "sed -i": "sed -i 's/^/pwned/' {t}",
    "truncate": "truncate -s 0 {t}",
    "python": "python3 -c \"open('{t}', 'w').write('pwned')\"",
    "python os": "python3 -c \"import os; fd = os.open('{t}', os.O_WRONLY | os.O_CREAT | os.O_TRUNC); os.write(fd, b'pwned')\"",
    "perl": 'perl -e \'open(F, ">", "{t}"); print F "pwned";\'',
    "find -exec": "find src -name a.py -exec cp {} {t} \\;",
    "xargs": "echo {t} | xargs -I@ sh -c 'echo pwned > @'",
    "git --output": "git log -1 --output={t}",
    "bash -c": "bash -c 'echo pwned > {t}'",
    "eval": "eval 'echo pwned > {t}'",
    "backslash-newline": "echo pwned > {t_split}",
    "rm": "rm -rf {t}",
    "ln -s chain": "ln -sf {t} src/link && echo pwned > src/link",
    "make --eval": "make -f /dev/null --eval='x: ; @echo pwned > {t}' x",
}
# {out} is under /tmp (inside the sandbox /tmp is a private one); {home} is a directory outside
# both /tmp and the project.
OUTSIDE_TARGETS = ("{out}/victim.txt", "{out}/new.txt", "{home}/victim.txt")
POLICY_TARGETS = (*POLICY, HOOK)

READS = {
    "cat": "cat {t}",
    "python": "python3 -c \"print(open('{t}').read())\"",
    "cp into root": "cp {t} src/copied.txt; cat src/copied.txt",
    "base64": "base64 {t}",
    "grep": "grep -r CANARY {t}",
    "find -exec": "find . -path ./{t} -exec cat {} \\;",
    "xargs": "echo {t} | xargs cat",
    "redirect in": 'while read -r l; do echo "$l"; done < {t}',
    "dd": "dd if={t} status=none",
    "tar": "tar cf - {t} | tar xOf -",
    "head": "head -c 100 {t}",
    "sort": "sort {t}",
    "git hash-object": "git hash-object -w {t} | xargs git cat-file -p",
    "ln -s": "ln -sf $PWD/{t} src/l2 && cat src/l2",
    "backslash-newline": "ca\\\nt {t}",
}
READ_TARGETS = (".env", "secrets/key")

NETWORK = {
    "/dev/tcp": "echo hi > /dev/tcp/127.0.0.1/{port}",
    "python socket": "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\"",
    "python urllib": "python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=3)\"",
    "curl": "curl -sS -m 3 http://127.0.0.1:{port}/",
    "curl localhost": "curl -sS -m 3 http://localhost:{port}/",
    "bash -c /dev/tcp": "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; echo hi >&3'",
    "python ipv6": "python3 -c \"import socket; socket.create_connection(('::1', {port}), timeout=3)\"",
    "git remote": "git ls-remote http://127.0.0.1:{port}/repo",
    "outside dns": "python3 -c \"import socket; socket.getaddrinfo('example.com', 80)\"",
    "curl outside": "curl -sS -m 3 http://93.184.215.14/",
}

PROCESSES = {
    # each escape completes before the command returns (its flag, the parent's wait): otherwise
    # the run's group kill can catch the process before it has left the group, and the
    # without-sandbox demonstration is a race
    "setsid": "setsid sh -c 'touch /tmp/esc-{m}; exec sleep {m}' & until [ -e /tmp/esc-{m} ]; do sleep 0.01; done; rm -f /tmp/esc-{m}; disown",
    "double fork": "( ( sleep {m} & ) & )",
    "nohup": "nohup sleep {m} >/dev/null 2>&1 &",
    "setsid double fork": "setsid bash -c '(sleep {m} &)'",
    "disown": "sleep {m} & disown -a",
    "python daemon": "python3 -c \"import os\nif os.fork() == 0:\n os.setsid()\n if os.fork() == 0: os.execvp('sleep', ['sleep', '{m}'])\nelse: os.wait()\"",
    "setsid nohup": "setsid nohup sleep {m} >/dev/null 2>&1 < /dev/null &",
    "trap ignoring": "bash -c 'trap \"\" TERM HUP; sleep {m}' &",
}


def split(target: str) -> str:
    """The target with a backslash-newline pair inside a word, which bash deletes."""
    head, _, tail = target.rpartition("/")
    cut = max(1, len(tail) // 2)
    return f"{head}/{tail[:cut]}\\\n{tail[cut:]}" if head else f"{tail[:cut]}\\\n{tail[cut:]}"


def corpus() -> list[tuple[str, str, str]]:
    """(class, name, command template) for every case."""
    cases = []
    for target in (*OUTSIDE_TARGETS, *POLICY_TARGETS):
        kind = "outside" if target.startswith(("{out}", "{home}")) else "policy"
        for name, method in WRITE_METHODS.items():
            cases.append(
                (kind, f"{name} -> {target}", method.replace("{t_split}", split(target)).replace("{t}", target))
            )
    for target in READ_TARGETS:
        for name, method in READS.items():
            cases.append(("read", f"{name} <- {target}", method.replace("{t}", target)))
    cases += [("network", name, command) for name, command in NETWORK.items()]
    cases += [("process", name, command) for name, command in PROCESSES.items()]
    return cases


CORPUS = corpus()


def test_the_corpus_is_large_and_covers_every_class():
    classes = {kind for kind, _, _ in CORPUS}
    assert len(CORPUS) >= 150
    assert classes == {"outside", "policy", "read", "network", "process"}


# -- the project and what is measured -------------------------------------------------------------


def make_project(tmp_path: Path, mode: str) -> tuple[Path, Path]:
    root = tmp_path / "project"
    root.mkdir()
    (root / "entropic-mcp.toml").write_text(CONFIG.format(mode=mode), encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("print(1)\n", encoding="utf-8")
    (root / ".env").write_text(f"TOKEN={ENV_CANARY}\n", encoding="utf-8")
    (root / "secrets").mkdir()
    (root / "secrets" / "key").write_text(f"{KEY_CANARY}\n", encoding="utf-8")
    (root / ".entropicignore").write_text("secrets/\n", encoding="utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "src"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=root, check=True)
    (root / ".git" / "hooks").mkdir(exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("original\n", encoding="utf-8")
    return root, outside


def snapshot(*dirs: Path) -> dict[str, str]:
    """Every file under ``dirs`` (and whether each policy path exists) with a hash of its bytes."""
    found = {}
    for top in dirs:
        for path in sorted(top.rglob("*")):
            if path.is_file() and not path.is_symlink():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def policy_state(root: Path) -> dict[str, str | None]:
    state: dict[str, str | None] = {}
    for name in (*POLICY, HOOK):
        path = root / name
        state[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
    return state


def canaries_in_files(root: Path) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and ".git" not in path.parts:
            if path.name in (".env", "key"):
                continue
            data = path.read_bytes()
            if ENV_CANARY.encode() in data or KEY_CANARY.encode() in data:
                hits.append(str(path))
    return hits


class Listener:
    """A TCP listener on the host's loopback (IPv4 and IPv6) counting the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("", 0), family=socket.AF_INET6, dualstack_ipv6=True)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


def params(root: Path, data_home: Path) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=str(ENTROPIC_MCP),
        args=["serve"],
        cwd=str(root),
        env=serve_env({"XDG_DATA_HOME": str(data_home), "ENTROPIC_MCP_TOKEN": "serve-token-canary"}),
    )


def fill(command: str, outside: Path, port: int, marker: str, home: Path | None = None) -> str:
    filled = command.replace("{out}", str(outside)).replace("{port}", str(port)).replace("{m}", marker)
    return filled.replace("{home}", str(home if home is not None else outside))


@pytest.fixture
def home_dir() -> Iterator[Path]:
    """A directory outside /tmp and the project (under the user's cache directory)."""
    import shutil
    import tempfile

    base = Path.home() / ".cache"
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="entropic-sandbox-test-", dir=base))
    (path / "victim.txt").write_text("original\n", encoding="utf-8")
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- with the sandbox ------------------------------------------------------------------------------


async def test_no_command_of_the_corpus_does_harm_with_the_sandbox_required(tmp_path, listener, home_dir):
    root, outside = make_project(tmp_path, "required")
    marker = f"7{os.getpid() % 1000}.{int(time.monotonic()) % 1000}"
    outside_before = snapshot(outside, home_dir)
    policy_before = policy_state(root)
    ran = refused = 0
    leaks: list[str] = []
    survivors: list[str] = []
    async with connect(params(root, tmp_path / "xdg"), ERA) as peer:
        for kind, name, template in CORPUS:
            command = fill(template, outside, listener.port, marker, home_dir)
            result = result_of(await peer.call("bash.execute", {"format": "json", "command": command}))
            if "exit_code" in result:
                ran += 1
            else:
                refused += 1  # the rules refused it before it ran: also no harm
            output = json.dumps(result)
            if ENV_CANARY in output or KEY_CANARY in output or "serve-token-canary" in output:
                leaks.append(f"{kind}: {name}")
            if kind == "process" and not gone(marker):
                survivors.append(name)
                kill_marked(marker)
    assert snapshot(outside, home_dir) == outside_before, "a write landed outside the project"
    assert policy_state(root) == policy_before, "a policy file changed"
    assert leaks == [] and canaries_in_files(root) == [] and canaries_in_files(outside) == []
    assert canaries_in_files(home_dir) == []
    assert listener.accepted == 0, "a connection reached the host"
    assert survivors == []
    # the boundary, not the rules, held: at least 150 of them ran (the rest were policy-file
    # writes the rules deny by identity before anything runs)
    assert ran >= 150, (ran, refused)


async def test_a_blocked_write_tells_the_model_which_path_and_which_setting(tmp_path):
    root, _ = make_project(tmp_path, "required")
    outside = Path("/usr/local")  # outside /tmp too (inside, /tmp is the private one)
    async with connect(params(root, tmp_path / "xdg"), ERA) as peer:
        result = result_of(await peer.call("bash.execute", {"format": "json", "command": f"touch {outside}/new.txt"}))
        net = result_of(
            await peer.call("bash.execute", {"format": "json", "command": "curl -sS -m 3 http://example.com/"})
        )
    assert result["exit_code"] != 0 and not (outside / "new.txt").exists()
    assert f"{outside}/new.txt" in result["output"] and "[sandbox.servers.bash]" in result["output"]
    assert "writable" in result["output"]
    assert "network = true" in net["output"]


def survivors_of_a_killed_server(tmp_path: Path, mode: str, marker: str) -> list[int]:
    """Start serve, leave escaping processes in a background and a foreground call, SIGKILL the
    server, and return what is still running with ``marker`` a bounded moment later."""
    root, _ = make_project(tmp_path, mode)
    escape = f"setsid sleep {marker} & (sleep {marker} &); nohup sleep {marker} >/dev/null 2>&1 &"
    serve = subprocess.Popen(
        [str(ENTROPIC_MCP), "serve"],
        cwd=root,
        env=serve_env({"XDG_DATA_HOME": str(tmp_path / "xdg")}),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert serve.stdin is not None and serve.stdout is not None

        def send(message: dict[str, Any]) -> None:
            assert serve.stdin is not None
            serve.stdin.write(json.dumps(message).encode() + b"\n")
            serve.stdin.flush()

        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        assert b'"id":1' in serve.stdout.readline().replace(b" ", b"")
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        background = {"command": f"{escape} sleep {marker}", "run_in_background": True}
        call = {"name": "bash.execute", "arguments": background}
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        assert b'"id":2' in serve.stdout.readline().replace(b" ", b"")
        call = {"name": "bash.execute", "arguments": {"command": f"{escape} sleep {marker}"}}
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        end = time.monotonic() + 20
        while len(alive_with(marker)) < 8 and time.monotonic() < end:
            time.sleep(0.05)  # a bounded look at the process table
        assert len(alive_with(marker)) >= 8
        serve.send_signal(signal.SIGKILL)
        serve.wait()
        gone(marker, within=5.0)
        return alive_with(marker)
    finally:
        serve.kill()
        serve.wait()
        for pipe in (serve.stdin, serve.stdout):
            if pipe is not None:
                pipe.close()


def test_no_process_outlives_a_server_killed_with_sigkill(tmp_path):
    marker = f"8{os.getpid() % 1000}.{int(time.monotonic()) % 1000}"
    try:
        assert survivors_of_a_killed_server(tmp_path, "required", marker) == []
    finally:
        kill_marked(marker)


# -- without it: the same commands do their harm ------------------------------------------------------

SUBSET = (
    ("outside", "redirect -> {out}/victim.txt"),
    ("outside", "python -> {out}/new.txt"),
    ("outside", "git --output -> {out}/new.txt"),
    ("outside", "find -exec -> {out}/new.txt"),
    ("policy", "python -> entropic-mcp.local.toml"),
    ("policy", "python -> .git/config"),
    ("policy", "perl -> .mcp.json"),
    ("read", "python <- .env"),
    ("read", "cat <- secrets/key"),
    ("network", "python socket"),
    ("network", "/dev/tcp"),
    ("process", "setsid"),
    ("process", "python daemon"),
)


async def test_the_same_commands_do_their_harm_with_the_sandbox_off(tmp_path, listener):
    root, outside = make_project(tmp_path, "off")
    marker = f"9{os.getpid() % 1000}.{int(time.monotonic()) % 1000}"
    chosen = {(kind, name): template for kind, name, template in CORPUS}
    harmed = []
    try:
        async with connect(params(root, tmp_path / "xdg"), ERA) as peer:
            for kind, name in SUBSET:
                outside_before, policy_before, accepted = snapshot(outside), policy_state(root), listener.accepted
                command = fill(chosen[(kind, name)], outside, listener.port, marker)
                output = json.dumps(result_of(await peer.call("bash.execute", {"format": "json", "command": command})))
                if kind == "outside":
                    did = snapshot(outside) != outside_before
                elif kind == "policy":
                    did = policy_state(root) != policy_before
                elif kind == "read":
                    did = ENV_CANARY in output or KEY_CANARY in output
                elif kind == "network":
                    with anyio.fail_after(10):
                        while listener.accepted == accepted:
                            await anyio.sleep(0.02)
                    did = True
                else:
                    did = bool(alive_with(marker))
                    kill_marked(marker)
                if did:
                    harmed.append((kind, name))
    finally:
        kill_marked(marker)
    assert harmed == list(SUBSET)


def test_processes_outlive_a_server_killed_with_sigkill_without_the_sandbox(tmp_path):
    marker = f"6{os.getpid() % 1000}.{int(time.monotonic()) % 1000}"
    try:
        assert len(survivors_of_a_killed_server(tmp_path, "off", marker)) >= 3
    finally:
        kill_marked(marker)
