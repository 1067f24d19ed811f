"""The public surface: one table of names, the type checkers' imports kept in step with it by this test."""

from __future__ import annotations

import ast
from pathlib import Path

import entropic_mcp

INIT = Path(entropic_mcp.__file__)


def _tree() -> ast.Module:
    return ast.parse(INIT.read_text(encoding="utf-8"))


def _typed_names() -> dict[str, str]:
    """The names the TYPE_CHECKING block gives type checkers, each with its module."""
    typed: dict[str, str] = {}
    for node in ast.walk(_tree()):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    for alias in stmt.names:
                        typed[alias.asname or alias.name] = "." * stmt.level + (stmt.module or "")
    return typed


def test_every_export_is_importable_and_typed_from_the_module_it_resolves_from():
    typed = _typed_names()
    public = {name: module for name, module in typed.items() if name != "*"}
    homes = {name: module for name, module in public.items() if name not in entropic_mcp._MOVED}
    assert homes == entropic_mcp._HOMES, "the TYPE_CHECKING imports and _HOMES differ"
    assert entropic_mcp.__all__ == sorted(entropic_mcp._HOMES)
    for name in entropic_mcp.__all__:
        assert getattr(entropic_mcp, name) is not None


def test_the_call_pipeline_and_the_pipeline_directive_have_different_names():
    from entropic_mcp._pipeline._spine import CallPipeline
    from entropic_mcp.directives import Pipeline

    assert Pipeline.__module__ == "entropic_mcp._directives"
    assert CallPipeline.__name__ != Pipeline.__name__
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
