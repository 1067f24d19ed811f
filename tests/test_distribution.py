"""Everything installed together: the first-party plugins found through their real entry points."""

import json
import subprocess
import sys

import pytest

FIRST_PARTY = {
    "filesystem": "entropic-mcp-filesystem",
    "bash": "entropic-mcp-bash",
    "git": "entropic-mcp-git",
    "entropic": "entropic-mcp-entropic",
}


def run_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-c", "from entropic_mcp.cli import main; main()", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path):
    (tmp_path / "entropic-mcp.toml").write_text(
        '[servers.entropic]\ntiers = ["lead", "researcher"]\n[permissions]\nallow_read = true\n'
    )
    return tmp_path


def test_every_first_party_plugin_is_active_from_its_entry_point(project):
    result = run_cli("plugins", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    listing = {p["name"]: p for p in json.loads(result.stdout)}
    for name, distribution in FIRST_PARTY.items():
        assert listing[name]["status"] == "active", listing[name]
        assert listing[name]["distribution"] == distribution
        assert listing[name]["servers"] == [name]
    # The template is what new-plugin copies, not a product: a dev install does not serve it.
    assert "template" not in listing


def test_tools_lists_every_server_with_access_levels(project):
    tools = {t["name"]: t for t in json.loads(run_cli("tools", "--json", cwd=project).stdout)}
    assert tools["filesystem.read_file"]["access"] == "READ"
    assert tools["filesystem.write_file"]["access"] == "WRITE"
    assert tools["git.reset"]["annotations"]["destructiveHint"] is True
    assert tools["bash.execute"]["annotations"]["readOnlyHint"] is False
    assert tools["entropic.delegate"]["server"] == "entropic"
    assert {t["server"] for t in tools.values()} >= set(FIRST_PARTY)


def test_a_real_call_through_the_cli(project):
    (project / "notes.txt").write_text("one\ntwo\n")
    result = run_cli("call", "filesystem.read_file", '{"path": "notes.txt", "format": "json"}', cwd=project)
    envelope = json.loads(result.stdout)
    assert envelope["kind"] == "ok", envelope
    assert json.loads(envelope["result"])["lines"] == ["one", "two"]
    assert envelope["directives"][0]["type"] == "context_anchor"


def test_enabling_a_plugin_that_is_not_installed_says_what_to_install(tmp_path):
    (tmp_path / "entropic-mcp.toml").write_text('[entropic_mcp]\nplugins = ["filesystem", "weather"]\n')
    result = run_cli("tools", cwd=tmp_path)
    assert result.returncode == 2
    assert "'weather' enabled in config but not installed" in result.stderr
    assert "entry point 'weather'" in result.stderr


@pytest.mark.parametrize("name", sorted(FIRST_PARTY))
def test_check_plugin_passes_for_each_first_party_plugin(project, name):
    result = run_cli("check-plugin", name, "--examples", "10", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
