"""Host side of issue 16: with all 20 broken weather plugins installed, the other plugins keep working.

Each broken plugin that the host can see is broken at load (it fails to import or register, its
servers hook raises or returns garbage, its server clashes or its schema is invalid) is listed as
``failed`` with its error and skipped; ``plugins``, ``tools``, ``call`` and ``serve`` go on with
the rest. Faults that only show when called (a raising, garbage-returning or blocking tool, a
raising or over-reaching hook) leave every other tool answering.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

BROKEN_SITE = Path(__file__).parent / "broken_plugins"
FAILED_AT_LOAD = {
    "weather_import_error": "No module named 'weather_api_client'",
    "weather_raising_servers": "no API key in WEATHER_API_KEY",
    "weather_misspelled_hook": "entropic_mcp_server",
    "weather_servers_wrong_type": "returned str",
    "weather_servers_class": "entropic_mcp_servers returned",
    "weather_duplicate_server": "w_duplicate_server",
    "weather_invalid_schema": "forecast.json",
    "weather_missing_tool_file": "weather_missing_tool_file/tools/forecast.json",
    "weather_malformed_tool_file": "invalid JSON",
    "weather_raising_configure": "units must be set",
}
GIT_INSTALLED = importlib.util.find_spec("entropic_mcp_git") is not None


@pytest.fixture
def project(tmp_path):
    (tmp_path / "entropic-mcp.toml").write_text(
        '[storage]\nbackend = "none"\n[permissions]\ndefault = "allow"\n'
        "[servers.w_blocking_tool]\ntimeout_seconds = 0.5\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ENTROPIC_MCP_STRICT_PLUGINS"}
    env["PYTHONPATH"] = str(BROKEN_SITE)
    return tmp_path, env


def cli(project, *args):
    root, env = project
    argv = [sys.executable, "-c", "from entropic_mcp.cli import main; main()", *args]
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_plugins_lists_each_plugin_broken_at_load_as_failed_and_the_rest_active(project):
    done = cli(project, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    listing = {p["name"]: p for p in json.loads(done.stdout)}
    for name, error in FAILED_AT_LOAD.items():
        assert listing[name]["status"] == "failed", listing[name]
        assert error in listing[name]["error"], listing[name]
    assert listing["weather"]["status"] == "active" and listing["weather"]["servers"] == ["weather"]
    for name in ("weather_raising_tool", "weather_garbage_tool", "weather_blocking_tool", "weather_pattern_for_others"):
        assert listing[name]["status"] == "active", listing[name]
    if GIT_INSTALLED:  # the first-party server keeps its name; the newcomer is the one that fails
        assert listing["git"]["status"] == "active"
        assert listing["weather_first_party_name"]["status"] == "failed"


def test_tools_and_call_work_for_the_other_plugins(project):
    done = cli(project, "tools", "--json")
    assert done.returncode == 0, done.stderr
    names = {tool["name"] for tool in json.loads(done.stdout)}
    assert {"weather.forecast", "w_raising_tool.forecast", "w_garbage_tool.forecast"} <= names
    assert not any(name.startswith(("w_invalid_schema.", "w_raising_configure.")) for name in names)
    done = cli(project, "call", "weather.forecast", '{"city": "Oslo"}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kind"] == "ok"


def test_serve_answers_for_the_other_plugins_while_broken_tools_fail_alone(project):
    from mcp import Client, StdioServerParameters

    root, env = project
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from entropic_mcp.cli import main; main()", "serve"],
        cwd=str(root),
        env=env,
    )

    async def main():
        async with Client(params, read_timeout_seconds=60) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            answers = {}
            for tool in ("w_raising_tool", "w_garbage_tool", "w_blocking_tool", "w_raising_pattern", "weather"):
                answers[tool] = await client.call_tool(f"{tool}.forecast", {"city": "Oslo"})
            return names, answers

    names, answers = anyio.run(main)
    assert "weather_forecast" in names
    for tool in ("w_raising_tool", "w_garbage_tool", "w_blocking_tool"):
        assert answers[tool].is_error is True, tool
    assert answers["weather"].is_error is False
    assert json.loads(answers["weather"].content[0].text)["city"] == "Oslo"
