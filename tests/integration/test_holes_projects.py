"""Issue 21, projects: a hostile project (or an agent writing into one) through a real `entropic-mcp serve`.

- a ``.mcp.json`` runs only once the user approved exactly its contents (recorded outside the project);
- the policy files actually loaded are protected by identity, whatever their names and spellings,
  for every writer (filesystem tools, bash redirections);
- the default store lives outside the project and no tool reads or writes a store;
- an external server's own ``readOnlyHint`` is not trusted unless the config says so; a name taken
  by a plugin fails that entry alone; a structured result over the cap reaches the client;
- HTTP: connections whose request head never finishes are closed, and never lock a client out;
- "always allow" on a call whose pattern holds glob characters stores a rule matching exactly it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import ENTROPIC_MCP, connect, serve_env, start_http, stop

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ERA = "2026-07-28"
ROOT = Path(__file__).resolve().parents[2]
FAULT_SERVER = ROOT / "core" / "tests" / "external" / "fault_server.py"


def text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@pytest.fixture
def data_home(tmp_path: Path) -> Path:
    """The per-user data directory the serve subprocesses use (never the real one)."""
    path = tmp_path / "xdg-data"
    path.mkdir()
    return path


def params(project: Path, data_home: Path, *args: str) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=str(ENTROPIC_MCP),
        args=[*args, "serve"],
        cwd=str(project),
        env=serve_env({"XDG_DATA_HOME": str(data_home)}),
    )


def run_cli(project: Path, data_home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ENTROPIC_MCP), *args],
        cwd=project,
        env=serve_env({"XDG_DATA_HOME": str(data_home)}),
        capture_output=True,
        text=True,
        timeout=60,
    )


def make_project(tmp_path: Path, config: str, name: str = "entropic-mcp.toml") -> Path:
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    (root / name).write_text(config, encoding="utf-8")
    return root


async def stderr_of(project: Path, data_home: Path, body: Any, *args: str) -> str:
    """Run ``body(peer)`` against a stdio serve and return what serve wrote to stderr."""
    from mcp import Client, stdio_client

    log = project.parent / f"serve-{time.monotonic_ns()}.log"
    with log.open("w") as sink:
        transport = stdio_client(params(project, data_home, *args), errlog=sink)
        async with Client(transport, read_timeout_seconds=30) as client:
            await body(client)
    return log.read_text(errors="replace")


# -- .mcp.json runs only once approved ------------------------------------------------------------

MCP_CONFIG = """\
[entropic_mcp]
plugins = ["filesystem"]
import_mcp_json = true
[storage]
backend = "none"
[permissions]
default = "ask"
allow = ["filesystem.write_file", "filesystem.read_file", "m.echo"]
"""


def mcp_json(marker: Path, text_value: str = "") -> str:
    """A .mcp.json whose server leaves ``marker`` behind when its command runs, then serves the fault server."""
    code = f"open({str(marker)!r}, 'w').write('ran'); import runpy, sys; sys.argv = [{str(FAULT_SERVER)!r}]; "
    code += f"runpy.run_path({str(FAULT_SERVER)!r}, run_name='__main__')"
    entry = {"command": sys.executable, "args": ["-c", code + (f"  # {text_value}" if text_value else "")]}
    return json.dumps({"mcpServers": {"m": entry}})


async def test_an_agent_cannot_write_mcp_json(tmp_path: Path, data_home: Path) -> None:
    project = make_project(tmp_path, MCP_CONFIG.replace("import_mcp_json = true\n", ""))
    async with connect(params(project, data_home), ERA) as peer:
        result = await peer.call("filesystem.write_file", {"path": ".mcp.json", "content": mcp_json(tmp_path / "ran")})
    assert result.is_error, text(result)
    assert "permission_denied" in text(result) or "policy" in text(result)
    assert not (project / ".mcp.json").exists()


async def test_an_unapproved_mcp_json_never_runs_until_approved_and_again_once_changed(
    tmp_path: Path, data_home: Path
) -> None:
    marker = tmp_path / "ran"
    project = make_project(tmp_path, MCP_CONFIG)
    (project / ".mcp.json").write_text(mcp_json(marker), encoding="utf-8")
    names: list[str] = []

    async def listing(client: Any) -> None:
        names[:] = [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]

    stderr = await stderr_of(project, data_home, listing)
    assert not marker.exists(), "the unapproved .mcp.json's command ran"
    assert not any(name.startswith("m_") for name in names)
    lines = [line for line in stderr.splitlines() if ".mcp.json" in line]
    assert lines and "entropic-mcp external approve" in lines[0] and str(project / ".mcp.json") in lines[0]

    approved = run_cli(project, data_home, "external", "approve", ".mcp.json")
    assert approved.returncode == 0, approved.stderr
    assert not marker.exists(), "approving must not run the server"
    await stderr_of(project, data_home, listing)
    assert marker.exists()
    assert "m_echo" in names

    marker.unlink()
    (project / ".mcp.json").write_text(mcp_json(marker, "changed"), encoding="utf-8")
    stderr = await stderr_of(project, data_home, listing)
    assert not marker.exists(), "a changed .mcp.json ran on its old approval"
    assert "entropic-mcp external approve" in stderr
    assert not any(name.startswith("m_") for name in names)


# -- the active policy files, protected by identity ---------------------------------------------------

POLICY = """\
[entropic_mcp]
plugins = ["filesystem", "bash"]
[storage]
backend = "tinydb"
path = "store"
[permissions]
default = "ask"
allow = ["filesystem.write_file", "filesystem.edit_file", "filesystem.read_file", "filesystem.grep",
         "filesystem.list_directory", "bash.execute:echo *", "bash.execute:cat *"]
