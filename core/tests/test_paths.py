"""confine(): the one path-confinement function (filesystem.md, Confinement steps 1-6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from entropic_mcp import CallContext, ConfigError, OutsideRootRequest, ToolError
from entropic_mcp.toolkit.paths import PathPolicy, confine, is_within
from hypothesis import given, settings
from hypothesis import strategies as st

OPTIONAL = PathPolicy()
CLOSED = PathPolicy(allow_outside_root=False)


class FakeManager:
    def __init__(self, answer: bool | None) -> None:
        self.answer = answer
        self.requests: list[OutsideRootRequest] = []

    def approve_outside_root(self, request: OutsideRootRequest) -> bool | None:
        self.requests.append(request)
        return self.answer


def ctx_with(answer: bool | None) -> tuple[CallContext, FakeManager]:
    manager = FakeManager(answer)
    return CallContext(conversation_id="conv", manager=manager), manager  # type: ignore[arg-type]


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("x")
    for sibling in ("root2", "rootling", "root_backup"):
        (tmp_path / sibling).mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "out").symlink_to(outside)
    (root / "in").symlink_to("sub")
    (root / "dangling").symlink_to(outside / "later.txt")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    return {"root": root.resolve(), "outside": outside.resolve(), "tmp": tmp_path.resolve()}


def resolve(raw: object, layout: dict[str, Path], policy: PathPolicy = CLOSED, **kwargs):
    return confine(raw, root=layout["root"], policy=policy, tool="filesystem.read_file", access="read", **kwargs)


def code(raw: object, layout: dict[str, Path], policy: PathPolicy = CLOSED, **kwargs) -> str:
    with pytest.raises(ToolError) as caught:
        resolve(raw, layout, policy, **kwargs)
    return caught.value.code


def test_inside_paths_resolve_to_canonical_root_relative_display(layout):
    root = layout["root"]
    for raw, display in [
        ("sub/f.txt", "sub/f.txt"),
        ("./sub//f.txt", "sub/f.txt"),
        ("sub/../sub/f.txt", "sub/f.txt"),
        ("in/f.txt", "sub/f.txt"),
        (".", "."),
        (str(root), "."),
        (str(root / "new/x"), "new/x"),
        ("sub/not/yet/there.txt", "sub/not/yet/there.txt"),
    ]:
        resolved = resolve(raw, layout)
        assert resolved.inside and resolved.display == display and is_within(resolved.path, root)


def test_empty_non_string_nul_and_surrogates_are_invalid(layout):
    for raw in ("", None, 5, ["a"], "a\x00b", "\ud800", "sub/\udcff"):
        assert code(raw, layout) == "invalid_args"


def test_relative_paths_ignore_the_process_working_directory(layout, monkeypatch):
    monkeypatch.chdir(layout["outside"])
    assert resolve("sub/f.txt", layout).path == layout["root"] / "sub" / "f.txt"


def test_tilde_is_literal(layout):
    assert resolve("~/x", layout).path == layout["root"] / "~" / "x"


@pytest.mark.parametrize(
    "raw",
    [
        "..",
        "../root2/x",
        "../rootling",
        "../root_backup/a",
        "sub/../../outside",
        "out",
        "out/x.txt",
        "dangling",
        "/etc/passwd",
        "in/../../outside",
    ],
)
def test_outside_paths_refused_when_closed(layout, raw):
    assert code(raw, layout) == "outside_root_denied"


def test_sibling_prefix_is_not_inside(layout):
    assert not is_within(layout["tmp"] / "rootling", layout["root"])
    assert is_within(layout["root"] / "a", layout["root"]) and is_within(layout["root"], layout["root"])


def test_dangling_link_resolves_to_its_target(layout):
    resolved = resolve("dangling", layout, PathPolicy(allow_outside_root=True))
    assert resolved.path == layout["outside"] / "later.txt" and not resolved.inside


def test_symlink_loop_does_not_hang_or_escape(layout):
    resolved = resolve("loop_a", layout)
    assert resolved.inside


def test_root_given_through_a_symlink(layout):
    alias = layout["tmp"] / "alias"
    alias.symlink_to(layout["root"])
    resolved = confine("sub/f.txt", root=alias, policy=CLOSED, tool="t.x", access="read")
    assert resolved.inside and resolved.display == "sub/f.txt"
    assert confine(str(alias / "sub"), root=alias, policy=CLOSED, tool="t.x", access="read").display == "sub"


def test_deny_list_beats_allow_list_and_true(layout):
    outside = layout["outside"]
    policy = PathPolicy(
        allow_outside_root=True, outside_root_allow=[str(outside)], outside_root_deny=[str(outside / "private")]
    )
    assert code(str(outside / "private" / "k"), layout, policy) == "outside_root_denied"
    assert resolve(str(outside / "public"), layout, policy).display == str(outside / "public")


def test_deny_entries_are_canonical_so_a_link_cannot_dodge_them(layout):
    policy = PathPolicy(allow_outside_root=True, outside_root_deny=[str(layout["root"] / "out")])
    # The deny entry is itself a link: it is stored as its target, so both spellings are denied.
    assert code(str(layout["outside"] / "x"), layout, policy) == "outside_root_denied"


def test_optional_asks_once_with_canonical_path_tool_access_root_conversation(layout):
    ctx, manager = ctx_with(True)
    resolved = confine(
        "out/./a/../b.txt", root=layout["root"], policy=OPTIONAL, tool="filesystem.write_file", access="write", ctx=ctx
    )
    assert resolved.path == layout["outside"] / "b.txt" and not resolved.inside
    [request] = manager.requests
    assert (request.path, request.tool, request.access, request.root, request.conversation_id) == (
        layout["outside"] / "b.txt",
        "filesystem.write_file",
        "write",
        layout["root"],
        "conv",
    )


def test_optional_rejected_and_unanswered(layout):
    ctx, _ = ctx_with(False)
    assert code("out/x", layout, OPTIONAL, ctx=ctx) == "outside_root_rejected"
    ctx, manager = ctx_with(None)
    with pytest.raises(ToolError) as caught:
        resolve("out/x", layout, OPTIONAL, ctx=ctx)
    assert caught.value.code == "outside_root_approval_required" and len(manager.requests) == 1
    assert caught.value.extra["config_keys"] == [
        "[servers.filesystem] outside_root_allow",
        "[servers.filesystem] allow_outside_root",
    ]
    assert code("out/x", layout, OPTIONAL) == "outside_root_approval_required"  # no manager: never fails open


def test_allow_list_and_true_serve_without_asking(layout):
    ctx, manager = ctx_with(False)
    allowed = PathPolicy(outside_root_allow=[str(layout["outside"])])
    assert not resolve("out/x", layout, allowed, ctx=ctx).inside
    assert not resolve("out/x", layout, PathPolicy(allow_outside_root=True), ctx=ctx).inside
    assert manager.requests == []


def test_inside_paths_never_ask(layout):
    ctx, manager = ctx_with(False)
    assert resolve("sub/f.txt", layout, OPTIONAL, ctx=ctx).inside and manager.requests == []


def test_not_approvable_policy_refuses_with_outside_root(layout):
    assert code("out/x", layout, PathPolicy(allow_outside_root=True, approvable=False)) == "outside_root"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"allow_outside_root": "sometimes"},
        {"allow_outside_root": 1},
        {"allow_outside_root": 0},
        {"outside_root_allow": ["relative"]},
        {"outside_root_deny": "/a/string"},
        {"outside_root_deny": [""]},
        {"outside_root_allow": [5]},
    ],
)
def test_policy_validation(kwargs):
    with pytest.raises(ConfigError):
        PathPolicy(**kwargs)


def test_policy_expands_user(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert PathPolicy(outside_root_allow=["~/docs"]).outside_root_allow == (Path(os.path.realpath(tmp_path / "docs")),)


SEGMENTS = st.sampled_from(["..", ".", "sub", "f.txt", "out", "in", "dangling", "loop_a", "x", "", "~", "root2"])


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(SEGMENTS, min_size=1, max_size=8), absolute=st.booleans())
def test_closed_policy_only_ever_returns_paths_inside_the_root(tmp_path_factory, parts, absolute):
    base = tmp_path_factory.mktemp("prop")
    root = base / "root"
    (root / "sub").mkdir(parents=True)
    (base / "outside").mkdir()
    (root / "out").symlink_to(base / "outside")
    (root / "in").symlink_to("sub")
    raw = "/".join(parts)
    if absolute:
        raw = str(root) + "/" + raw
    try:
        resolved = confine(raw, root=root, policy=CLOSED, tool="t.x", access="read")
    except ToolError as exc:
        assert exc.code in ("outside_root_denied", "invalid_args")
        return
    real_root = Path(os.path.realpath(root))
    assert resolved.inside and is_within(Path(os.path.realpath(resolved.path)), real_root)
