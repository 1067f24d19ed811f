"""Issue 21, plugins: hostile and broken plugins (tests/integration/probe_site/entropic_mcp_hostile)
against real `entropic-mcp serve` subprocesses and the official client.

Each test installs the hostile plugins it needs next to the probe plugin (entry points written
into a site directory of its own), shows the host keeps serving the other plugins, and that
`check-plugin` reports the hostile one by plugin and hook.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import ENTROPIC_MCP, PROBE_SITE, connect, serve_env, write_project

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

ERA = "2026-07-28"


def site_with(tmp_path: Path, modules: Sequence[str]) -> Path:
    """A site directory installing ``entropic_mcp_hostile.<module>`` as plugin ``<module>``."""
    site = tmp_path / "site"
    for module in modules:
        info = site / f"entropic_mcp_hostile_{module}-0.1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: entropic-mcp-hostile-{module}\nVersion: 0.1.0\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[entropic_mcp.plugins]\n{module} = entropic_mcp_hostile.{module}\n", encoding="utf-8"
        )
    return site


def config_for(modules: Sequence[str], *, allow: Sequence[str] = (), extra: str = "") -> str:
    plugins = ", ".join(f'"{name}"' for name in ("probe", *modules))
    rules = ", ".join(f'"{rule}"' for rule in ("probe.echo", *(f"{m}.fine" for m in modules), *allow))
    return (
        f'[entropic_mcp]\nplugins = [{plugins}]\n[storage]\nbackend = "none"\n'
        f'[permissions]\ndefault = "ask"\nallow = [{rules}]\ndeny = ["probe.note(secret*)"]\n{extra}'
    )


class Hostile:
    """A project with some hostile plugins installed, and ways to run entropic-mcp in it."""

    def __init__(self, tmp_path: Path, modules: Sequence[str], config: str, *, strict: bool = False) -> None:
        self.root = write_project(tmp_path / "project", config)
        self.site = site_with(tmp_path, modules)
        self.log = tmp_path / "serve-stderr.log"
        self.env = {
            "PYTHONPATH": os.pathsep.join([str(self.site), str(PROBE_SITE)]),
            "ENTROPIC_MCP_STRICT_PLUGINS": "1" if strict else "0",
        }

    def run(
        self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ENTROPIC_MCP), *args],
            cwd=self.root,
            env=serve_env({**self.env, **(env or {})}),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def params(self) -> Any:
        from mcp import StdioServerParameters

        # serve's stderr goes to a file the test reads (the SDK client would print it).
        return StdioServerParameters(
            command="sh",
            args=["-c", f'exec "{ENTROPIC_MCP}" serve 2>>"{self.log}"'],
            cwd=str(self.root),
            env=serve_env(self.env),
        )

    def plugins(self) -> dict[str, dict[str, Any]]:
        done = self.run("plugins", "--json")
        assert done.returncode == 0, done.stderr
        return {row["name"]: row for row in json.loads(done.stdout)}


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def echo_works(peer: Any) -> None:
    result = await peer.call("probe.echo", {"text": "still here"})
    assert not result.is_error and text_of(result) == "still here"


# -- 1. SystemExit / KeyboardInterrupt --------------------------------------------------------------


async def test_tools_raising_systemexit_or_keyboardinterrupt_answer_an_error_and_serve_keeps_serving(
    tmp_path: Path,
) -> None:
    project = Hostile(
        tmp_path, ["exits"], config_for(["exits"], allow=["exits.parse", "exits.interrupt", "exits.quit"])
    )
    async with connect(project.params(), ERA) as peer:
        for tool, raised in (
            ("exits.parse", "SystemExit"),
            ("exits.interrupt", "KeyboardInterrupt"),
            ("exits.quit", "SystemExit"),
        ):
            result = await peer.call(tool, {"value": "not-a-number"} if tool == "exits.parse" else {})
            assert result.is_error, (tool, text_of(result))
            # Named as the client calls it (served names are portable: exits_parse).
            assert raised in text_of(result) and tool.replace(".", "_") in text_of(result)
        await echo_works(peer)
        fine = await peer.call("exits.fine", {})
        assert text_of(fine) == "fine"


def test_call_prints_the_error_envelope_of_a_tool_raising_systemexit(tmp_path: Path) -> None:
    project = Hostile(tmp_path, ["exits"], config_for(["exits"], allow=["exits.parse"]))
    done = project.run("call", "exits.parse", '{"value": "x"}')
    assert done.returncode == 1, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["is_error"] and "SystemExit" in envelope["result"]


def test_plugins_exiting_or_interrupting_at_import_are_failed_and_every_command_still_works(tmp_path: Path) -> None:
    modules = ["exit_at_import", "interrupt_at_import"]
    project = Hostile(tmp_path, modules, config_for(modules))
    rows = project.plugins()
    assert rows["exit_at_import"]["status"] == "failed" and "SystemExit" in rows["exit_at_import"]["error"]
    assert rows["interrupt_at_import"]["status"] == "failed"
    assert "KeyboardInterrupt" in rows["interrupt_at_import"]["error"]
    assert rows["probe"]["status"] == "active"
    checked = project.run("check-plugin", "probe", "--examples", "2", "--quiet", "--json")
    assert checked.returncode in (0, 1), checked.stdout + checked.stderr  # it ran, whatever it found
    assert json.loads(checked.stdout)["plugin"] == "probe"
    called = project.run("call", "probe.echo", '{"text": "hi"}')
    assert called.returncode == 0 and json.loads(called.stdout)["result"] == "hi", called.stderr


# -- 2. hooks see the arguments read-only -----------------------------------------------------------


async def test_an_approver_editing_the_arguments_cannot_change_what_runs(tmp_path: Path) -> None:
    project = Hostile(tmp_path, ["mutator"], config_for(["mutator"]))
    async with connect(project.params(), ERA) as peer:
        result = await peer.call("probe.note", {"text": "harmless"})
        await echo_works(peer)
    notes = project.root / "notes.txt"
    written = notes.read_text(encoding="utf-8") if notes.exists() else ""
    assert "secret" not in written, written
    assert result.is_error and "denied" in text_of(result)
    assert "mutator" in project.log.read_text(encoding="utf-8")


# -- 3. a plugin's ConfigError fails that plugin ------------------------------------------------------


async def test_a_plugins_config_error_fails_that_plugin_alone_and_strict_mode_makes_it_fatal(tmp_path: Path) -> None:
    modules = ["config_error", "config_clash"]
    project = Hostile(tmp_path, modules, config_for(modules))
    rows = project.plugins()
    assert rows["config_error"]["status"] == "failed" and "api_key is required" in rows["config_error"]["error"]
    assert rows["config_clash"]["status"] == "failed" and "region is required" in rows["config_clash"]["error"]
    assert rows["probe"]["status"] == "active"
    async with connect(project.params(), ERA) as peer:
        names = {tool.name for tool in await peer.list_all()}
        assert "probe_echo" in names
        await echo_works(peer)
    strict = project.run("tools", env={"ENTROPIC_MCP_STRICT_PLUGINS": "1"})
    assert strict.returncode == 2
    assert "config_clash" in strict.stderr or "config_error" in strict.stderr, strict.stderr


# -- 4. the medium rows ----------------------------------------------------------------------------


async def test_an_async_tool_blocking_the_loop_is_logged_naming_the_tool(tmp_path: Path) -> None:
    project = Hostile(tmp_path, ["blocker"], config_for(["blocker"], allow=["blocker.block"]))
    async with connect(project.params(), ERA) as peer:
        result = await peer.call("blocker.block", {"seconds": 2.5})
        assert text_of(result) == "blocked"
        await echo_works(peer)
    log = project.log.read_text(encoding="utf-8")
    assert "async tool blocker.block blocked the event loop" in log, log  # once the step ended
    assert "async tool blocker.block is holding the event loop" in log, log  # while it held the loop


def test_prints_at_import_and_in_tools_never_reach_json_output(tmp_path: Path) -> None:
    project = Hostile(tmp_path, ["printer"], config_for(["printer"], allow=["printer.shout"]))
    listed = project.run("tools", "--json")
    assert listed.returncode == 0, listed.stderr
    assert any(row["name"] == "printer.shout" for row in json.loads(listed.stdout))
    assert "printer plugin loaded" in listed.stderr and "'printer'" in listed.stderr
    called = project.run("call", "printer.shout")
    assert json.loads(called.stdout)["result"] == "shouted"
    assert "SHOUTING FROM A TOOL" in called.stderr


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


def raw_exchange(project: Hostile, *requests: str) -> tuple[list[dict[str, Any]], bytes, str]:
    """Initialise, send each request line and read its answer, close stdin: (answers, rest of stdout, stderr)."""
    answers = []
    with subprocess.Popen(
        [str(ENTROPIC_MCP), "serve"],
        cwd=project.root,
        env=serve_env(project.env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for line in (json.dumps(INIT), initialized, *requests):
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()
            if line is not initialized:
                answers.append(json.loads(process.stdout.readline()))
        process.stdin.close()
        rest = process.stdout.read()
        stderr = process.stderr.read().decode()
    return answers, rest, stderr


def test_prints_at_import_and_in_tools_never_reach_the_stdio_stream(tmp_path: Path) -> None:
    project = Hostile(tmp_path, ["printer"], config_for(["printer"], allow=["printer.shout"]))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "printer.shout", "arguments": {}}}
    answers, rest, stderr = raw_exchange(project, json.dumps(call))
    assert [a["id"] for a in answers] == [1, 2], answers
    assert answers[1]["result"]["content"][0]["text"] == "shouted"
    assert not rest.strip(), rest
    assert "printer plugin loaded" in stderr and "SHOUTING FROM A TOOL" in stderr and "'printer'" in stderr


async def test_a_result_past_the_hard_ceiling_is_cut_even_with_the_cap_off(tmp_path: Path) -> None:
    extra = "[pipeline]\nmax_result_bytes = 0\n"
    project = Hostile(tmp_path, ["big"], config_for(["big"], allow=["big.flood"], extra=extra))
    async with connect(project.params(), ERA) as peer:
        result = await peer.call("big.flood", {"megabytes": 100})
        text = text_of(result)
        assert len(text) < 20 * 1024 * 1024 and "truncated" in text[-300:] and "hard ceiling" in text[-300:]
        await echo_works(peer)


async def test_a_tool_with_an_invalid_name_fails_its_plugin_at_registration(tmp_path: Path) -> None:
    project = Hostile(tmp_path, ["badname"], config_for(["badname"]))
    row = project.plugins()["badname"]
    assert (
        row["status"] == "failed" and "evil/../name with space" in row["error"] and "invalid tool name" in row["error"]
    )
    async with connect(project.params(), ERA) as peer:
        names = {tool.name for tool in await peer.list_all()}
        assert "probe_echo" in names and not any("evil" in name for name in names)
        await echo_works(peer)


async def test_a_storage_fault_names_the_backend_plugin(tmp_path: Path) -> None:
    config = config_for(["badstore", "entropic"], allow=["entropic.todo"]).replace(
        'backend = "none"', 'backend = "brokendisk"'
    )
    project = Hostile(tmp_path, ["badstore"], config)
    async with connect(project.params(), ERA) as peer:
        result = await peer.call("entropic.todo", {"action": "add", "content": "write the report"})
        assert result.is_error
        assert "badstore" in text_of(result), text_of(result)
        await echo_works(peer)


async def test_nan_and_infinity_in_results_and_arguments_are_refused(tmp_path: Path) -> None:
    project = Hostile(tmp_path, ["nan"], config_for(["nan"], allow=["nan.ratio", "nan.number"]))
    async with connect(project.params(), ERA) as peer:
        result = await peer.call("nan.ratio", {})
        assert result.is_error and "NaN" in text_of(result) and "ratio" in text_of(result), text_of(result)
        await echo_works(peer)
    # The official client sends NaN as null; a client that sends the NaN literal gets a clear refusal.
    call = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nan.number", "arguments": {"value": NaN}}}'
    answers, _, _ = raw_exchange(project, call)
    answer = answers[1]
    text = answer["result"]["content"][0]["text"] if "result" in answer else answer["error"]["message"]
    assert "is NaN" in text, text


async def test_children_a_tool_spawns_do_not_outlive_serve(tmp_path: Path) -> None:
    project = Hostile(tmp_path, ["spawner"], config_for(["spawner"], allow=["spawner.spawn"]))
    async with connect(project.params(), ERA) as peer:
        result = await peer.call("spawner.spawn", {})
        pid = int(text_of(result))
        assert psutil.pid_exists(pid)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and gone(pid) is False:
        time.sleep(0.1)
    assert gone(pid), f"child {pid} outlived serve"


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- 5. check-plugin reports every hostile plugin ---------------------------------------------------

REPORTS = {
    "exits": "SystemExit",
    "exit_at_import": "SystemExit",
    "interrupt_at_import": "KeyboardInterrupt",
    "mutator": "in place",
    "config_error": "api_key is required",
    "config_clash": "region is required",
    "blocker": "blocked the event loop",
    "printer": "stdout",
    "badname": "invalid tool name",
    "nan": "NaN",
    "spawner": "child process",
    "misspelled": "entropic_mcp_permission_pattern",
    "badstore": "brokendisk",
}


@pytest.mark.parametrize("module", sorted(REPORTS))
def test_check_plugin_reports_the_hostile_plugin(tmp_path: Path, module: str) -> None:
    project = Hostile(tmp_path, [module], config_for([module]))
    done = project.run("check-plugin", module, "--examples", "3", "--timeout", "5", "--json", "--quiet")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert not report["ok"]
    problems = "\n".join(report["problems"])
    assert REPORTS[module] in problems and f"plugin {module!r}" in problems, problems
