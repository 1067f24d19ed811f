"""Path rules by kind of access: one rule covers every tool of its kind; policy files are protected."""

from __future__ import annotations

import pytest
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp._pipeline._rules import PermissionRules
from entropic_mcp.toolkit.paths import (
    POLICY_FILES,
    READ_PATH_TOOLS,
    WRITE_PATH_TOOLS,
    escape_glob,
    path_part,
    path_refused,
)


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


# -- protected by identity: the files actually loaded and the store, whatever their names ---------


@pytest.fixture
def loaded(tmp_path):
    """A project served with ``--config policy.toml`` and its store inside the project."""
    from entropic_mcp._config import load_config

    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "policy.toml").write_text('[storage]\npath = "store"\n[permissions]\ndefault = "allow"\n')
    (project / "store").mkdir()
    (project / "store" / "tool_calls.jsonl").write_text("{}\n")
    manager = ServerManager.from_config(load_config(project / "policy.toml"), load_entry_points=False)
    yield project, manager
    manager.close()


def _write(manager, path, *also):
    return manager.permissions.judge([path_part("write", path, tool="write_file", also=also)], read_only=False)


@pytest.mark.parametrize(
    "spelling",
    ["policy.toml", "sub/../policy.toml", "./policy.toml", "link.toml", "POLICY.TOML", "{root}/policy.toml"],
)
def test_the_loaded_config_is_protected_whatever_its_name_and_spelling(loaded, spelling):
    project, manager = loaded
    (project / "link.toml").symlink_to("policy.toml")
    verdict = _write(manager, spelling.replace("{root}", str(project)))
    assert (verdict.decision, verdict.verdicts[0].kind) == ("deny", "protected")


def test_a_directory_holding_the_loaded_config_is_protected_the_root_is_left_to_the_tools(tmp_path):
    from entropic_mcp._config import load_config

    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "policy.toml").write_text('[entropic_mcp]\nroot = ".."\n[storage]\nbackend = "none"\n')
    (tmp_path / "elsewhere").symlink_to("cfg")
    manager = ServerManager.from_config(load_config(tmp_path / "cfg" / "policy.toml"), load_entry_points=False)
    try:
        for spelling in ("cfg", "elsewhere", "cfg/"):
            assert _write(manager, spelling).verdicts[0].kind == "protected", spelling
        # The root holds .mcp.json and .entropicignore; the tools refuse to move or delete it themselves.
        assert _write(manager, ".").verdicts[0].kind != "protected"
    finally:
        manager.close()


def test_a_hard_link_to_the_loaded_config_is_protected(loaded):
    project, manager = loaded
    (project / "alias.txt").hardlink_to(project / "policy.toml")
    assert _write(manager, "alias.txt").verdicts[0].kind == "protected"


def test_a_link_flipped_after_a_verdict_is_judged_afresh(loaded):
    project, manager = loaded
    (project / "notes.txt").write_text("")
    (project / "flip").symlink_to("notes.txt")
    assert _write(manager, "flip").decision == "allow"
    (project / "flip").unlink()
    (project / "flip").symlink_to("policy.toml")
    assert _write(manager, "flip").decision == "deny"


@pytest.mark.parametrize("access", ["read", "write"])
def test_no_rule_opens_the_store(loaded, access):
    project, manager = loaded
    manager.permissions.add("allow", ["filesystem.read:store/*", "filesystem.write:store/*"])
    for spelling in ("store/tool_calls.jsonl", "store", "sub/../store/x", str(project / "store" / "new")):
        part = path_part(access, spelling, tool="read_file" if access == "read" else "write_file")
        verdict = manager.permissions.judge([part], read_only=access == "read")
        assert (verdict.decision, verdict.verdicts[0].kind) == ("deny", "private"), spelling
        assert not verdict.always_effective


def test_walking_tools_and_writers_hear_why(loaded):
    project, manager = loaded
    services = CallContext(manager=manager).services
    assert services.path_refused("read", "store/tool_calls.jsonl") == "entropic-mcp's store or data directory"
    assert services.write_refused("policy.toml") == "a protected policy file"
    assert services.write_refused("notes.txt") is None
    assert project / "store" in services.private_dirs


def test_the_per_user_data_directory_is_private(loaded, user_data_dir):
    _, manager = loaded
    target = str(user_data_dir / "approved-mcp-json.json")
    assert manager.permissions.judge([path_part("write", target, tool="write_file")], read_only=False).decision == (
        "deny"
    )


def test_config_lists_what_it_loaded(loaded):
    project, manager = loaded
    files = manager.config.policy_files
    assert project / "policy.toml" in files and project / "entropic-mcp.local.toml" in files
    assert project / ".mcp.json" in files and project / ".entropicignore" in files
    assert project / "store" in manager.config.private_dirs


@pytest.mark.parametrize("pattern", ["db.query:SELECT *", "db.query:a?b", "db.query:[abc]", "db.query:x[*]"])
def test_always_allow_on_a_pattern_with_glob_characters_matches_exactly_that_pattern(tmp_path, pattern):
    from entropic_mcp._pipeline._rules import pattern_part

    r = rules(tmp_path, default="ask")
    part = pattern_part("db.query", pattern)
    r.add("allow", [part.store])
    assert r.decide([part], read_only=False)[0] == "allow"
    for other in ("db.query:SELECT secrets", "db.query:aXb", "db.query:a", "db.query:x*", "db.query:xy"):
        if other != pattern:
            assert r.decide([pattern_part("db.query", other)], read_only=False)[0] == "ask", other
