import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from entropic_mcp.cli import _hoist_config, cli
from test_kit import BROKEN


@pytest.fixture
def project(tmp_path, monkeypatch, fake_site):
    (tmp_path / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["fakegood"]\n[storage]\nbackend = "none"\n[permissions]\ndefault = "ask"\n'
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(cli, list(args), obj={}, catch_exceptions=False)


def test_tools_json_lists_mcp_objects_with_access_and_server(project):
    result = invoke("tools", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == [
        {
            "name": "good.ping",
            "description": "Answer pong.",
            "inputSchema": {"type": "object", "additionalProperties": False},
            "annotations": {"readOnlyHint": True},
            "server": "good",
            "access": "READ",
        }
    ]


def test_tools_for_an_unknown_server_is_a_usage_error(project):
    result = CliRunner().invoke(cli, ["tools", "--server", "nope"], obj={})
    assert result.exit_code == 2
    assert "no server 'nope'" in result.output


def test_call_prints_the_envelope_and_asks_fail_closed(project):
    (project / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["fakegood"]\n[storage]\nbackend = "none"\n[permissions]\nallow_read = false\n'
    )
    result = CliRunner().invoke(cli, ["call", "good.ping"], obj={})
    envelope = json.loads(result.stdout)
    assert envelope["kind"] == "rejected_permission"
    assert result.exit_code == 1
    result = invoke("call", "good.ping", "{}", "--yes")
    assert json.loads(result.stdout) == {"result": "pong", "directives": [], "is_error": False, "kind": "ok"}


def test_call_rejects_arguments_that_are_not_a_json_object(project):
    result = CliRunner().invoke(cli, ["call", "good.ping", "[1]"], obj={})
    assert result.exit_code == 2
    assert "must be a JSON object" in result.output


def test_init_writes_a_starter_that_loads_and_refuses_to_overwrite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke("init").exit_code == 0
    from entropic_mcp import load_config

    config = load_config(tmp_path / "entropic-mcp.toml")
    assert config.permissions.allow_read is True
    result = CliRunner().invoke(cli, ["init"], obj={})
    assert result.exit_code == 2 and "--force" in result.output


def test_init_keeps_the_local_approvals_file_and_its_lock_out_of_git(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".gitignore").write_text("build/", encoding="utf-8")  # no final newline
    result = invoke("init")
    assert "added entropic-mcp.local.toml, entropic-mcp.local.toml.lock" in result.output
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[0] == "build/" and {"entropic-mcp.local.toml", "entropic-mcp.local.toml.lock"} <= set(lines)
    invoke("init", "--force")  # nothing added twice
    assert (tmp_path / ".gitignore").read_text().count("entropic-mcp.local.toml.lock") == 1
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "entropic-mcp.local.toml").write_text("")
    (tmp_path / "entropic-mcp.local.toml.lock").write_text("")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    assert "entropic-mcp.local.toml" not in status and "entropic-mcp.toml" in status


def test_serve_names_the_config_in_force_or_none(tmp_path):
    from entropic_mcp import load_config
    from entropic_mcp.cli._serve import startup_line

    line = startup_line(load_config(cwd=tmp_path))
    assert line.startswith("entropic-mcp: config none: defaults;") and "read-only tools allowed" in line
    assert "approvals: asked of the user through the client (MCP elicitation)" in line and "\n" not in line
    (tmp_path / "entropic-mcp.toml").write_text("[permissions]\nallow_read = false\nauto_approve = true\n")
    (tmp_path / "entropic-mcp.local.toml").write_text("")
    line = startup_line(load_config(cwd=tmp_path))
    assert f"config {tmp_path / 'entropic-mcp.toml'} + {tmp_path / 'entropic-mcp.local.toml'};" in line
    assert "read-only tools ask" in line and "auto_approve = true" in line


def test_config_shows_values_and_their_sources(project):
    data = json.loads(invoke("config", "--json").stdout)
    values = {row["key"]: row for row in data["values"]}
    assert values["storage.backend"]["value"] == "none"
    assert values["storage.backend"]["source"].endswith("entropic-mcp.toml")
    assert values["pipeline.max_result_bytes"]["source"] == "default"


def test_config_option_before_or_after_the_command():
    assert _hoist_config(["tools", "--config", "x.toml", "--json"]) == ["--config", "x.toml", "tools", "--json"]
    assert _hoist_config(["--config=x.toml", "tools"]) == ["--config=x.toml", "tools"]


def test_config_error_is_one_line_with_exit_status_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[permissions]\ndefault = 'sometimes'\n")
    result = subprocess.run(
        [sys.executable, "-c", "from entropic_mcp.cli import main; main()", "tools", "--config", str(bad)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert "permissions.default" in result.stderr


def test_check_plugin_reports_a_conforming_plugin(project):
    result = invoke("check-plugin", "fakegood", "--examples", "5", "--json")
    assert json.loads(result.stdout) == {
        "plugin": "fakegood",
        "ok": True,
        "servers": ["good"],
        "hooks": ["entropic_mcp_servers"],
        "problems": [],
    }
    assert result.exit_code == 0
    assert "fakegood: checking server 'good'" in result.stderr


BROKEN_SITE = Path(__file__).parent / "broken_plugins"


@pytest.fixture
def broken_project(project, monkeypatch):
    monkeypatch.syspath_prepend(str(BROKEN_SITE))
    return project


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_check_plugin_reports_each_broken_plugin_by_plugin_hook_and_file(broken_project, variant):
    """The CLI is check_plugin with progress: the same fault, with its place and file, and exit 1."""
    if variant == "first_party_name" and importlib.util.find_spec("entropic_mcp_git") is None:
        pytest.skip("the clash is with the first-party git plugin, not installed here")
    place, location, fault = BROKEN[variant]
    plugin = f"weather_{variant}"
    result = CliRunner().invoke(cli, ["check-plugin", plugin, "--examples", "5", "--timeout", "0.3"], obj={})
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith(f"  - plugin {plugin!r}: ")]
    assert any(place in line and location in line and fault in line for line in lines), result.stdout
    assert f"{plugin}: importing plugin {plugin!r}" in result.stderr


def test_check_plugin_says_how_to_install_the_kit_when_hypothesis_is_missing(project, monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    result = CliRunner().invoke(cli, ["check-plugin", "fakegood"], obj={})
    assert result.exit_code == 1
    assert "pip install entropic-mcp[testing]" in result.output


def test_check_plugin_of_a_plugin_that_is_not_installed_is_a_usage_error(project):
    result = CliRunner().invoke(cli, ["check-plugin", "nosuch"], obj={})
    assert result.exit_code == 2
    assert "no installed plugin 'nosuch'" in result.output and "fakegood" in result.output


def test_check_plugin_finishes_on_a_tool_that_never_returns(broken_project):
    """The blocked tool's thread is abandoned: the command reports and the process exits."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from entropic_mcp.cli import main; main()",
            "check-plugin",
            "weather_blocking_tool",
            "--timeout",
            "0.3",
            "--examples",
            "3",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=broken_project,
        env={**__import__("os").environ, "PYTHONPATH": str(BROKEN_SITE)},
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "did not return within 0.3 s" in result.stdout
    assert result.stderr == ""


# -- new-plugin -----------------------------------------------------------------------------------


def _scaffold(tmp_path, name="weather_station"):
    result = CliRunner().invoke(cli, ["new-plugin", name, "--dir", str(tmp_path)], obj={})
    assert result.exit_code == 0, result.output
    return tmp_path / f"entropic-mcp-{name}"


def test_new_plugin_scaffolds_a_plugin_whose_own_tests_pass(tmp_path, monkeypatch):
    """The generated tests run in this process against the generated package (no install)."""
    import importlib.util
    import inspect

    target = _scaffold(tmp_path / "out")
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "pyproject.toml",
        "src/entropic_mcp_weather_station/__init__.py",
        "src/entropic_mcp_weather_station/py.typed",
        "src/entropic_mcp_weather_station/tools/word_count.json",
        "tests/test_weather_station.py",
    ]
    for path in target.rglob("*"):
        if path.is_file() and path.suffix != ".typed":
            assert "template" not in path.read_text().lower(), path
    pyproject = (target / "pyproject.toml").read_text()
    assert 'weather_station = "entropic_mcp_weather_station"' in pyproject
    assert 'name = "entropic-mcp-weather_station"' in pyproject
    monkeypatch.syspath_prepend(str(target / "src"))
    spec = importlib.util.spec_from_file_location("scaffolded_tests", target / "tests/test_weather_station.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [(n, f) for n, f in vars(module).items() if n.startswith("test_") and inspect.isfunction(f)]
    assert len(tests) >= 3
    for index, (_name, test) in enumerate(tests):
        scratch = tmp_path / f"run-{index}"
        scratch.mkdir()
        test(scratch)
    monkeypatch.delitem(sys.modules, "entropic_mcp_weather_station")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("Weather", "not usable"),
        ("9lives", "not usable"),
        ("we-ather", "not usable"),
        ("git", "first-party"),
        ("x" * 41, "not usable"),
    ],
)
def test_new_plugin_refuses_unusable_names(tmp_path, name, problem):
    result = CliRunner().invoke(cli, ["new-plugin", name, "--dir", str(tmp_path)], obj={})
    assert result.exit_code == 2 and problem in result.output
    assert list(tmp_path.iterdir()) == []


def test_new_plugin_never_overwrites(tmp_path):
    target = _scaffold(tmp_path)
    (target / "README.md").write_text("mine")
    result = CliRunner().invoke(cli, ["new-plugin", "weather_station", "--dir", str(tmp_path)], obj={})
    assert result.exit_code == 2 and "already exists" in result.output
    assert (target / "README.md").read_text() == "mine"


@pytest.mark.slow
def test_a_scaffolded_plugin_installs_is_discovered_passes_its_tests_and_mypy_strict_in_a_fresh_venv(tmp_path):
    """A fresh venv (uv): the core (built from this checkout, with its testing extra) and the new plugin."""
    import os
    import shutil

    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    target = _scaffold(tmp_path, "weather")
    venv = tmp_path / "venv"
    core = Path(__file__).parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}

    def run(*argv, cwd=tmp_path):
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    python = str(venv / "bin" / "python")
    wanted = (f"{core}[testing]", "-e", f"{target}[test]", "mypy>=1.10")
    if Path(uv).is_file():
        run(uv, "venv", "--python", sys.executable, str(venv))
        run(uv, "pip", "install", "--python", python, *wanted)
    else:  # a session without uv on its PATH (nox's own venvs): the standard library's venv and pip
        run(sys.executable, "-m", "venv", str(venv))
        run(python, "-m", "pip", "install", "-q", *wanted)
    listing = json.loads(run(str(venv / "bin" / "entropic-mcp"), "plugins", "--json", cwd=target))
    [plugin] = [p for p in listing if p["name"] == "weather"]
    assert plugin["status"] == "active" and plugin["servers"] == ["weather"]
    assert "passed" in run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=target)
    assert "weather: ok" in run(str(venv / "bin" / "entropic-mcp"), "check-plugin", "weather", "--quiet", cwd=target)
    assert "Success" in run(python, "-m", "mypy", "--strict", "src", "tests", cwd=target)
    # The installed core (a wheel, not this checkout) carries the template new-plugin copies.
    run(str(venv / "bin" / "entropic-mcp"), "new-plugin", "second", "--dir", str(tmp_path / "from_wheel"))
    assert (tmp_path / "from_wheel/entropic-mcp-second/src/entropic_mcp_second/__init__.py").is_file()


# -- serve and call always exit ----------------------------------------------------------------------

STUCK_CONFIG = """
[entropic_mcp]
plugins = ["weather", "weather_blocking_tool"]
[storage]
backend = "none"
[permissions]
default = "allow"
[servers.w_blocking_tool]
timeout_seconds = {timeout}
"""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
STUCK_CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "w_blocking_tool.forecast", "arguments": {"city": "Oslo"}},
}


@pytest.fixture
def stuck_project(tmp_path):
    """A project whose w_blocking_tool.forecast never returns; the marker file appears once it is entered."""
    import os

    (tmp_path / "entropic-mcp.toml").write_text(STUCK_CONFIG.format(timeout=300))
    marker = tmp_path / "entered"
    env = {**os.environ, "PYTHONPATH": str(BROKEN_SITE), "WEATHER_STUCK_MARKER": str(marker)}
    return tmp_path, env, marker


def _cli(*args):
    return [sys.executable, "-c", "from entropic_mcp.cli import main; main()", *args]


def _wait_for(path, process):
    import time

    deadline = time.monotonic() + 60
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the tool was never entered"
        time.sleep(0.02)


def test_call_exits_after_its_timeout_though_the_sync_tool_never_returns(stuck_project):
    root, env, marker = stuck_project
    (root / "entropic-mcp.toml").write_text(STUCK_CONFIG.format(timeout=0.5))
    done = subprocess.run(
        _cli("call", "w_blocking_tool.forecast", '{"city": "Oslo"}'),
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert json.loads(done.stdout)["kind"] == "timeout"
    assert marker.exists() and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["call", "serve"])
def test_sigint_during_a_stuck_call_exits_130_with_one_line(stuck_project, command):
    import signal

    root, env, marker = stuck_project
    argv = _cli("call", "w_blocking_tool.forecast", '{"city": "Oslo"}') if command == "call" else _cli("serve")
    process = subprocess.Popen(
        argv, cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    if command == "serve":
        process.stdin.write((json.dumps(INITIALIZE) + "\n" + json.dumps(STUCK_CALL) + "\n").encode())
        process.stdin.flush()
    _wait_for(marker, process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert _without_startup_line(err.decode(), command) == "entropic-mcp: interrupted\n"


def test_serve_exits_when_stdin_closes_though_a_sync_tool_never_returns(stuck_project):
    root, env, marker = stuck_project
    process = subprocess.Popen(
        _cli("serve"), cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdin.write((json.dumps(INITIALIZE) + "\n" + json.dumps(STUCK_CALL) + "\n").encode())
    process.stdin.flush()
    _wait_for(marker, process)
    out, err = process.communicate(timeout=60)  # closes stdin: the client is gone
    assert process.returncode == 0, err
    first = json.loads(out.splitlines()[0])
    assert first["id"] == 1 and "serverInfo" in first["result"]
    assert _without_startup_line(err.decode(), "serve") == ""  # one start-up line, nothing else


def _without_startup_line(err: str, command: str) -> str:
    """serve's stderr after its one start-up line (which config is in force, where asks go)."""
    if command != "serve":
        return err
    first, _, rest = err.partition("\n")
    assert first.startswith("entropic-mcp: config ") and "approvals:" in first, err
    return rest


def test_serve_http_exits_130_on_sigint(stuck_project):
    import signal

    root, env, _ = stuck_project
    process = subprocess.Popen(
        _cli("serve", "--transport", "http", "--port", "0"),
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stderr.readline().decode().startswith("entropic-mcp: config ")
    line = process.stderr.readline().decode()
    assert "serving 2 tools on http://127.0.0.1:" in line
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.decode() == "entropic-mcp: interrupted\n"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sigterm_stops_serve_cleanly_with_status_0_even_during_a_stuck_call(stuck_project, transport):
    import signal

    root, env, marker = stuck_project
    argv = _cli("serve", "--transport", "http", "--port", "0") if transport == "http" else _cli("serve")
    process = subprocess.Popen(
        argv, cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stderr.readline().decode().startswith("entropic-mcp: config ")
    if transport == "http":
        assert "serving 2 tools on http://127.0.0.1:" in process.stderr.readline().decode()
    else:
        process.stdin.write((json.dumps(INITIALIZE) + "\n" + json.dumps(STUCK_CALL) + "\n").encode())
        process.stdin.flush()
        _wait_for(marker, process)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert err.decode() == "entropic-mcp: stopped (SIGTERM)\n"


def test_sigterm_is_reported_when_the_loop_absorbed_the_interrupt(project, monkeypatch):
    # SIGTERM becomes a Ctrl-C; one that lands as the event loop's main task is finishing is
    # absorbed by the loop's runner and serve returns normally: it still stopped on SIGTERM.
    import signal

    from entropic_mcp import _children, _isolation, _serve

    # The interrupt it raises is counted as a real one; the count outlives the test otherwise
    # and every later KeyboardInterrupt raised by plugin code would stop the test process.
    monkeypatch.setattr(_isolation, "_interrupts", _isolation._interrupts)

    def serve_absorbing_the_interrupt(manager, **kwargs):
        try:
            signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt:
            pass

    monkeypatch.setattr(_serve, "serve", serve_absorbing_the_interrupt)
    monkeypatch.setattr(_children, "become_subreaper", lambda: None)
    monkeypatch.setattr(_children, "stop_descendants", lambda: [])
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        result = CliRunner().invoke(cli, ["serve"], obj={})
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])
    assert result.exit_code == 0, result.output
    assert result.stderr.endswith("entropic-mcp: stopped (SIGTERM)\n")


def test_serve_in_a_terminal_shows_how_to_connect_and_stops_on_the_first_ctrl_c(stuck_project):
    import os
    import pty
    import select
    import time

    root, env, _ = stuck_project
    pid, fd = pty.fork()
    if pid == 0:  # the child: serve with the terminal as stdin, stdout and stderr
        os.chdir(root)
        os.execve(sys.executable, _cli("serve"), env)
    seen = b""
    done = 0
    try:
        deadline = time.monotonic() + 60
        while b"Stop: Ctrl-C." not in seen:
            assert time.monotonic() < deadline, seen
            if select.select([fd], [], [], 0.5)[0]:
                seen += os.read(fd, 4096)
        os.write(fd, b"\x03")
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, "serve ignored the first Ctrl-C"
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    pass
    finally:
        if not done:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 130
    text = seen.decode(errors="replace")
    assert '{"command": "entropic-mcp", "args": ["serve"]}' in text
    assert "Traceback" not in text


# -- docs in step with the CLI --------------------------------------------------------------------

REPO = Path(__file__).parents[2]


def test_the_readme_init_sample_is_exactly_what_init_writes(tmp_path, monkeypatch):
    import re

    monkeypatch.chdir(tmp_path)
    assert invoke("init").exit_code == 0
    written = (tmp_path / "entropic-mcp.toml").read_text()
    readme = (REPO / "README.md").read_text()
    match = re.search(r"`entropic-mcp init` writes[^\n]*\n\n```toml\n(.*?)```", readme, re.S)
    assert match, "README.md lost its init sample"
    assert match.group(1) == written


def test_no_page_spells_a_rule_with_parentheses():
    """Rules are `<server>.<tool>:<detail>`; `bash.execute(git log *)` matches nothing."""
    import re

    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    wrong = [
        f"{page.relative_to(REPO)}: {m.group(0)}"
        for page in pages
        for m in re.finditer(r"\"[a-z_]+\.[a-z_]+\([^\"]*\)\"", page.read_text())
    ]
    assert wrong == []


def test_config_prints_external_servers_without_their_secrets(tmp_path):
    (tmp_path / "entropic-mcp.toml").write_text(
        '[external.ref]\ncommand = "mcp-server-git"\nenv = {TOKEN = "s3cret"}\n'
        '[external.web]\nurl = "https://example.invalid/mcp"\nheaders = {Authorization = "Bearer s3cret"}\n'
    )
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "entropic-mcp.toml"), "config", "--json"])
    assert result.exit_code == 0, result.output
    values = {row["key"]: row["value"] for row in json.loads(result.output)["values"]}
    assert values["external.ref"]["command"] == "mcp-server-git" and values["external.ref"]["env"] == {"TOKEN": "***"}
    assert values["external.web"]["headers"] == {"Authorization": "***"}
    assert "s3cret" not in result.output


