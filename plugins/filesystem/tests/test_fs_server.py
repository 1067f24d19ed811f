"""The server: config validation, permission patterns, duplicate checks, hints, the plugin kit."""

from __future__ import annotations

import importlib.metadata

import anyio
import entropic_mcp_filesystem
import pytest
from entropic_mcp import AccessLevel, CallContext, ConfigError, ServerResponse
from entropic_mcp.testing import check_plugin, check_server
from entropic_mcp_filesystem import FilesystemServer

TOOLS = [
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
    "list_directory",
    "read_files",
    "file_info",
    "move_file",
    "delete_file",
    "create_directory",
]


def test_eleven_tools_in_order(root):
    assert [t["name"] for t in FilesystemServer(root=root).list_tools()] == TOOLS


def test_access_levels_and_hints(root):
    server = FilesystemServer(root=root)
    levels = {name: tool.required_access_level for name, tool in server.tools.items()}
    assert levels == {
        "read_file": AccessLevel.READ,
        "write_file": AccessLevel.WRITE,
        "edit_file": AccessLevel.WRITE,
        "glob": AccessLevel.READ,
        "grep": AccessLevel.READ,
        "list_directory": AccessLevel.READ,
        "read_files": AccessLevel.READ,
        "file_info": AccessLevel.READ,
        "move_file": AccessLevel.WRITE,
        "delete_file": AccessLevel.WRITE,
        "create_directory": AccessLevel.WRITE,
    }
    hints = {name: tool.annotations() for name, tool in server.tools.items()}
    assert all(h["openWorldHint"] is False for h in hints.values())
    assert hints["write_file"]["idempotentHint"] is True
    assert hints["edit_file"]["idempotentHint"] is False
    assert hints["read_file"]["readOnlyHint"] is True and hints["write_file"]["readOnlyHint"] is False


def test_skip_duplicate_check_only_for_the_reads_that_feed_the_tracker(root):
    server = FilesystemServer(root=root)
    expected = {n: n in ("read_file", "read_files") for n in TOOLS}
    assert {name: server.skip_duplicate_check(name) for name in TOOLS} == expected


@pytest.mark.parametrize(
    ("tool", "args", "pattern"),
    [
        ("write_file", {"path": "secrets/a.txt"}, "filesystem.write_file:secrets/a.txt"),
        ("write_file", {"path": "./secrets/../secrets//a.txt"}, "filesystem.write_file:secrets/a.txt"),
        ("read_file", {"path": "src/m.py"}, "filesystem.read_file:src/m.py"),
        ("edit_file", {"path": "x"}, "filesystem.edit_file:x"),
        ("list_directory", {}, "filesystem.list_directory:."),
        ("list_directory", {"path": "docs/"}, "filesystem.list_directory:docs"),
        ("glob", {"pattern": "**/*.py"}, "filesystem.glob:."),
        ("grep", {"pattern": "TODO|FIXME", "path": "src"}, "filesystem.grep:src"),
        ("write_file", {}, "filesystem.write_file"),
        ("write_file", {"path": 5}, "filesystem.write_file"),
        ("write_file", {"path": "a\x00b"}, "filesystem.write_file"),
        ("grep", {}, "filesystem.grep:."),
        ("read_files", {"paths": ["b", "./a"]}, "filesystem.read_files:b"),
        ("file_info", {"path": "x/../y"}, "filesystem.file_info:y"),
        ("move_file", {"source": "a", "destination": "b"}, "filesystem.move_file:a"),
        ("move_file", {"destination": "b"}, "filesystem.move_file:b"),
        ("delete_file", {"path": "d"}, "filesystem.delete_file:d"),
        ("create_directory", {"path": "n/"}, "filesystem.create_directory:n"),
        ("read_file", {"path": "a[1]*.txt"}, "filesystem.read_file:a[[]1][*].txt"),
    ],
)
def test_permission_pattern(root, tool, args, pattern):
    assert FilesystemServer(root=root).permission_pattern(tool, args) == pattern


def test_permission_pattern_resolves_links_so_rules_cannot_be_dodged(root):
    (root / "secrets").mkdir()
    (root / "innocent").symlink_to("secrets")
    server = FilesystemServer(root=root)
    assert server.permission_pattern("write_file", {"path": "innocent/a.txt"}) == "filesystem.write_file:secrets/a.txt"


def test_deny_rule_on_root_relative_paths(root):
    from entropic_mcp import ServerManager, config_from_dict

    config = config_from_dict(
        {
            "storage": {"backend": "none"},
            "permissions": {"default": "allow", "deny": ["filesystem.write_file:secrets/*"]},
        },
        root=root,
    )
    server = FilesystemServer(root=root)
    server.configure({})
    manager = ServerManager(config, servers=[server])
    denied = manager.call_sync("filesystem.write_file", {"path": "./secrets/a.txt", "content": "x"})
    assert denied.kind == "rejected_permission" and not (root / "secrets").exists()
    allowed = manager.call_sync("filesystem.write_file", {"path": "public/a.txt", "content": "x"})
    assert allowed.kind == "ok"


