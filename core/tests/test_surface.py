"""The public surface: one list of names, kept in step by this test."""

from __future__ import annotations

import ast
from pathlib import Path

import entropic_mcp

INIT = Path(entropic_mcp.__file__)


def _tree() -> ast.Module:
    return ast.parse(INIT.read_text(encoding="utf-8"))


def test_every_export_is_importable_listed_and_typed_in_one_step():
    tree = _tree()
    typed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    typed.update(alias.asname or alias.name for alias in stmt.names)
    lazy = set(entropic_mcp._LAZY)
    exported = set(entropic_mcp.__all__) - {"__version__"}
    assert typed == lazy, f"TYPE_CHECKING imports and _LAZY differ: {sorted(typed ^ lazy)}"
    assert lazy <= exported, f"missing from __all__: {sorted(lazy - exported)}"
    for name in sorted(lazy):
        assert getattr(entropic_mcp, name) is not None


def test_the_call_pipeline_and_the_pipeline_directive_have_different_names():
    from entropic_mcp._pipeline import CallPipeline

    assert entropic_mcp.Pipeline.__module__ == "entropic_mcp._directives"
    assert CallPipeline.__name__ != entropic_mcp.Pipeline.__name__
    assert "CallPipeline" not in entropic_mcp.__all__  # internal: hosts use ServerManager


def test_tools_reach_the_host_through_services_not_the_manager(tmp_path):
    from entropic_mcp import CallContext, ToolServices, config_from_dict
    from entropic_mcp.testing import make_manager

    bare = CallContext().services
    assert isinstance(bare, ToolServices)
    assert bare.storage is None and bare.result_limit == 0 and bare.settings("x") == {} and bare.history() == []
    manager = make_manager(tmp_path, config={"servers": {}, "pipeline": {"max_result_bytes": 123}})
    services = CallContext(manager=manager, conversation_id="c").services
    assert services.result_limit == 123 and services.root == config_from_dict({}, root=tmp_path).root


def test_services_answer_for_writes_and_show_the_rules(tmp_path):
    from entropic_mcp import CallContext
    from entropic_mcp.testing import make_manager

    bare = CallContext().services
    assert bare.write_refused("sub/entropic-mcp.toml") == "a protected policy file"
    assert bare.write_refused("src/a.py") is None and bare.rules("deny") == ()
    manager = make_manager(
        tmp_path, config={"permissions": {"default": "allow", "deny": ["filesystem.write:secrets/*"], "ask": ["x"]}}
    )
    services = CallContext(manager=manager).services
    assert services.write_refused("secrets/k") == "filesystem.write:secrets/*"
    assert services.write_refused(".entropicignore") == "a protected policy file"
    assert services.write_refused("src/a.py") is None
    assert services.rules("deny") == ("filesystem.write:secrets/*",) and services.rules("ask") == ("x",)
