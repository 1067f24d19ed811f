"""The server: config, listing, plugin registration, conformance."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import attrs
import entropic_mcp_bash
import pytest
from entropic_mcp import AccessLevel, ConfigError, ServerManager, load_config
from entropic_mcp.testing import check_plugin, check_server
from entropic_mcp_bash import BashServer
from entropic_mcp_bash._settings import KEYS, _Table


def configured(root: Path, table: dict) -> BashServer:
    server = BashServer(root=root)
    server.configure(table)
    return server


def test_defaults(root: Path) -> None:
    settings = configured(root, {}).settings
    assert (settings.shell, settings.timeout_seconds, settings.max_timeout_seconds, settings.max_output_bytes) == (
        "/bin/bash",
        30.0,
        600.0,
        65536,
    )
    assert "PATH" in settings.environment()


def test_every_config_key_is_applied(root: Path, tmp_path: Path) -> None:
    server = configured(
        root,
        {
            "shell": "sh",
            "timeout_seconds": 5,
            "max_timeout_seconds": 50,
            "max_output_bytes": 4096,
            "env_deny": ["*_TOKEN"],
            "env_set": {"A": "b"},
            "allow_outside_root": False,
            "outside_root_allow": [str(tmp_path)],
            "outside_root_deny": ["/etc"],
        },
    )
    settings = server.settings
    assert (settings.shell, settings.timeout_seconds, settings.max_timeout_seconds, settings.max_output_bytes) == (
        "sh",
        5.0,
        50.0,
        4096,
    )
    assert settings.path_policy.allow_outside_root is False
    assert server.default_timeout_seconds > 50


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ({"shel": "/bin/sh"}, "unknown key"),
        ({"shell": ""}, "shell"),
        ({"shell": "/no/such/shell"}, "not an executable"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"timeout_seconds": "30"}, "timeout_seconds"),
        ({"max_timeout_seconds": True}, "max_timeout_seconds"),
        ({"timeout_seconds": 90, "max_timeout_seconds": 60}, "above max_timeout_seconds"),
        ({"max_output_bytes": 10}, "max_output_bytes"),
        ({"max_output_bytes": 1.5}, "max_output_bytes"),
        ({"env_deny": "*_TOKEN"}, "env_deny"),
        ({"env_set": {"A": 1}}, "env_set"),
        ({"env_set": ["A=b"]}, "env_set"),
        ({"allow_outside_root": "sometimes"}, "allow_outside_root"),
        ({"outside_root_allow": ["relative/dir"]}, "absolute"),
        ({"outside_root_deny": "/etc"}, "outside_root_deny"),
        ({"shell": 3}, "shell is a path to a shell"),
        ({"shell": "   "}, "shell"),
        ({"max_timeout_seconds": 0}, "max_timeout_seconds: expected a positive number of seconds"),
        ({"background_timeout_seconds": -1}, "background_timeout_seconds: expected a positive number of seconds"),
        ({"background_timeout_seconds": "1h"}, "background_timeout_seconds is a positive number of seconds"),
        ({"max_output_bytes": "64k"}, "max_output_bytes is an integer of at least 256"),
        ({"max_output_bytes": True}, "max_output_bytes"),
        ({"max_background_runs": -1}, "0 turns background runs off"),
        ({"max_background_runs": 2.5}, "max_background_runs"),
        ({"persist_cwd": 1}, "persist_cwd: expected true or false"),
        ({"persist_cwd": "yes"}, "persist_cwd"),
        ({"env_deny": [""]}, "env_deny"),
        ({"env_deny": [3]}, "env_deny is a list of variable-name globs"),
        ({"env_set": {"A=B": "c"}}, "env_set"),
        ({"env_set": {"A": "b\x00"}}, "env_set"),
        ({"allow_outside_root": 1}, 'allow_outside_root is true, false or "optional"'),
        ({"outside_root_allow": [3]}, "outside_root_allow is a list of absolute directory paths"),
        ({"outside_root_deny": ["/etc", "rel"]}, "outside_root_deny: "),
    ],
)
def test_bad_config_names_the_key(root: Path, table: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=r"\[servers.bash\]") as info:
        configured(root, table)
    assert fragment in str(info.value)


def test_config_keys_match_the_settings_table() -> None:
    # The keys the base is told about are exactly the ones the settings read (it reads timeout_seconds).
    assert {f.name for f in attrs.fields(_Table)} == KEYS | {"timeout_seconds"}


def test_whole_floats_count_as_integers_in_config(root: Path) -> None:
    settings = configured(root, {"max_output_bytes": 4096.0, "max_background_runs": 2.0}).settings
    assert (settings.max_output_bytes, settings.max_background_runs) == (4096, 2)
    assert isinstance(settings.max_output_bytes, int)


def test_a_bad_key_in_the_config_file_names_the_file_and_the_key(tmp_path: Path) -> None:
    config_file = tmp_path / "entropic-mcp.toml"
    config_file.write_text('[storage]\nbackend = "none"\n\n[servers.bash]\nmax_output_bytes = "lots"\n')
    with pytest.raises(ConfigError) as info:
        ServerManager.from_config(load_config(config_file, cwd=tmp_path))
    message = str(info.value)
    assert str(config_file) in message and "[servers.bash] max_output_bytes" in message


def test_lower_maximum_lowers_the_default_timeout(root: Path) -> None:
    assert configured(root, {"max_timeout_seconds": 10}).settings.timeout_seconds == 10


def test_tools_access_levels_and_duplicate_checks(root: Path) -> None:
    server = configured(root, {})
    assert list(server.tools) == ["execute", "output", "kill", "list"]
    assert server.access_level("execute") is AccessLevel.WRITE
    assert server.access_level("kill") is AccessLevel.WRITE
    assert server.access_level("output") is AccessLevel.READ
    assert server.access_level("list") is AccessLevel.READ
    assert server.skip_duplicate_check("execute") is False
    # Polling a background run repeats its arguments by design.
    assert server.skip_duplicate_check("output") is True
    assert server.skip_duplicate_check("list") is True
    annotations = server.list_tools()[0]
    assert annotations["inputSchema"]["required"] == ["command"]


def test_registered_as_an_entry_point() -> None:
    names = {ep.name: ep.value for ep in entry_points(group="entropic_mcp.plugins")}
    assert names.get("bash") == "entropic_mcp_bash"


def test_listing_the_tool_does_not_load_the_parser_or_the_runner() -> None:
    code = (
        "import sys, entropic_mcp_bash\n"
        "entropic_mcp_bash.BashServer(root='.').list_tools()\n"
        "print(*(m in sys.modules for m in ('tree_sitter', 'tree_sitter_bash', 'entropic_mcp_bash._process')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_conforms_to_the_server_contract(root: Path) -> None:
    # Fuzzed commands run for real: no programs on PATH and a short timeout keep them harmless.
    server = configured(root, {"timeout_seconds": 2, "env_set": {"PATH": "/nonexistent"}})
    server.grace = 0.2
    try:
        assert check_server(server, examples=25) == []
    finally:
        server.close()  # fuzzed background runs end with the server
        assert server.runs.of("default") == []


def test_plugin_conforms(tmp_path: Path) -> None:
    config = {
        "storage": {"backend": "none"},
        "servers": {"bash": {"timeout_seconds": 2, "env_set": {"PATH": "/nonexistent"}}},
    }
    assert check_plugin(entropic_mcp_bash, root=tmp_path, config=config, examples=10) == []