[servers.filesystem]
allow_outside_root = true
"""

WRITES = {
    "write_file, the --config file": ("filesystem.write_file", {"path": "policy.toml", "content": "x"}),
    "write_file through ..": ("filesystem.write_file", {"path": "sub/../policy.toml", "content": "x"}),
    "write_file through a link": ("filesystem.write_file", {"path": "link.toml", "content": "x"}),
    "write_file by absolute path": ("filesystem.write_file", {"path": "{root}/policy.toml", "content": "x"}),
    "write_file into the store": ("filesystem.write_file", {"path": "store/planted.json", "content": "x"}),
    "write_file, .mcp.json": ("filesystem.write_file", {"path": ".mcp.json", "content": "{}"}),
    "bash append to the --config file": ("bash.execute", {"command": "echo '[x]' >> policy.toml"}),
    "bash overwrite through a link": ("bash.execute", {"command": "echo x > link.toml"}),
    "bash write through ..": ("bash.execute", {"command": "echo x > sub/../policy.toml"}),
    "bash write into the store": ("bash.execute", {"command": "echo x > store/planted.json"}),
}


@pytest.fixture
def policy_project(tmp_path: Path) -> Path:
    project = make_project(tmp_path, POLICY, name="policy.toml")
    (project / "sub").mkdir()
    (project / "link.toml").symlink_to("policy.toml")
    return project


@pytest.mark.parametrize("case", sorted(WRITES))
async def test_the_active_config_and_the_store_are_protected_whatever_their_names(
    policy_project: Path, data_home: Path, case: str
) -> None:
    tool, arguments = WRITES[case]
    arguments = {k: v.replace("{root}", str(policy_project)) for k, v in arguments.items()}
    before = (policy_project / "policy.toml").read_text()
    async with connect(params(policy_project, data_home, "--config", "policy.toml"), ERA) as peer:
        await peer.call("filesystem.read_file", {"path": "policy.toml"})  # the store now exists
        result = await peer.call(tool, arguments)
    assert result.is_error, text(result)
    assert (policy_project / "policy.toml").read_text() == before
    assert not (policy_project / "store" / "planted.json").exists()
    assert not (policy_project / ".mcp.json").exists()


@pytest.mark.parametrize("where", ["configured inside the project", "the per-user data directory"])
async def test_no_tool_reads_a_store(tmp_path: Path, data_home: Path, where: str) -> None:
    inside = where.startswith("configured")
    project = make_project(tmp_path, POLICY if inside else POLICY.replace('path = "store"\n', ""))
    async with connect(params(project, data_home), ERA) as peer:
        await peer.call("filesystem.write_file", {"path": "notes.txt", "content": "hello"})  # opens the store
        store = project / "store" if inside else next(data_home.glob("entropic-mcp/projects/*/store"))
        planted = store / "planted.jsonl"
        planted.write_text("SECRET-CONTENT\n")  # stands for the audit trail's arguments and outputs
        (store / ".gitignore").unlink(missing_ok=True)  # walks honour it; the protection must not need it
        spelling = "store/planted.jsonl" if inside else str(planted)
        read = await peer.call("filesystem.read_file", {"path": spelling})
        grep = await peer.call("filesystem.grep", {"pattern": "SECRET-CONTENT", "path": "." if inside else str(store)})
        listing = await peer.call("filesystem.list_directory", {"path": "store" if inside else str(store)})
    assert read.is_error and "SECRET-CONTENT" not in text(read), text(read)
    assert "SECRET-CONTENT" not in text(grep) and "planted" not in text(grep), text(grep)
    assert "planted" not in text(listing), text(listing)


async def test_the_default_store_lives_outside_the_project(tmp_path: Path, data_home: Path) -> None:
    project = make_project(tmp_path, POLICY.replace('path = "store"\n', ""))
    async with connect(params(project, data_home), ERA) as peer:
        await peer.call("filesystem.write_file", {"path": "notes.txt", "content": "SECRET-CONTENT"})
        journals = [p for p in data_home.glob("entropic-mcp/projects/*/store/*") if p.is_file()]
        assert journals, "the store was not made under the per-user data directory"
        result = await peer.call("filesystem.read_file", {"path": str(journals[0])})
    assert not (project / ".entropic-mcp").exists()
    assert result.is_error and "store" in text(result), text(result)


# -- external servers: hints, names, big results ---------------------------------------------------


def external_project(tmp_path: Path, extra: str = "", *, plugins: str = "[]", trust: bool = False) -> Path:
    quoted = f'"{FAULT_SERVER}"'
    table = f'[external.f]\ncommand = "{sys.executable}"\nargs = [{quoted}]\ncall_timeout_seconds = 20\n' + (
        "trust_annotations = true\n" if trust else ""
    )
    config = (
        f'[entropic_mcp]\nplugins = {plugins}\n[storage]\nbackend = "none"\n'
        '[permissions]\ndefault = "deny"\nallow_read = true\nallow = ["f.big"]\n[pipeline]\nmax_result_bytes = 4096\n'
        + table
        + extra
    )
    return make_project(tmp_path, config)


async def test_an_external_servers_own_read_only_hint_allows_nothing(tmp_path: Path, data_home: Path) -> None:
    project = external_project(tmp_path)
    async with connect(params(project, data_home), ERA) as peer:
        listed = {tool.name: tool for tool in await peer.list_all()}
        result = await peer.call("f.wipe", {})
    assert listed["f_wipe"].annotations.read_only_hint is False
    assert result.is_error and "wiped" not in text(result), text(result)


async def test_trust_annotations_lets_the_servers_hints_count(tmp_path: Path, data_home: Path) -> None:
    project = external_project(tmp_path, trust=True)
    async with connect(params(project, data_home), ERA) as peer:
        result = await peer.call("f.wipe", {})
    assert (result.is_error, text(result)) == (False, "wiped")


async def test_an_external_name_taken_by_a_plugin_fails_that_entry_alone(tmp_path: Path, data_home: Path) -> None:
    clash = f'[external.filesystem]\ncommand = "{sys.executable}"\nargs = ["{FAULT_SERVER}"]\n'
    project = external_project(tmp_path, clash, plugins='["filesystem"]')
    names: list[str] = []

    async def listing(client: Any) -> None:
        names[:] = [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]

    stderr = await stderr_of(project, data_home, listing)
    assert "f_echo" in names and "filesystem_read_file" in names
    assert "filesystem_echo" not in names
    assert "[external.filesystem]" in stderr


async def test_a_structured_external_result_over_the_cap_reaches_the_client(tmp_path: Path, data_home: Path) -> None:
    project = external_project(tmp_path)
    async with connect(params(project, data_home), ERA) as peer:
        small = await peer.call("f.big", {"size": 10})
        big = await peer.call("f.big", {"size": 100_000})
    assert small.structured_content == {"data": "x" * 10}
    assert big.is_error
    assert "max_result_bytes" in text(big)
    assert len(text(big).encode()) < 8192


# -- HTTP: request heads that never finish ----------------------------------------------------------

HTTP_CONFIG = """\
[entropic_mcp]
plugins = ["probe"]
[storage]
backend = "none"
[permissions]
default = "allow"
"""


def _partial_sockets(url: str, count: int) -> list[socket.socket]:
    host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        sockets.append(sock)
    return sockets


def _closed_by_server(sock: socket.socket, wait: float) -> bool:
    sock.settimeout(wait)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except TimeoutError:
        return False
    except OSError:
        return True


async def test_idle_request_heads_are_closed_and_never_lock_a_client_out(tmp_path: Path, data_home: Path) -> None:
    project = make_project(tmp_path, HTTP_CONFIG)
    env = {"XDG_DATA_HOME": str(data_home)}
    # 400 descriptors: the 600 idle sockets below used them all before the fix (a default soft
    # limit of 1,024 took about 1,000), and the client got no connection.
    served = start_http(project, env=env, max_descriptors=400)
    sockets: list[socket.socket] = []
    try:
        sockets = _partial_sockets(served.url, 600)
        with anyio.fail_after(30):
            async with connect(served.url, ERA) as peer:
                result = await peer.call("probe.echo", {"text": "still served"})
        assert text(result) == "still served"
        # Every idle head is closed once the header timeout (10 s by default) passes; 40 s bounds a
        # loaded machine.
        assert all(_closed_by_server(sock, 40) for sock in sockets[-50:])
    finally:
        for sock in sockets:
            sock.close()
        stop(served.process)


async def test_fifty_clients_of_one_address_connecting_at_once_are_all_served(tmp_path: Path, data_home: Path) -> None:
    # One process's clients, or every client behind one load balancer, share an address: their
    # connections wait for their heads together. Closing the oldest past 16 dropped 34 of 50.
    project = make_project(tmp_path, HTTP_CONFIG)
    served = start_http(project, env={"XDG_DATA_HOME": str(data_home)})
    answers: list[str] = []
    try:
        with anyio.fail_after(120):

            async def one(index: int) -> None:
                async with connect(served.url, ERA) as peer:
                    answers.append(text(await peer.call("probe.echo", {"text": f"client {index}"})))

            async with anyio.create_task_group() as group:
                for index in range(50):
                    group.start_soon(one, index)
    finally:
        stop(served.process)
    assert sorted(answers) == sorted(f"client {index}" for index in range(50))


# -- "always allow" on a pattern with glob characters ----------------------------------------------


async def test_always_allow_on_a_pattern_with_glob_characters_allows_exactly_that_call(
    tmp_path: Path, data_home: Path
) -> None:
    from mcp_types import ElicitResult

    project = make_project(
        tmp_path,
        '[entropic_mcp]\nplugins = ["probe"]\n[storage]\nbackend = "none"\n[permissions]\ndefault = "ask"\n',
    )
    answers: list[str] = []

    async def elicitation(context: Any, request: Any) -> Any:
        answers.append(request.message)
        return ElicitResult(action="accept", content={"decision": "always_allow"})

    async with connect(params(project, data_home), ERA, elicitation=elicitation) as peer:
        first = await peer.call("probe.note", {"text": "*"})
        asked = len(answers)
        again = await peer.call("probe.note", {"text": "*"})
        other = await peer.call("probe.note", {"text": "rm -rf everything"})
    assert not first.is_error and not again.is_error
    assert asked == 1 and len(answers) == 2, answers  # the same call allowed; another one asked again
    assert not other.is_error
    assert "probe.note([*])" in (project / "entropic-mcp.local.toml").read_text()
