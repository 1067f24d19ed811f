"""Path rules by kind of access (issue 13): every spelling, every tool of the kind, every walk.

The corpus: for each rule form and each way of spelling the protected path, every tool of the
kind is refused (or, in walks, silently keeps the path out and says how many it skipped), and
nothing on disk changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from entropic_mcp import CallContext
from hypothesis import given, settings

SECRET = "TOPSECRET-key\n"


@pytest.fixture
def tree(root: Path) -> Path:
    (root / "secrets" / "deep").mkdir(parents=True)
    (root / "secrets" / "key.txt").write_text(SECRET)
    (root / "secrets" / "deep" / "more.txt").write_text(SECRET)
    (root / "public").mkdir()
    (root / "public" / "a.txt").write_text("public TOPSECRET-free\n")
    (root / "alias").symlink_to("secrets")
    (root / "key_link").symlink_to("secrets/key.txt")
    return root


def spellings(root: Path, rel: str) -> list[str]:
    """Ways to name ``rel`` (a path under secrets/) that all resolve to it."""
    tail = rel.removeprefix("secrets/")
    return [
        rel,
        f"./{rel}",
        f"public/../{rel}",
        f"secrets//{tail}",
        f"alias/{tail}",
        str(root / rel),
        f"{root}/public/../{rel}",
        f"secrets/deep/../{tail}",
    ]


WRITE_RULES = [
    "filesystem.write_file:secrets/*",
    "filesystem.delete_file:secrets/*",
    "filesystem.move_file:secrets/*",
    "filesystem.edit_file:secrets/*",
    "filesystem.write:secrets/*",
    "filesystem.write:secrets/*.txt",
    "filesystem.write_file:*/secrets/*",
]
READ_RULES = [
    "filesystem.read:secrets/*",
    "filesystem.read_file:secrets/*",
    "filesystem.grep:secrets/*",
    "filesystem.read:*/secrets/*",
    "filesystem.list_directory:secrets/*",
    "filesystem.file_info:secrets/*",
    "filesystem.read_files:secrets/*",
]


def write_calls(path: str) -> list[tuple[str, dict]]:
    return [
        ("write_file", {"path": path, "content": "pwned\n"}),
        ("edit_file", {"path": path, "old_string": "TOPSECRET", "new_string": "pwned"}),
        ("edit_file", {"path": path, "insert_line": 0, "new_string": "pwned"}),
        ("edit_file", {"path": path, "edits": [{"old_string": "TOPSECRET", "new_string": "pwned"}]}),
        ("edit_file", {"path": path, "old_string": "TOPSECRET", "new_string": "pwned", "dry_run": True}),
        ("delete_file", {"path": path}),
        ("move_file", {"source": path, "destination": "public/moved.txt"}),
    ]


def create_calls(path: str) -> list[tuple[str, dict]]:
    """Calls that would make ``path`` (which does not exist yet)."""
    return [
        ("write_file", {"path": path, "content": "planted\n"}),
        ("create_directory", {"path": path}),
        ("move_file", {"source": "public/a.txt", "destination": path}),
    ]


@pytest.mark.parametrize("rule", WRITE_RULES)
def test_a_write_rule_stops_every_write_tool_under_every_spelling(make, tree, rule):
    fs = make(permissions={"default": "allow", "deny": [rule]})
    for path in [*spellings(tree, "secrets/key.txt"), "key_link"]:
        fs.ok("read_file", {"path": path})  # reading is not what the rule is about
        for tool, args in write_calls(path):
            outcome, data = fs.call(tool, args)
            assert outcome.kind == "rejected_permission", (rule, tool, path, data)
    for path in spellings(tree, "secrets/new.txt"):
        for tool, args in create_calls(path):
            outcome, data = fs.call(tool, args)
            assert outcome.kind == "rejected_permission", (rule, tool, path, data)
    assert sorted(p.name for p in (tree / "secrets").iterdir()) == ["deep", "key.txt"]
    assert (tree / "secrets" / "key.txt").read_text() == SECRET
    fs.ok("write_file", {"path": "public/new.txt", "content": "ok\n"})


@pytest.mark.parametrize("rule", WRITE_RULES[:3])
def test_an_ask_write_rule_with_no_approver_refuses_every_write_tool(make, tree, rule):
    fs = make(permissions={"default": "allow", "ask": [rule]})
    for tool, args in write_calls("alias/key.txt"):
        outcome, _ = fs.call(tool, args)
        assert outcome.kind == "rejected_permission", (rule, tool)
    assert (tree / "secrets" / "key.txt").read_text() == SECRET


def assert_no_secret(value: object) -> None:
    assert "TOPSECRET-key" not in str(value)


@pytest.mark.parametrize("rule", READ_RULES)
def test_a_read_rule_stops_every_read_tool_and_every_walk(make, tree, rule):
    fs = make(permissions={"default": "allow", "deny": [rule]})
    for path in [*spellings(tree, "secrets/key.txt"), "key_link"]:
        for tool, args in (
            ("read_file", {"path": path}),
            ("read_files", {"paths": ["public/a.txt", path]}),
            ("file_info", {"path": path}),
            ("grep", {"pattern": "TOPSECRET", "path": path}),
            ("move_file", {"source": path, "destination": "public/moved.txt"}),
        ):
            outcome, data = fs.call(tool, args)
            assert outcome.kind == "rejected_permission", (rule, tool, path, data)
            assert_no_secret(outcome.response.result)
    # Walks over the tree, or over the directory itself, leave the files out and say so.
    for args in ({"pattern": "TOPSECRET"}, {"pattern": "TOPSECRET", "path": "secrets"}, {"pattern": "T", "path": "."}):
        found = fs.ok("grep", args)
        assert_no_secret(found)
        assert not any(str(m.get("path", "")).startswith("secrets/") for m in found), found
        assert found[-1]["skipped_by_rules"] >= 1
    for args in ({"pattern": "**/*"}, {"pattern": "*", "path": "secrets"}, {"pattern": "secrets/**"}):
        found = fs.ok("glob", args)
        assert not any(isinstance(p, str) and p.startswith("secrets/") for p in found), (args, found)
        assert found[-1]["skipped_by_rules"] >= 1
    for args in ({"recursive": True}, {"path": "secrets"}, {"path": "alias", "recursive": True}):
        listed = fs.ok("list_directory", args)
        assert not any(str(e.get("path", "")).startswith("secrets/") for e in listed), (args, listed)
        assert listed[-1]["skipped_by_rules"] >= 1
    # Public files are untouched by the rule.
    assert fs.ok("grep", {"pattern": "public"})[0]["path"] == "public/a.txt"


def test_a_directory_read_rule_hides_everything_below_it_in_walks(make, tree):
    fs = make(permissions={"default": "allow", "deny": ["filesystem.read:secrets"]})
    assert fs.call("list_directory", {"path": "secrets"})[0].kind == "rejected_permission"
    assert fs.call("list_directory", {"path": "alias"})[0].kind == "rejected_permission"
    found = fs.ok("grep", {"pattern": "TOPSECRET"})
    assert_no_secret(found)
    assert not any(p.startswith("secrets") for p in fs.ok("glob", {"pattern": "**/*"}) if isinstance(p, str))
    listed = fs.ok("list_directory", {"recursive": True})
    assert not any(str(e.get("path", "")).startswith("secrets") for e in listed)


def test_an_ask_read_rule_keeps_files_out_of_walks_without_asking(make, tree):
    fs = make(permissions={"default": "allow", "ask": ["filesystem.read:secrets/*"]})
    found = fs.ok("grep", {"pattern": "TOPSECRET"})
    assert_no_secret(found)
    assert found[-1]["skipped_by_rules"] == 2


def test_walks_without_read_rules_show_everything(make, tree):
    fs = make(permissions={"default": "allow", "deny": ["bash.execute:rm *", "filesystem.write:secrets/*"]})
    found = fs.ok("grep", {"pattern": "TOPSECRET-key"})
    assert {m["path"] for m in found} == {"secrets/key.txt", "secrets/deep/more.txt"}


def test_the_grep_pattern_is_still_a_name_rules_can_use(make, tree):
    fs = make(permissions={"default": "allow", "deny": ["filesystem.grep:password*"]})
    assert fs.call("grep", {"pattern": "password="})[0].kind == "rejected_permission"
    assert fs.ok("grep", {"pattern": "public"})


# -- the project's own policy files -----------------------------------------------------------

POLICY = ["entropic-mcp.toml", "entropic-mcp.local.toml", ".entropicignore"]


@pytest.fixture
def policy_tree(root: Path) -> Path:
    for name in POLICY:
        (root / name).write_text("# policy\n")
    (root / "sub").mkdir()
    (root / "cfg").symlink_to("entropic-mcp.toml")
    (root / "ign").symlink_to(".entropicignore")
    (root / "up").symlink_to(".")
    return root


def policy_spellings(root: Path, name: str) -> list[str]:
    return [name, f"./{name}", f"sub/../{name}", f"./x/../{name}", str(root / name), f"up/{name}", f"up/up/{name}"]


@pytest.mark.parametrize("default", ["allow", "ask"])
@pytest.mark.parametrize("name", POLICY)
def test_policy_files_are_write_protected_under_every_spelling(make, policy_tree, name, default):
    fs = make(permissions={"default": default, "allow": ["filesystem.*", "filesystem.write:*"], "auto_approve": True})
    links = {"entropic-mcp.toml": ["cfg"], ".entropicignore": ["ign"]}.get(name, [])
    for path in [*policy_spellings(policy_tree, name), *links]:
        fs.ok("read_file", {"path": path})  # reading the policy is fine
        for tool, args in write_calls(path):
            outcome, data = fs.call(tool, {**args, "old_string": "policy"} if "old_string" in args else args)
            assert outcome.kind == "rejected_permission", (tool, path, data)
    assert (policy_tree / name).read_text() == "# policy\n"
    assert (policy_tree / "cfg").is_symlink()


def test_policy_file_names_are_protected_in_sub_directories_too(make, policy_tree):
    fs = make()
    outcome, _ = fs.call("write_file", {"path": "sub/entropic-mcp.toml", "content": "[permissions]\n"})
    assert outcome.kind == "rejected_permission"
    assert not (policy_tree / "sub" / "entropic-mcp.toml").exists()


def test_a_rule_naming_the_policy_file_opens_it(make, policy_tree):
    fs = make(permissions={"default": "allow", "allow": ["filesystem.write_file:entropic-mcp.toml"]})
    fs.ok("read_file", {"path": "entropic-mcp.toml"})
    fs.ok("write_file", {"path": "entropic-mcp.toml", "content": "# changed\n"})
    assert (policy_tree / "entropic-mcp.toml").read_text() == "# changed\n"
    assert fs.call("write_file", {"path": ".entropicignore", "content": ""})[0].kind == "rejected_permission"


# -- the path checked is the path used ----------------------------------------------------------

FLIPPER = """
import os, sys
link, ok, denied = sys.argv[1:4]
tmp = link + ".tmp"
while True:
    for target in (ok, denied):
        try:
            os.symlink(target, tmp)
        except FileExistsError:
            os.unlink(tmp)
            continue
        os.replace(tmp, link)
