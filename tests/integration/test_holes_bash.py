"""Issue 21, bash: hidden commands and option writes through a real `entropic-mcp serve`.

Every payload is first shown to do its harm with plain bash in a copy of the project; then the
same text, sent to ``bash.execute`` by the official client under the issue's rules (only echo,
printf and git status allowed, ``rm *`` and writes to ``secrets/*`` denied, plus the narrow
rules the docs recommend: ``git log*``, ``git grep*``, ``sort *``, ``make test *``), is refused and
nothing runs: the victim is still there, the denied and policy files are unchanged. A hostile
repository's ``core.fsmonitor`` does not run under ``git status *``, and a catastrophic
``bash.output`` filter answers while another client is served.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import HTTPServe, connect, start_http, stdio_params, stop, write_project

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ERA = "2026-07-28"
#: The issue asks for an answer within 1 s; generous for a loaded 2-core machine (before the fix
#: the filter held the interpreter for minutes).
LIVENESS_SECONDS = 3.0
HOSTILE_SECONDS = 30.0
PRECIOUS = "precious\n"
N = "\\\n"

CONFIG = """\
[entropic_mcp]
plugins = ["bash"]
[storage]
backend = "none"
[permissions]
default = "ask"
allow = [
    "bash.execute:echo *", "bash.execute:printf *", "bash.execute:git status *", "bash.execute:ls *",
    "bash.execute:git log*", "bash.execute:git grep*", "bash.execute:sort *", "bash.execute:make test *",
    "bash.output", "bash.list",
]
deny = ["bash.execute:rm *", "filesystem.write_file:secrets/*"]
# The rules alone must hold (the OS sandbox is defence in depth, and with it active an allow rule
# may let a command it bounds run unanalysed: docs/sandbox.md#rules-and-sandbox-together).
[sandbox]
mode = "off"
"""
LOCAL = "# local overrides\n"
PLANT = "printf '[core]\\n\\tfsmonitor = rm -f victim; false\\n'"

#: (payload, what plain bash harms). ``then`` runs after the payload (a planted config's victim).
CRITICAL = {
    "command substitution behind $<nl>(": (f'echo "${N}(rm -f victim)"', ""),
    "denied file behind a split target": (f"echo x > sec{N}rets/key", ""),
    "policy file behind a split name": (f"> entropic-mcp.local{N}.toml", ""),
    "git config behind a split directory": (f"{PLANT} >> .g{N}it/config", "git status"),
    "rm split past deny rm *": (f"r{N}m victim", ""),
}
HIGH = {
    "git log --output over git's config": ("git log --output=.git/config", ""),
    "git log --output over the active config": ("git log --output=entropic-mcp.toml", ""),
    "git log -p --output over a denied file": ("git log -p --output=secrets/key", ""),
    "git grep -O runs a pager": ("git grep -O'rm -f victim; :' rm", ""),
    "sort -o over a denied file": ("sort -o secrets/key s.txt", ""),
    "sort --output over the active config": ("sort --output=entropic-mcp.toml s.txt", ""),
    "make --eval runs make code": ("make test --eval='$(shell rm -f victim)'", ""),
    "make -f runs another makefile": ("make test -f evil.mk", ""),
}
PAYLOADS = {**CRITICAL, **HIGH}


def _git(root: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=env)


def build(root: Path) -> Path:
    write_project(root, CONFIG)
    (root / "entropic-mcp.local.toml").write_text(LOCAL)
    (root / "victim").write_text(PRECIOUS)
    (root / "secrets").mkdir()
    (root / "secrets" / "key").write_text(PRECIOUS)
    (root / "s.txt").write_text("rm victim\n")
    (root / "Makefile").write_text("test:\n\t@echo testing\n")
    (root / "evil.mk").write_text("test:\n\trm -f victim\n")
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    _git(root, "add", "s.txt", "Makefile")
    _git(root, "commit", "-q", "-m", "one")
    return root


def state(root: Path) -> dict[str, str | None]:
    """Everything a payload may harm."""
    names = ("victim", "secrets/key", "entropic-mcp.toml", "entropic-mcp.local.toml", ".git/config")
    return {name: (root / name).read_text() if (root / name).is_file() else None for name in names}


def _plain(root: Path, command: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "ENTROPIC_MCP_"))}
    subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True, timeout=30, check=False)


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_each_payload_does_its_harm_in_plain_bash(tmp_path: Path, name: str) -> None:
    root = build(tmp_path / "plain")
    before = state(root)
    payload, then = PAYLOADS[name]
    _plain(root, payload)
    if then:
        _plain(root, then)
    assert state(root) != before, f"{name}: the payload harms nothing in plain bash"


def text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def test_every_payload_is_refused_through_serve_and_nothing_runs(tmp_path: Path) -> None:
    root = build(tmp_path / "project")
    before = state(root)
    async with connect(stdio_params(root), ERA) as peer:
        # The rules do allow what they name: the server is not refusing everything.
        allowed = await peer.call("bash.execute", {"command": "echo served && git status --short"})
        assert not allowed.is_error and text(allowed).startswith("served\n")
        for name, (payload, then) in PAYLOADS.items():
            result = await peer.call("bash.execute", {"command": payload})
            assert result.is_error, f"{name}: {text(result)[:300]}"
            assert "permission" in text(result).lower() or "denied" in text(result).lower(), text(result)[:300]
            if then:
                await peer.call("bash.execute", {"command": then})
            assert state(root) == before, name
        split = await peer.call("bash.execute", {"command": f"ls{N}of"})
        assert split.is_error, "ls<nl>of is lsof, which allow ls * does not name"


async def test_a_hostile_repositorys_fsmonitor_does_not_run_under_git_status(tmp_path: Path) -> None:
    root = build(tmp_path / "hostile")
    _plain(tmp_path, f"cp -a {root} {tmp_path / 'copy'}")
    copy = tmp_path / "copy"
    _plain(copy, f"{PLANT} >> .git/config; git status")
    assert not (copy / "victim").exists(), "the planted fsmonitor does not run in plain bash"
    _plain(root, f"{PLANT} >> .git/config")
    async with connect(stdio_params(root), ERA) as peer:
        for command in ("git status", "git status --short", "echo x && git status"):
            result = await peer.call("bash.execute", {"command": command})
            assert not result.is_error, text(result)[:300]
            assert (root / "victim").read_text() == PRECIOUS, command


@pytest.fixture
def served(tmp_path: Path) -> Any:
    server = start_http(build(tmp_path / "served"))
    try:
        yield server
    finally:
        stop(server.process)


async def test_a_redos_filter_answers_and_another_client_is_served_meanwhile(served: HTTPServe) -> None:
    line = "a" * 40 + "b"
    # The harm: Python's re on this line does not finish in any reasonable time.
    probe = f"import re; re.search('(a+)+$', {line!r})"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", probe], timeout=2)
    timings: list[float] = []
    hostile: dict[str, Any] = {}

    async def attack() -> None:
        async with connect(served.url, ERA) as peer:
            started = await peer.call(
                "bash.execute", {"command": f"printf '%s\\n' {line}", "run_in_background": True, "format": "json"}
            )
            run_id = json.loads(text(started))["run_id"]
            while True:
                listed = json.loads(text(await peer.call("bash.list", {"format": "json"})))
                if all(run["status"] != "running" for run in listed["runs"]):
                    break
                await anyio.sleep(0.05)
            began = time.monotonic()
            hostile["result"] = await peer.call("bash.output", {"run_id": run_id, "filter": "(a+)+$", "format": "json"})
            hostile["seconds"] = time.monotonic() - began

    async def bystander() -> None:
        async with connect(served.url, ERA) as peer:
            for _ in range(40):
                began = time.monotonic()
                with anyio.fail_after(LIVENESS_SECONDS):
                    result = await peer.call("bash.list", {})
                timings.append(time.monotonic() - began)
                assert not result.is_error
                if "result" in hostile:
                    return
                await anyio.sleep(0.02)

    with anyio.fail_after(HOSTILE_SECONDS + LIVENESS_SECONDS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(attack)
            tg.start_soon(bystander)
    result = hostile["result"]
    assert not result.is_error, text(result)[:300]
    assert json.loads(text(result))["output"] == ""
    assert hostile["seconds"] < LIVENESS_SECONDS
    assert timings and max(timings) < LIVENESS_SECONDS
