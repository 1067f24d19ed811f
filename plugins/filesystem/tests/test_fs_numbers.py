"""One number rule (entropic_mcp.toolkit): 3.0 is the integer 3; 3.5, booleans and strings are not.

Every integer argument of every tool, through the pipeline (schema check, then the tool's own
reader) and straight into the tool (the reader alone); and the integer keys of
``[servers.filesystem]``, whose errors name the file, the table and the key.
"""

from __future__ import annotations

import math
from pathlib import Path

import entropic_mcp_filesystem
import pytest
from entropic_mcp import CallContext, ConfigError, ServerManager, ToolError, load_config
from entropic_mcp.testing import fresh_plugins
from entropic_mcp_filesystem import FilesystemServer

#: (tool, arguments without the integer, integer argument, a valid value)
INTEGERS = [
    ("read_file", {"path": "a.txt"}, "offset", 2),
    ("read_file", {"path": "a.txt"}, "limit", 1),
    ("read_file", {"path": "a.txt"}, "column", 2),
    ("read_files", {"paths": ["a.txt", "b.txt"]}, "limit", 1),
    ("grep", {"pattern": "two"}, "context", 1),
    ("grep", {"pattern": "two"}, "before_context", 1),
    ("grep", {"pattern": "two"}, "after_context", 1),
    ("grep", {"pattern": "line"}, "head_limit", 1),
    ("grep", {"pattern": "line"}, "offset", 1),
    ("list_directory", {"path": ".", "recursive": True}, "max_depth", 1),
]
IDS = [f"{tool}.{name}" for tool, _, name, _ in INTEGERS]
#: Not integers under the rule, whatever the reader's bounds.
NOT_INTEGERS = [2.5, 1.0000001, True, False, "2", [2], {"n": 2}, math.nan, math.inf, -math.inf]


@pytest.fixture
def tree(root: Path) -> Path:
    (root / "a.txt").write_text("line one\nline two\nline three\n")
    (root / "b.txt").write_text("line four\nline five\n")
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "sub" / "deeper" / "c.txt").write_text("line six\n")
    return root


@pytest.mark.parametrize(("tool", "base", "name", "value"), INTEGERS, ids=IDS)
def test_a_whole_float_is_the_integer_through_the_pipeline(make, tree, tool, base, name, value):
    fs = make()
    as_int = fs.ok(tool, {**base, name: value}, conversation="int")
    as_float = fs.ok(tool, {**base, name: float(value)}, conversation="float")
    assert as_float == as_int
    # The argument changes the answer, so the float was read, not dropped for the default.
    assert fs.ok(tool, base, conversation="default") != as_int


def test_grep_offset_as_a_whole_float_skips_entries(make, tree):
    fs = make()
    every = fs.ok("grep", {"pattern": "line", "output_mode": "files_with_matches"}, conversation="a")
    later = fs.ok("grep", {"pattern": "line", "output_mode": "files_with_matches", "offset": 1.0}, conversation="b")
    assert len(every) >= 3 and later == every[1:]


def test_insert_line_as_a_whole_float(make, tree):
    fs = make()
    fs.ok("read_file", {"path": "a.txt"})
    fs.ok("edit_file", {"path": "a.txt", "new_string": "inserted", "insert_line": 1.0})
    assert (tree / "a.txt").read_text() == "line one\ninserted\nline two\nline three\n"
    fs.ok("read_file", {"path": "b.txt"})
    fs.ok("edit_file", {"path": "b.txt", "edits": [{"new_string": "top", "insert_line": 0.0}]})
    assert (tree / "b.txt").read_text() == "top\nline four\nline five\n"


@pytest.mark.parametrize("bad", NOT_INTEGERS, ids=repr)
@pytest.mark.parametrize(("tool", "base", "name", "value"), INTEGERS, ids=IDS)
def test_not_an_integer_is_refused_through_the_pipeline(make, tree, tool, base, name, value, bad):
    error = make().error(tool, {**base, name: bad})
    assert error["error"] == "invalid_args" and name in error["message"]


@pytest.mark.parametrize("bad", NOT_INTEGERS, ids=repr)
@pytest.mark.parametrize(("tool", "base", "name", "value"), INTEGERS, ids=IDS)
def test_not_an_integer_is_refused_by_the_tool_itself(tree, tool, base, name, value, bad):
    """Without the schema stage (a tool's execute called as is), the toolkit's reader refuses it."""
    server = FilesystemServer(root=tree)
    server.configure({})
    with pytest.raises(ToolError) as caught:
        server.tools[tool].execute({**base, name: bad}, CallContext(conversation_id="direct"))
    assert caught.value.code == "invalid_args" and f"'{name}'" in caught.value.message


