"""The call path runs one way: first-party plugins reach the host only through ``ctx.services``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from entropic_mcp import CallContext

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def manager_reads(source: str) -> list[int]:
    """Lines of ``source`` that touch ``.manager`` of anything but ``self`` (a context's back-reference)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "manager":
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "manager"
        ):
            lines.append(node.lineno)
    return lines


def test_the_scan_sees_every_way_to_reach_the_manager():
    source = (
        "def f(ctx, self):\n"
        "    a = ctx.manager\n"
        "    b = getattr(ctx, 'manager', None)\n"
        "    ctx.manager = None\n"
        "    c = call.ctx.manager.config\n"
        "    d = self.manager\n"
        "    e = ctx.services.root\n"
    )
    assert manager_reads(source) == [2, 3, 4, 5]


def test_no_first_party_plugin_touches_a_contexts_manager():
    files = sorted(PLUGINS.glob("*/src/**/*.py"))
    assert len(files) > 20
    found = {f"{path.relative_to(PLUGINS)}:{line}" for path in files for line in manager_reads(path.read_text("utf-8"))}
    assert not found, f"use ctx.services instead of ctx.manager: {sorted(found)}"


def test_ctx_manager_is_deprecated_but_still_answers():
    marker = object()
    ctx = CallContext(manager=marker)  # type: ignore[arg-type]
    with pytest.deprecated_call():
        assert ctx.manager is marker
    with pytest.deprecated_call():
        ctx.manager = None
    assert not ctx.services.hosted
    assert "manager" not in repr(ctx)
