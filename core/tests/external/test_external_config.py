"""``[external.<name>]`` and ``import_mcp_json``: validated, with errors that name the file and the key."""

from __future__ import annotations

import json
import logging

import pytest
from entropic_mcp import ConfigError
from entropic_mcp._config import load_config
from entropic_mcp._userdata import approve


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def approved(path, text):
    """Write a .mcp.json and approve exactly that content, as `entropic-mcp external approve` does."""
    write(path, text)
    approve(path, path.read_bytes())
    return path


def test_stdio_and_http_servers_are_read_with_defaults(tmp_path):
    write(
        tmp_path / "entropic-mcp.toml",
        """
[external.fetch]
command = "uvx"
args = ["mcp-server-fetch"]
env = { FETCH_UA = "bot" }
cwd = "tools"
read_only_tools = ["fetch"]
[external.docs]
url = "https://example.invalid/mcp"
headers = { Authorization = "Bearer x" }
plan = "per_conversation"
access = { search = "READ", publish = "write" }
max_operations = 2
idle_seconds = 30
""",
    )
    config = load_config(cwd=tmp_path)
    fetch, docs = config.external["fetch"], config.external["docs"]
    assert (fetch.transport, fetch.command, fetch.args, dict(fetch.env)) == (
        "stdio",
        "uvx",
        ("mcp-server-fetch",),
        {"FETCH_UA": "bot"},
    )
    assert fetch.plan == "shared" and fetch.call_timeout_seconds == 60 and fetch.max_operations == 8
    assert fetch.access["fetch"].name == "READ"
    assert (docs.transport, docs.url, docs.plan, docs.max_operations, docs.idle_seconds) == (
        "http",
        "https://example.invalid/mcp",
        "per_conversation",
        2,
        30,
    )
    assert {k: v.name for k, v in docs.access.items()} == {"search": "READ", "publish": "WRITE"}
    assert "Bearer" not in repr(docs)  # headers carry credentials


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("command = 'x'\nurl = 'http://h/mcp'", "needs exactly one of 'command'"),
        ("args = ['x']", "needs exactly one of 'command'"),
        ("command = 'x'\ncomand = 'y'", "unknown key(s) ['comand']"),
        ("command = 'x'\nplan = 'pooled'", "external.s.plan: expected one of 'shared', 'per_conversation'"),
        ("command = 'x'\nargs = 'a b'", "external.s.args: expected a list of strings"),
        ("command = 'x'\nheaders = { A = 'b' }", "external.s.headers: only a Streamable HTTP server"),
        ("url = 'http://h/mcp'\nenv = { A = 'b' }", "external.s.env: only a stdio server"),
        ("url = 'ftp://h/mcp'", "external.s.url: expected an http:// or https:// URL"),
        ("command = 'x'\nmax_operations = 0", "external.s.max_operations: expected an integer >= 1"),
        ("command = 'x'\ncall_timeout_seconds = -1", "external.s.call_timeout_seconds: expected a positive number"),
        ("command = 'x'\naccess = { t = 'ADMIN' }", 'external.s.access.t: expected "NONE", "READ" or "WRITE"'),
        ("command = 'x'\nenv = { A = 1 }", "external.s.env: expected a table of strings"),
    ],
)
def test_bad_external_tables_name_file_and_key(tmp_path, table, message):
    path = write(tmp_path / "entropic-mcp.toml", f"[external.s]\n{table}\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert str(path) in str(excinfo.value)
    assert message in str(excinfo.value)


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "ld_preload",
        "Ld_Preload",
        "DYLD_INSERT_LIBRARIES",
        "DYLD_LIBRARY_PATH",
        "ENTROPIC_MCP_TOKEN",
        "ENTROPIC_MCP_CONFIG",
        "entropic_mcp_strict_plugins",
    ],
)
def test_refused_environment_variables_are_config_errors(tmp_path, name):
    path = write(tmp_path / "entropic-mcp.toml", f'[external.s]\ncommand = "x"\nenv = {{ "{name}" = "v" }}\n')
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert f"external.s.env.{name}" in str(excinfo.value)
    assert "never passed to an external server" in str(excinfo.value)


@pytest.mark.parametrize("name", ["A=B", ""])
def test_malformed_environment_names_are_refused(tmp_path, name):
    path = write(tmp_path / "entropic-mcp.toml", f'[external.s]\ncommand = "x"\nenv = {{ "{name}" = "v" }}\n')
    with pytest.raises(ConfigError, match="environment variable name"):
        load_config(path)


def test_server_names_must_be_usable_as_tool_prefixes(tmp_path):
    path = write(tmp_path / "entropic-mcp.toml", '[external."my.server"]\ncommand = "x"\n')
    with pytest.raises(ConfigError, match="server names use letters"):
        load_config(path)


MCP_JSON = {
    "mcpServers": {
        "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}, "autoApprove": ["x"]},
        "docs": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"X-Key": "k"}},
        "old": {"type": "sse", "url": "https://example.invalid/sse"},
        "fetch": {"command": "other"},
        "bad name": {"command": "x"},
    }
}


