import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from entropic_mcp.cli import _hoist_config, cli


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
    assert json.loads(result.stdout) == {"plugin": "fakegood", "ok": True, "problems": []}
    assert result.exit_code == 0
    assert "fakegood: checking server 'good'" in result.stderr


BROKEN_SITE = Path(__file__).parent / "broken_plugins"


@pytest.fixture
def broken_project(project, monkeypatch):
    monkeypatch.syspath_prepend(str(BROKEN_SITE))
    return project


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        ("weather_no_hooks", "not marked @hookimpl"),
        ("weather_misspelled_hook", "did you mean entropic_mcp_servers"),
        ("weather_raising_tool", "raised ConnectionError"),
        ("weather_first_party_name", "'git' is also registered by plugin 'git'"),
    ],
)
def test_check_plugin_is_check_plugin_with_progress_and_fails_on_any_problem(broken_project, plugin, expected):
    result = CliRunner().invoke(cli, ["check-plugin", plugin, "--examples", "5", "--timeout", "0.3"], obj={})
    assert result.exit_code == 1, result.output
    assert expected in result.stdout
    assert f"{plugin}: importing plugin {plugin!r}" in result.stderr


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