@pytest.mark.parametrize("bad", [*NOT_INTEGERS, -1.0])
def test_insert_line_not_an_integer_is_refused_by_the_tool_itself(tree, bad):
    server = FilesystemServer(root=tree)
    server.configure({})
    for args in (
        {"path": "a.txt", "new_string": "x", "insert_line": bad},
        {"path": "a.txt", "edits": [{"new_string": "x", "insert_line": bad}]},
    ):
        with pytest.raises(ToolError) as caught:
            server.tools["edit_file"].execute(args, CallContext(conversation_id="direct"))
        assert caught.value.code == "invalid_args" and "insert_line" in caught.value.message
    assert (tree / "a.txt").read_text() == "line one\nline two\nline three\n"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("list_directory", {"path": ".", "recursive": True, "max_depth": 65.0}),
        ("list_directory", {"path": ".", "recursive": True, "max_depth": 0.0}),
        ("grep", {"pattern": "line", "head_limit": 0.0}),
        ("grep", {"pattern": "line", "context": -1.0}),
        ("read_file", {"path": "a.txt", "offset": 0.0}),
        ("read_file", {"path": "a.txt", "limit": 0.0}),
    ],
)
def test_a_whole_float_out_of_bounds_is_refused_like_the_integer(make, tree, tool, args):
    fs = make()
    assert fs.error(tool, args)["error"] == "invalid_args"
    server = FilesystemServer(root=tree)
    server.configure({})
    with pytest.raises(ToolError) as caught:
        server.tools[tool].execute(args, CallContext(conversation_id="direct"))
    assert caught.value.code == "invalid_args"


# -- [servers.filesystem] ------------------------------------------------------------------------

INTEGER_KEYS = [
    "max_read_bytes",
    "max_walk_entries",
    "max_glob_results",
    "max_grep_matches",
    "read_page_lines",
    "max_line_chars",
    "max_edit_bytes",
    "max_media_bytes",
    "max_grep_line_bytes",
]


@pytest.mark.parametrize("key", INTEGER_KEYS)
def test_a_whole_float_setting_is_the_integer(root, key):
    server = FilesystemServer(root=root)
    server.configure({key: 4096.0})
    value = getattr(server.settings, key)
    assert value == 4096 and type(value) is int


@pytest.mark.parametrize("bad", [4096.5, True, False, "4096", [4096], math.nan, math.inf, 0.0, -5])
@pytest.mark.parametrize("key", INTEGER_KEYS)
def test_a_setting_that_is_not_an_integer_or_too_small_names_the_key(root, key, bad):
    server = FilesystemServer(root=root)
    with pytest.raises(ConfigError, match=rf"\[servers\.filesystem\] {key}: expected"):
        server.configure({key: bad})
    assert server.settings.max_read_bytes == 256 * 1024  # the old settings stay


def test_every_default_is_kept(root):
    server = FilesystemServer(root=root)
    server.configure({})
    assert (
        server.settings.max_read_bytes,
        server.settings.max_walk_entries,
        server.settings.max_glob_results,
        server.settings.max_grep_matches,
        server.settings.read_page_lines,
        server.settings.max_line_chars,
        server.settings.max_edit_bytes,
        server.settings.max_media_bytes,
        server.settings.max_grep_line_bytes,
        server.settings.allow_hard_links,
        server.settings.policy.allow_outside_root,
    ) == (262144, 250_000, 500, 100, 2000, 2000, 10 * 1024 * 1024, 5 * 1024 * 1024, 1024 * 1024, False, "optional")


def test_a_bad_setting_in_the_config_file_names_file_table_and_key(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    config_file = project / "entropic-mcp.toml"
    config_file.write_text('[storage]\nbackend = "none"\n\n[servers.filesystem]\nmax_grep_matches = 2.5\n')
    config = load_config(config_file)
    with pytest.raises(ConfigError) as caught:
        ServerManager.from_config(config, plugins=fresh_plugins(entropic_mcp_filesystem), load_entry_points=False)
    message = str(caught.value)
    assert str(config_file) in message and "[servers.filesystem] max_grep_matches: expected an integer" in message

    config_file.write_text('[storage]\nbackend = "none"\n\n[servers.filesystem]\nmax_grep_matches = 7.0\n')
    manager = ServerManager.from_config(
        load_config(config_file), plugins=fresh_plugins(entropic_mcp_filesystem), load_entry_points=False
    )
    try:
        server = manager.servers["filesystem"]
        assert isinstance(server, FilesystemServer) and server.settings.max_grep_matches == 7
    finally:
        manager.close()


# -- text arguments --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("grep", {"pattern": "li\x00ne"}),
        ("grep", {"pattern": "line", "glob": "*.t\x00xt"}),
        ("grep", {"pattern": "line", "type": "p\x00y"}),
        ("glob", {"pattern": "*\x00.txt"}),
    ],
)
def test_a_nul_byte_in_a_pattern_is_invalid_args(make, tree, tool, args):
    """A pattern holding NUL could match nothing (binary files are skipped, names hold no NUL)."""
    assert make().error(tool, args)["error"] == "invalid_args"


def test_file_text_may_hold_a_nul_byte(make, tree):
    """Content is the file's data: write_file writes what it is given, as before."""
    fs = make()
    assert fs.ok("write_file", {"path": "n.bin", "content": "a\x00b"})["bytes_written"] == 3
    assert (tree / "n.bin").read_bytes() == b"a\x00b"
