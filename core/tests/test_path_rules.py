"""Path rules by kind of access: one rule covers every tool of its kind; policy files are protected."""

from __future__ import annotations

import pytest
from entropic_mcp import (
    POLICY_FILES,
    READ_PATH_TOOLS,
    WRITE_PATH_TOOLS,
    CallContext,
    ServerManager,
    config_from_dict,
    escape_glob,
    path_part,
    path_refused,
)
from entropic_mcp._permissions import PermissionRules


def rules(tmp_path, **permissions):
    config = config_from_dict({"permissions": permissions}, root=tmp_path)
    return PermissionRules(config.permissions)


@pytest.mark.parametrize("tool", WRITE_PATH_TOOLS)
@pytest.mark.parametrize(
    "rule", ["filesystem.write_file:secrets/*", "filesystem.write:secrets/*", "filesystem.edit_file:secrets/*"]
)
def test_a_write_rule_covers_every_write_tool(tmp_path, tool, rule):
    r = rules(tmp_path, default="allow", deny=[rule])
    assert r.decide([path_part("write", "secrets/key", tool=tool)], read_only=False)[0] == "deny"
    assert r.decide([path_part("write", "src/a.py", tool=tool)], read_only=False)[0] == "allow"


@pytest.mark.parametrize("tool", READ_PATH_TOOLS)
def test_a_read_rule_covers_every_read_tool(tmp_path, tool):
    r = rules(tmp_path, default="allow", allow_read=True, deny=["filesystem.read_file:secrets/*"])
    assert r.decide([path_part("read", "secrets/key", tool=tool)], read_only=True)[0] == "deny"


def test_read_and_write_rules_do_not_cross(tmp_path):
    r = rules(tmp_path, default="allow", deny=["filesystem.write:secrets/*"])
    assert r.decide([path_part("read", "secrets/key", tool="read_file")], read_only=True)[0] == "allow"


def test_a_redirection_part_is_neutral_but_denied_by_write_rules(tmp_path):
    r = rules(tmp_path, default="deny", deny=["filesystem.edit_file:secrets/*"])
    assert r.decide_part(path_part("write", "out.txt", neutral=True), read_only=False) is None
    assert r.decide_part(path_part("write", "secrets/x", neutral=True), read_only=False) == "deny"


@pytest.mark.parametrize("name", sorted(POLICY_FILES))
@pytest.mark.parametrize(
    "permissions",
    [
        {"default": "allow"},
        {"default": "allow", "auto_approve": True},
        {"default": "ask", "allow": ["filesystem.*"]},
        {"default": "ask", "allow": ["filesystem.write:*"]},
        {"default": "ask", "allow": ["*"]},
    ],
)
def test_policy_files_are_denied_without_an_explicit_rule(tmp_path, name, permissions):
    r = rules(tmp_path, **permissions)
    for path in (name, f"sub/dir/{name}"):
        verdict = r.judge([path_part("write", path, tool="write_file")], read_only=False)
        assert verdict.decision == "deny"
        assert verdict.verdicts[0].kind == "protected"
        assert r.decide([path_part("write", path, neutral=True)], read_only=False)[0] == "deny"


def test_policy_file_opened_by_a_rule_naming_it(tmp_path):
    r = rules(tmp_path, default="ask", allow=["filesystem.write:.entropicignore"])
    assert r.decide([path_part("write", ".entropicignore", tool="edit_file")], read_only=False)[0] == "allow"
    assert r.decide([path_part("write", "entropic-mcp.toml", tool="edit_file")], read_only=False)[0] == "deny"


def test_policy_files_can_be_read(tmp_path):
    r = rules(tmp_path, default="ask", allow_read=True)
    assert r.decide([path_part("read", "entropic-mcp.toml", tool="read_file")], read_only=True)[0] == "allow"


def test_store_is_escaped_and_matches_only_the_path(tmp_path):
    part = path_part("write", "a[1]*.txt", tool="write_file")
    assert part.store == "filesystem.write_file:" + escape_glob("a[1]*.txt")
    r = rules(tmp_path, default="deny", allow=[part.store])
    assert r.decide([path_part("write", "a[1]*.txt", tool="write_file")], read_only=False)[0] == "allow"
    assert r.decide([path_part("write", "a1x.txt", tool="write_file")], read_only=False)[0] == "deny"


def test_path_refused_names_the_rule_and_never_the_default(tmp_path):
    config = config_from_dict(
        {
            "permissions": {
                "default": "deny",
                "deny": ["filesystem.read:secrets/*"],
                "ask": ["filesystem.grep:private/*"],
            }
        },
        root=tmp_path,
    )
    with ServerManager(config) as manager:
        ctx = CallContext(manager=manager)
        assert path_refused(ctx, "read", "secrets/key") == "filesystem.read:secrets/*"
        assert path_refused(ctx, "read", "private/notes") == "filesystem.grep:private/*"
        assert path_refused(ctx, "read", "src/a.py") is None
    assert path_refused(CallContext(), "read", "secrets/key") is None