def test_config_is_applied(root, tmp_path):
    server = FilesystemServer(root=root)
    server.configure(
        {
            "allow_outside_root": True,
            "outside_root_allow": ["~"],
            "outside_root_deny": [str(tmp_path)],
            "max_read_bytes": 4096,
            "max_walk_entries": 10,
            "max_glob_results": 5,
            "max_grep_matches": 7,
            "timeout_seconds": 3,
        }
    )
    settings = server.settings
    assert (
        settings.max_read_bytes,
        settings.max_walk_entries,
        settings.max_glob_results,
        settings.max_grep_matches,
    ) == (4096, 10, 5, 7)
    assert settings.policy.allow_outside_root is True and server.default_timeout_seconds == 3.0
    assert settings.policy.outside_root_deny == (tmp_path.resolve(),)
    assert settings.policy.outside_root_allow[0].is_absolute()


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"allow_outside_root": "yes"}, "allow_outside_root"),
        ({"allow_outside_root": 1}, "allow_outside_root"),
        ({"outside_root_allow": ["relative/dir"]}, "outside_root_allow"),
        ({"outside_root_deny": ["./x"]}, "outside_root_deny"),
        ({"outside_root_deny": "/single/string"}, "outside_root_deny"),
        ({"max_read_bytes": 0}, "max_read_bytes"),
        ({"max_read_bytes": True}, "max_read_bytes"),
        ({"max_walk_entries": -1}, "max_walk_entries"),
        ({"max_glob_results": "500"}, "max_glob_results"),
        ({"max_grep_matches": 1.5}, "max_grep_matches"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"max_results": 3}, "max_results"),
        ({"read_line_numbers": "yes"}, "read_line_numbers"),
    ],
)
def test_bad_config_names_the_key(root, table, key):
    with pytest.raises(ConfigError, match=rf"\[servers\.filesystem\].*{key}"):
        FilesystemServer(root=root).configure(table)


def test_end_conversation_and_close_release_state(root):
    server = FilesystemServer(root=root)
    (root / "a").write_text("x")
    anyio.run(server.execute, "read_file", {"path": "a"}, CallContext(conversation_id="k"))
    assert server.tracker.files("k") == 1
    server.end_conversation("k")
    assert server.tracker.files("k") == 0
    server.close()
    server.close()


JUNK = [
    None,
    [],
    "text",
    42,
    {"path": 5},
    {"path": "\udcff"},
    {"path": "\ud800"},
    {"path": "x" * 100_000},
    {"path": "a/" * 3000},
    {"path": "\x00"},
    {"path": ".", "pattern": 7},
    {"pattern": "(" * 50},
    {"pattern": "a", "context": -1},
    {"path": "f", "offset": 0},
    {"path": "f", "limit": "x"},
    {"path": "f", "content": None},
    {"path": "f", "insert_line": -3, "new_string": ""},
    {"path": "f", "old_string": {"a": 1}, "new_string": "x"},
    {"pattern": "{" * 40 + "a"},
]


def test_junk_arguments_never_raise_and_refusals_carry_no_directives(root):
    server = FilesystemServer(root=root)
    (root / "f").write_text("x\n")
    for tool in TOOLS:
        for args in JUNK:
            response = anyio.run(server.execute, tool, args, CallContext())
            assert isinstance(response, ServerResponse)
            if response.is_error:
                assert response.directives == ()
                assert "Traceback" not in response.result
    # a path beyond PATH_MAX is refused: nothing thousands of directories deep is left behind
    assert not (root / "a").exists()


def test_check_server_conformance(root):
    (root / "seed.txt").write_text("seed\n")
    server = FilesystemServer(root=root)
    server.configure({})
    assert check_server(server, examples=25) == []


def test_check_plugin_conformance(root):
    assert check_plugin(entropic_mcp_filesystem, root=root, examples=15) == []


def test_entry_point_is_declared():
    points = importlib.metadata.entry_points(group="entropic_mcp.plugins")
    [point] = [p for p in points if p.name == "filesystem"]
    assert point.value == "entropic_mcp_filesystem" and point.load() is entropic_mcp_filesystem


def test_hook_builds_a_server_at_the_project_root(root):
    from entropic_mcp import PluginConfig, config_from_dict

    config = config_from_dict({}, root=root)
    server = entropic_mcp_filesystem.entropic_mcp_servers(config=PluginConfig(root=root, settings=config))
    assert isinstance(server, FilesystemServer) and server.root == root


def test_import_is_light():
    import subprocess
    import sys

    code = (
        "import sys, pathlib, entropic_mcp_filesystem as fs; fs.FilesystemServer(root=pathlib.Path('.')).list_tools(); "
        "print(','.join(m for m in ('pathspec', 'difflib', 'mcp', 'secrets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_descriptions_state_the_configured_values_not_config_keys(make):
    import orjson

    listed = {t["name"]: t for t in make({"read_page_lines": 750, "max_glob_results": 321}).server.list_tools()}
    text = orjson.dumps(listed).decode()
    assert "${" not in text
    for key in ("read_page_lines", "max_line_chars", "max_glob_results", "max_grep_matches", "max_read_bytes"):
        assert key not in text, key
    assert "up to 750 lines and 65,536 bytes per call" in listed["read_file"]["description"]
    assert "(default 750)" in listed["read_file"]["inputSchema"]["properties"]["limit"]["description"]
    assert "at most 321;" in listed["glob"]["description"]