"""


def flip_race(fs, root: Path, attempts: int) -> dict[str, int]:
    """write_file/edit_file to link/x while another process flips link between ok/ and denied/."""
    (root / "ok").mkdir()
    (root / "denied").mkdir()
    (root / "ok" / "x").write_text("original\n")
    (root / "denied" / "x").write_text("original\n")
    (root / "link").symlink_to("ok")
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(root / "link"), "ok", "denied"])
    kinds: dict[str, int] = {}

    async def run() -> None:
        for i in range(attempts):
            # One conversation per read/write/edit/create round: the pipeline's duplicate and
            # loop guards would otherwise answer repeats without running them.
            ctx = CallContext(conversation_id=f"race{i // 4}")
            step = i % 4
            if step == 0:
                name, args = "read_file", {"path": "link/x"}
            elif step == 1:
                name, args = "write_file", {"path": "link/x", "content": "written\n"}
            elif step == 2:
                name, args = "edit_file", {"path": "link/x", "insert_line": 0, "new_string": "edited"}
            else:
                name, args = "write_file", {"path": f"link/new{i}", "content": "new\n"}
            outcome = await fs.manager.call(f"filesystem.{name}", args, ctx)
            kinds[f"{name}:{outcome.kind}"] = kinds.get(f"{name}:{outcome.kind}", 0) + 1

    try:
        anyio.run(run)
    finally:
        flipper.kill()
        flipper.wait()
    return kinds


def check_race(root: Path, kinds: dict[str, int]) -> None:
    assert sorted(os.listdir(root / "denied")) == ["x"]
    assert (root / "denied" / "x").read_text() == "original\n"
    assert kinds.get("write_file:ok", 0) > 0 and kinds.get("write_file:rejected_permission", 0) > 0, kinds
    assert kinds.get("edit_file:ok", 0) > 0 and kinds.get("edit_file:rejected_permission", 0) > 0, kinds


def test_symlink_flipped_between_check_and_write_never_lands_in_a_denied_directory(make, root):
    fs = make(permissions={"default": "allow", "deny": ["filesystem.write:denied/*"]})
    check_race(root, flip_race(fs, root, 2000))


@pytest.mark.slow
def test_symlink_flip_race_soak(make, root):
    fs = make(permissions={"default": "allow", "deny": ["filesystem.write:denied/*"]})
    check_race(root, flip_race(fs, root, 20000))


def test_rules_written_with_absolute_paths_match_too(make, tree):
    fs = make(
        permissions={
            "default": "allow",
            "deny": [f"filesystem.read:{tree}/secrets/*", f"filesystem.write:{tree}/public/*"],
        }
    )
    assert fs.call("read_file", {"path": "alias/key.txt"})[0].kind == "rejected_permission"
    assert fs.call("write_file", {"path": "public/x.txt", "content": "x"})[0].kind == "rejected_permission"
    found = fs.ok("grep", {"pattern": "TOPSECRET"})
    assert_no_secret(found)
    assert found[-1]["skipped_by_rules"] == 2


@pytest.mark.parametrize("suffix", ["/", "/.", "//", "/./"])
def test_trailing_spellings_of_a_denied_file_are_caught(make, tree, suffix):
    fs = make(permissions={"default": "allow", "deny": ["filesystem.read:secrets/key.txt"]})
    outcome, _ = fs.call("read_file", {"path": "secrets/key.txt" + suffix})
    assert outcome.response.is_error and "TOPSECRET" not in outcome.response.result


RULE_HEADS = ["filesystem.read:", "filesystem.grep:", "filesystem.write:", "filesystem.*:", "filesystem.read_*:", "*"]
RULE_GLOBS = ["secrets/*", "*.key", "a/b", "*/x/*", "[ab]*", "a?c", "*", "", "*/secrets/*", "/*/a/b"]
PATHS = ["secrets/k", "a/b", "x.key", "q/x/z", "abc", "b/c.key", "secrets", "z"]


def test_the_walk_prefilter_agrees_with_the_core_on_every_rule_and_path(root):
    from types import SimpleNamespace

    from entropic_mcp import CallContext, config_from_dict
    from entropic_mcp._pipeline._rules import PermissionRules
    from entropic_mcp.toolkit.paths import path_refused
    from entropic_mcp_filesystem._rules import WalkGate
    from hypothesis import given, settings
    from hypothesis import strategies as st

    rule = st.builds(lambda h, g: h + g if h != "*" else h, st.sampled_from(RULE_HEADS), st.sampled_from(RULE_GLOBS))

    @settings(max_examples=300, deadline=None)
    @given(deny=st.lists(rule, max_size=3), ask=st.lists(rule, max_size=2), path=st.sampled_from(PATHS))
    def check(deny, ask, path):
        config = config_from_dict({"permissions": {"default": "allow", "deny": deny, "ask": ask}}, root=root)
        ctx = CallContext(manager=SimpleNamespace(permissions=PermissionRules(config.permissions)))
        expected = path_refused(ctx, "read", path, also=(str(root / path),)) is not None
        head = path.rpartition("/")[0]
        if head:
            expected = expected or path_refused(ctx, "read", head, also=(str(root / head),)) is not None
        assert WalkGate(ctx, root).refused(path) == expected, (deny, ask, path)

    check()


def test_the_pin_belongs_to_the_call_another_look_at_its_pattern_cannot_move_it(make, root):
    from entropic_mcp._context import set_prepared  # what the permission stage does

    fs = make(permissions={"default": "allow", "deny": ["filesystem.write:denied/*"]})
    (root / "ok").mkdir()
    (root / "denied").mkdir()
    (root / "link").symlink_to("ok")
    args = {"path": "link/new.txt", "content": "written\n"}
    answered = fs.server.permission_parts("write_file", args)
    assert [part.store for part in answered] == ["filesystem.write_file:ok/new.txt"]
    (root / "link").unlink()
    (root / "link").symlink_to("denied")
    # A host looking at the pattern again (it copies the arguments) sees the new target...
    assert fs.manager.permission_pattern("filesystem.write_file", args) == "filesystem.write_file:denied/new.txt"
    # ...but the call handed what its own permission decision found writes where that looked.
    ctx = CallContext(conversation_id="pin")
    set_prepared(ctx, args, answered.prepared)
    response = anyio.run(fs.server.execute, "write_file", args, ctx)
    assert not response.is_error, response.result
    assert (root / "ok" / "new.txt").read_text() == "written\n" and not (root / "denied" / "new.txt").exists()
    # What was prepared for one argument dict is not another's: equal arguments resolve afresh.
    set_prepared(ctx, args, fs.server.permission_parts("write_file", {**args, "path": "link/other.txt"}).prepared)
    again = anyio.run(fs.server.execute, "write_file", {"path": "link/other.txt", "content": "x"}, ctx)
    assert not again.is_error and (root / "denied" / "other.txt").exists()  # no pipeline: no rules here


def test_a_link_swapped_between_the_judgement_and_the_write_is_still_pinned(make, root):
    """Through the pipeline: the approver (asked after the judgement, before the tool runs) swaps
    the link; the write lands where the rules looked, not where the link now points."""
    from entropic_mcp import hookimpl

    (root / "ok").mkdir()
    (root / "denied").mkdir()
    (root / "link").symlink_to("ok")
    asked = []

    class Swapper:
        @hookimpl
        def entropic_mcp_approve_tool_call(self, request):
            asked.append(request.pattern)
            (root / "link").unlink()
            (root / "link").symlink_to("denied")
            return "allow_once"

    fs = make(permissions={"default": "ask", "deny": ["filesystem.write:denied/*"]}, plugins=[Swapper()])
    outcome, _ = fs.call("write_file", {"path": "link/new.txt", "content": "written\n"})
    assert asked == ["filesystem.write_file:ok/new.txt"]
    assert not outcome.response.is_error, outcome.response.result
    assert (root / "ok" / "new.txt").read_text() == "written\n"
    assert not (root / "denied" / "new.txt").exists()


_GLOB_PARTS = ["a", "b", "/", "*", "?", "[ab]", "**", "ab/", "x", "**/", "**/*", ".x"]
_PATH_PARTS = ["a", "b", "/", "x", "ab", "ba/", ".x"]


def _globs():
    from hypothesis import strategies as st

    glob = st.lists(st.sampled_from(_GLOB_PARTS), min_size=1, max_size=6).map("".join)
    return st.lists(glob, min_size=1, max_size=8)


def _paths():
    from hypothesis import strategies as st

    return st.lists(st.lists(st.sampled_from(_PATH_PARTS), min_size=1, max_size=6).map("".join), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_globs(), _paths())
def test_the_per_directory_prefilter_agrees_with_matching_every_rule(globs, paths):
    from fnmatch import fnmatchcase

    from entropic_mcp_filesystem._rules import _Prefilter

    prefilter = _Prefilter(globs)
    for path in paths:
        assert prefilter.may_match(path) is any(fnmatchcase(path, g) for g in globs), (globs, path)


def _name_globs():
    from hypothesis import strategies as st

    forms = ["**/.env", "**/*.pem", "**/*.x", "**/a", "**/x.x", "**/*a*", "**/a/*.x", "b/**/.env", "**/[ab]"]
    return st.lists(st.sampled_from(forms), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    _name_globs(),
    _paths(),
)
def test_name_rules_reaching_every_directory_are_decided_by_the_name_as_fnmatch_decides(globs, paths):
    """``**/NAME`` and ``**/*SUFFIX`` go to a set and a suffix check; the answer stays exact."""
    from fnmatch import fnmatchcase

    from entropic_mcp_filesystem._rules import _Prefilter

    prefilter = _Prefilter(globs)
    for path in [*paths, ".env", "a/.env", "k/a.pem", "a.pem", "z/x", "z/x.x", "q/a", "a", "/r/.env"]:
        assert prefilter.may_match(path) is any(fnmatchcase(path, g) for g in globs), (globs, path)
