"""Fixtures for the serve integration tests: a project directory, a real `entropic-mcp serve`
subprocess (stdio or HTTP), and official-SDK clients of every protocol era."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
PROBE_SITE = HERE / "probe_site"
#: The probe plugin's tools, by their canonical names, in listing order.
PROBE_TOOLS = ("probe.echo", "probe.ended", "probe.fail", "probe.info", "probe.note", "probe.sleep", "probe.slow_ask")


def served_names(separator: str) -> list[str]:
    """The probe tools as serve lists them with ``separator`` between server and tool."""
    return [name.replace(".", separator, 1) for name in PROBE_TOOLS]


ENTROPIC_MCP = Path(sys.executable).with_name("entropic-mcp")
ERAS = ("2026-07-28", "2025-11-25", "2025-06-18")

BASE_CONFIG = """\
[entropic_mcp]
plugins = ["probe"]
[storage]
backend = "none"
[permissions]
default = "ask"
allow = ["probe.echo", "probe.info", "probe.fail", "probe.sleep", "probe.ended"]
deny = ["probe.note(secret*)"]
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def user_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The per-user data directory serve uses (default stores, .mcp.json approvals): a fresh one,
    never the real ~/.local/share (serve_env passes XDG_DATA_HOME on)."""
    path = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(path))
    return path


def write_project(root: Path, config: str = BASE_CONFIG) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "entropic-mcp.toml").write_text(config, encoding="utf-8")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project")


#: The project the third-party client sessions fix: ``add`` subtracts, its test fails.
BUGGY = "def add(a, b):\n    return a - b\n"
CALC_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def calc_repo(root: Path) -> Path:
    """A git repository at ``root`` holding the buggy ``calc.py`` and its test, committed."""
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "test_calc.py").write_text(CALC_TEST)
    run: dict[str, Any] = {"cwd": root, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q", "-b", "main"], **run)
    subprocess.run(["git", "add", "calc.py", "test_calc.py"], **run)
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-qm", "calc"], **run)
    return root


def serve_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROBE_SITE), env.get("PYTHONPATH", "")]))
    env["ENTROPIC_MCP_STRICT_PLUGINS"] = "1"
    env.update(extra or {})
    return env


def stdio_params(project: Path, env: Mapping[str, str] | None = None) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(command=str(ENTROPIC_MCP), args=["serve"], cwd=str(project), env=serve_env(env))


class Peer:
    """One client connection, the same calls whatever the protocol era."""

    def __init__(self, era: str, target: Any) -> None:
        self.era = era
        self.target = target  # a mcp.Client, or a ClientSession for 2025-06-18

    async def list_page(self, cursor: str | None = None) -> Any:
        from mcp import Client
        from mcp_types import PaginatedRequestParams

        if isinstance(self.target, Client):
            return await self.target.list_tools(cursor=cursor, cache_mode="refresh")
        return await self.target.list_tools(params=PaginatedRequestParams(cursor=cursor))

    async def list_all(self) -> list[Any]:
        tools, cursor = [], None
        while True:
            page = await self.list_page(cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        meta: dict[str, Any] | None = None,
        progress: Any = None,
    ) -> Any:
        return await self.target.call_tool(name, arguments or {}, progress_callback=progress, meta=meta)


@asynccontextmanager
async def connect(server: Any, era: str, *, elicitation: Any = None) -> AsyncIterator[Peer]:
    """An official-SDK client of ``era`` connected to ``server`` (StdioServerParameters or a URL)."""
    from mcp import Client, ClientSession, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
    from mcp_types import (
        ClientCapabilities,
        ElicitationCapability,
        Implementation,
        InitializedNotification,
        InitializeRequest,
        InitializeRequestParams,
        InitializeResult,
    )

    if era != "2025-06-18":
        mode = "legacy" if era == "2025-11-25" else "auto"
        async with Client(server, mode=mode, elicitation_callback=elicitation, read_timeout_seconds=30) as client:
            assert client.protocol_version == era
            yield Peer(era, client)
        return
    # The SDK client offers its newest handshake version; a 2025-06-18 host is imitated by hand.
    transport = stdio_client(server) if isinstance(server, StdioServerParameters) else streamable_http_client(server)
    async with transport as (read, write):
        session = ClientSession(
            dispatcher=JSONRPCDispatcher(read, write), elicitation_callback=elicitation, read_timeout_seconds=30
        )
        async with session:
            capabilities = ClientCapabilities(elicitation=ElicitationCapability() if elicitation else None)
            result = await session.send_request(
                InitializeRequest(
                    params=InitializeRequestParams(
                        protocol_version="2025-06-18",
                        capabilities=capabilities,
                        client_info=Implementation(name="host-2025-06-18", version="1"),
                    )
                ),
                InitializeResult,
            )
            assert result.protocol_version == "2025-06-18"
            session.adopt(result)
            await session.send_notification(InitializedNotification())
            yield Peer(era, session)


class HTTPServe:
    """A running `entropic-mcp serve --transport http` subprocess (stderr goes to a log file)."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log


def start_http(
    project: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 30,
    max_descriptors: int | None = None,
) -> HTTPServe:
    """``max_descriptors``: the serve process's RLIMIT_NOFILE (None: inherited)."""
    log = project.parent / f"serve-http-{time.monotonic_ns()}.log"

    def limit() -> None:
        import resource

        if max_descriptors is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max_descriptors, max_descriptors))

    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(ENTROPIC_MCP), "serve", "--transport", "http", "--port", "0", *args],
            cwd=project,
            env=serve_env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
            preexec_fn=limit if max_descriptors is not None else None,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        match = re.search(r"on (http://\S+/mcp)", log.read_text(errors="replace"))
        if match:
            return HTTPServe(process, match.group(1), log)
        time.sleep(0.05)
    stop(process)
    raise AssertionError("serve --transport http did not start:\n" + log.read_text(errors="replace"))


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture
def http_serve(project: Path) -> Iterator[HTTPServe]:
    served = start_http(project)
    try:
        yield served
    finally:
        stop(served.process)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies waiting to be reaped do not count).

    Every member is looked at, with psutil — not only the leader, and independently of the
    toolkit's own check, which is what these tests hold to account.
    """
    import psutil

    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def npx() -> str | None:
    return shutil.which("npx")