# -- external approve / list --------------------------------------------------------------------


def test_external_approve_records_the_file_outside_the_project_and_list_shows_it(tmp_path, monkeypatch, user_data_dir):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "entropic-mcp.toml").write_text('[entropic_mcp]\nimport_mcp_json = true\n[storage]\nbackend = "none"\n')
    mcp_json = tmp_path / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"docs": {"command": "docs-server", "args": ["--port", "1"]}}}))
    before = json.loads(invoke("external", "list", "--json").stdout)
    assert before == {"servers": [], "mcp_json": {"file": str(mcp_json.resolve()), "approved": False}}
    approved = invoke("external", "approve")
    assert approved.exit_code == 0 and "docs: docs-server --port 1" in approved.stdout
    after = json.loads(invoke("external", "list", "--json").stdout)
    assert after["mcp_json"]["approved"] is True and [s["name"] for s in after["servers"]] == ["docs"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mcp.json", "entropic-mcp.toml"]
    assert (user_data_dir / "approved-mcp-json.json").is_file()


def test_external_approve_refuses_a_file_that_would_not_load(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text('{"mcpServers": {"x": {"command": 3}}}')
    from entropic_mcp import ConfigError

    with pytest.raises(ConfigError, match=r"mcpServers.x.command"):
        invoke("external", "approve", "bad.json")