@pytest.mark.parametrize("where", ["[entropic_mcp]\nimport_mcp_json = true\n", "import_mcp_json = true\n"])
def test_import_mcp_json_reads_mcp_servers_and_skips_with_warnings(tmp_path, caplog, where):
    approved(tmp_path / ".mcp.json", json.dumps(MCP_JSON))
    write(tmp_path / "entropic-mcp.toml", where + '[external.fetch]\ncommand = "uvx"\nargs = ["mcp-server-fetch"]\n')
    with caplog.at_level(logging.WARNING):
        config = load_config(cwd=tmp_path)
    assert sorted(config.external) == ["docs", "fetch", "git"]
    assert config.external["fetch"].args == ("mcp-server-fetch",)  # the configured one wins
    assert config.external["git"].command == "uvx" and dict(config.external["git"].env) == {"A": "1"}
    assert config.external["docs"].transport == "http"
    assert "mcpServers.fetch skipped" in caplog.text
    assert "mcpServers.old skipped: the SSE transport" in caplog.text
    assert "mcpServers.bad name skipped" in caplog.text


def test_import_mcp_json_takes_a_path_relative_to_the_config_file(tmp_path):
    (tmp_path / "cfg").mkdir()
    approved(tmp_path / "cfg" / "servers.json", json.dumps({"mcpServers": {"git": {"command": "uvx"}}}))
    write(tmp_path / "cfg" / "entropic-mcp.toml", '[entropic_mcp]\nimport_mcp_json = "servers.json"\n')
    assert list(load_config(tmp_path / "cfg" / "entropic-mcp.toml").external) == ["git"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "import_mcp_json: file not found"),
        ("{not json", "invalid JSON"),
        ('{"servers": {}}', 'expected an object with "mcpServers"'),
        ('{"mcpServers": {"g": {"command": 3}}}', "mcpServers.g.command: expected a string"),
        ('{"mcpServers": {"g": {"command": "x", "env": {"LD_PRELOAD": "/evil.so"}}}}', "mcpServers.g.env.LD_PRELOAD"),
        ('{"mcpServers": {"g": {"type": "websocket", "url": "ws://h"}}}', "mcpServers.g.type"),
        ('{"mcpServers": {"g": []}}', "mcpServers.g: expected an object"),
    ],
)
def test_bad_mcp_json_names_the_file_and_entry(tmp_path, content, message):
    if content is not None:
        approved(tmp_path / ".mcp.json", content)
    write(tmp_path / "entropic-mcp.toml", "[entropic_mcp]\nimport_mcp_json = true\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(cwd=tmp_path)
    assert ".mcp.json" in str(excinfo.value)
    assert message in str(excinfo.value)


def test_an_unapproved_mcp_json_adds_no_server_and_says_how_to_approve_it(tmp_path, caplog):
    path = write(tmp_path / ".mcp.json", json.dumps({"mcpServers": {"git": {"command": "uvx"}}}))
    write(tmp_path / "entropic-mcp.toml", "[entropic_mcp]\nimport_mcp_json = true\n")
    with caplog.at_level(logging.WARNING):
        config = load_config(cwd=tmp_path)
    assert dict(config.external) == {}
    assert (config.mcp_json, config.mcp_json_approved) == (path.resolve(), False)
    [line] = [r.getMessage() for r in caplog.records if ".mcp.json" in r.getMessage()]
    assert f"entropic-mcp external approve {path.resolve()}" in line


def test_an_approved_mcp_json_is_unapproved_again_once_it_changes(tmp_path):
    path = approved(tmp_path / ".mcp.json", json.dumps({"mcpServers": {"git": {"command": "uvx"}}}))
    write(tmp_path / "entropic-mcp.toml", "[entropic_mcp]\nimport_mcp_json = true\n")
    assert list(load_config(cwd=tmp_path).external) == ["git"]
    write(path, json.dumps({"mcpServers": {"git": {"command": "sh", "args": ["-c", "evil"]}}}))
    config = load_config(cwd=tmp_path)
    assert dict(config.external) == {} and not config.mcp_json_approved


def test_an_approval_is_kept_outside_the_project(tmp_path, user_data_dir):
    project = tmp_path / "project"
    project.mkdir()
    approved(project / ".mcp.json", "{}")
    assert [p.name for p in project.iterdir()] == [".mcp.json"]
    assert (user_data_dir / "approved-mcp-json.json").is_file()


def test_an_unapproved_mcp_json_that_would_not_load_does_not_stop_the_host(tmp_path):
    write(tmp_path / ".mcp.json", "{not json")
    write(tmp_path / "entropic-mcp.toml", "[entropic_mcp]\nimport_mcp_json = true\n")
    assert not load_config(cwd=tmp_path).mcp_json_approved


def test_servers_table_for_an_external_server_is_refused(tmp_path):
    from entropic_mcp import ServerManager

    write(
        tmp_path / "entropic-mcp.toml",
        '[entropic_mcp]\nplugins = []\n[external.f]\ncommand = "true"\nconnect_timeout_seconds = 2\n'
        "[servers.f]\ntimeout_seconds = 3\n",
    )
    with pytest.raises(ConfigError, match=r"\[servers.f\] does not apply to the external server"):
        ServerManager.from_config(load_config(cwd=tmp_path), load_entry_points=False).close()


def test_trust_annotations_is_off_unless_set_and_takes_only_a_boolean(tmp_path):
    path = write(tmp_path / "entropic-mcp.toml", '[external.a]\ncommand = "x"\n[external.b]\ncommand = "x"\n')
    path.write_text(path.read_text() + "trust_annotations = true\n")
    external = load_config(path).external
    assert (external["a"].trust_annotations, external["b"].trust_annotations) == (False, True)
    write(path, '[external.a]\ncommand = "x"\ntrust_annotations = "yes"\n')
    with pytest.raises(ConfigError, match="external.a.trust_annotations: expected true or false"):
        load_config(path)
