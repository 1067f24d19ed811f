import pytest
from entropic_mcp import AccessLevel, ConfigError, config_from_dict, load_config


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file(tmp_path, user_data_dir):
    config = load_config(cwd=tmp_path)
    assert config.path is None
    assert config.root == tmp_path.resolve()
    assert config.permissions.default == "ask"
    assert config.storage.backend == "tinydb"
    # Outside the project, in the per-user data directory, one store per project root.
    assert config.storage_path.parent.parent == user_data_dir.resolve() / "projects"
    assert config.storage_path.name == "store" and not config.storage_path.is_relative_to(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    assert load_config(cwd=other).storage_path != config.storage_path


def test_found_in_the_working_directory_and_root_is_relative_to_the_file(tmp_path):
    (tmp_path / "proj").mkdir()
    write(tmp_path / "entropic-mcp.toml", '[entropic_mcp]\nroot = "proj"\n')
    config = load_config(cwd=tmp_path)
    assert config.root == (tmp_path / "proj").resolve()
    assert config.sources["entropic_mcp.root"] == str((tmp_path / "entropic-mcp.toml").resolve())


def test_explicit_path_and_environment_variable(tmp_path, monkeypatch):
    other = write(tmp_path / "other.toml", "[pipeline]\nmax_result_bytes = 10\n")
    assert load_config(other, cwd=tmp_path).pipeline.max_result_bytes == 10
    monkeypatch.setenv("ENTROPIC_MCP_CONFIG", str(other))
    assert load_config(cwd=tmp_path).pipeline.max_result_bytes == 10
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[permissions]\ndefualt = 'ask'\n", "[permissions] unknown key 'defualt'; expected one of: default"),
        (
            "[permissions]\ndefault = 'maybe'\n",
            "permissions.default: expected one of 'ask', 'allow', 'deny', got 'maybe'",
        ),
        ("[pipeline]\nmax_result_bytes = 'big'\n", "pipeline.max_result_bytes: expected an integer >= 0, got 'big'"),
        ("[permissions]\nallow = 'git.*'\n", "permissions.allow: expected a list of strings"),
        ("[nonsense]\nx = 1\n", "unknown section [nonsense]"),
        ("[external.fetch]\ncommand = 'uvx'\nurl = 'http://127.0.0.1/mcp'\n", "needs exactly one of 'command'"),
        ("[external.fetch]\ncomand = 'uvx'\n", "[external.fetch] unknown key(s) ['comand']"),
        ("[entropic_mcp]\nimport_mcp_json = 3\n", "entropic_mcp.import_mcp_json: expected true, false, or the path"),
        ("[identities.r]\nkeys = { 'fs.*' = 'ADMIN' }\n", 'identities.r.keys.fs.*: expected "NONE", "READ" or "WRITE"'),
        ("not toml = = 1\n", "invalid TOML"),
    ],
)
def test_bad_config_names_file_key_and_expectation(tmp_path, text, message):
    path = write(tmp_path / "entropic-mcp.toml", text)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert str(path) in str(excinfo.value)
    assert message in str(excinfo.value)


def test_local_file_overrides_values_and_adds_rules(tmp_path):
    write(
        tmp_path / "entropic-mcp.toml",
        '[permissions]\ndefault = "ask"\nallow = ["git.status"]\ndeny = ["bash.execute:rm *"]\n'
        "[pipeline]\nmax_result_bytes = 100\n",
    )
    write(
        tmp_path / "entropic-mcp.local.toml", '[permissions]\nallow = ["git.log"]\n[pipeline]\nmax_result_bytes = 200\n'
    )
    config = load_config(cwd=tmp_path)
    assert config.permissions.allow == ("git.status", "git.log")
    assert config.permissions.deny == ("bash.execute:rm *",)
    assert config.pipeline.max_result_bytes == 200
    assert config.sources["pipeline.max_result_bytes"].endswith("entropic-mcp.local.toml")


def test_identities_servers_and_serve_tables(tmp_path):
    config = config_from_dict(
        {
            "identities": {"researcher": {"keys": {"filesystem.*": "READ", "entropic.*": "write"}}},
            "servers": {"bash": {"timeout_seconds": 5}},
            "serve": {"tool_names": "underscored"},
        },
        root=tmp_path,
    )
    assert config.identities["researcher"].keys == {"filesystem.*": AccessLevel.READ, "entropic.*": AccessLevel.WRITE}
    assert config.server_table("bash") == {"timeout_seconds": 5}
    assert config.server_table("git") == {}
    assert config.serve.tool_names == "underscored"


def test_root_must_be_a_directory(tmp_path):
    with pytest.raises(ConfigError, match="is not a directory"):
        config_from_dict({"entropic_mcp": {"root": "missing"}}, root=tmp_path)


@pytest.mark.parametrize(
    ("backend", "setting", "shared"),
    [
        ("tinydb", None, False),
        ("none", None, False),
        ("postgres", None, True),
        ("postgres", "auto", True),
        ("postgres", "memory", False),
        ("tinydb", "store", True),
    ],
)
def test_conversation_state_follows_the_backend_unless_set(tmp_path, backend, setting, shared):
    table = {"backend": backend} if setting is None else {"backend": backend, "conversation_state": setting}
    config = config_from_dict({"storage": table}, root=tmp_path)
    assert config.storage.shares_state is shared


def test_conversation_state_takes_only_the_three_places(tmp_path):
    with pytest.raises(ConfigError, match=r"storage.conversation_state.*auto.*store.*memory"):
        config_from_dict({"storage": {"conversation_state": "disk"}}, root=tmp_path)
