"""The import contract: plugins use only the core's public API, the core imports no plugin, and
the core's import graph has no cycle — type-only imports and imports inside functions counted
(docs/architecture.md, "Which module owns what", says how the layers are arranged).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import grimp
import pytest

_SOURCES = [
    p
    for p in sorted((Path(__file__).resolve().parents[2] / "plugins").glob("*/src/entropic_mcp_*"))
    if not p.parents[1].name.startswith("_")  # the scaffold template is not a distribution
]
#: The first-party plugins, installed or read from the tree.
PLUGINS = sorted(p.name for p in _SOURCES)
#: Core's own session installs no plugin: grimp reads sources, so their src folders will do, put
#: on sys.path only while the graph is built (other tests decide by what is installed).
_NOT_INSTALLED = [str(p.parent) for p in _SOURCES if importlib.util.find_spec(p.name) is None]

#: What a plugin may import of the core (the faces by audience; everything else is private).
PUBLIC = frozenset(
    {
        "entropic_mcp",
        "entropic_mcp.directives",
        "entropic_mcp.hookspecs",
        "entropic_mcp.storage",
        "entropic_mcp.testing",
        "entropic_mcp.toolkit",
        *(
            f"entropic_mcp.toolkit.{concern}"
            for concern in ("args", "git", "paths", "processes", "results", "settings")
        ),
    }
)

_M = "entropic_mcp."


def cycles(graph: object) -> set[frozenset[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan)."""
    modules = sorted(graph.modules)  # type: ignore[attr-defined]
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}  # type: ignore[attr-defined]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


@pytest.fixture(scope="module")
def graph():
    saved = list(sys.path)
    sys.path.extend(_NOT_INSTALLED)
    try:
        # No cache: grimp keys it by module name and mtime, so a module turned into a package of
        # the same name (_pipeline.py -> _pipeline/) kept its old imports in the graph.
        return grimp.build_graph("entropic_mcp", *PLUGINS, exclude_type_checking_imports=False, cache_dir=None)
    finally:
        sys.path[:] = saved
        importlib.invalidate_caches()


def test_the_cycle_finder_finds_cycles_and_nothing_else():
    class Graph:
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": {"a"}}
        modules = set(edges)

        def find_modules_directly_imported_by(self, module):
            return self.edges[module]

    assert cycles(Graph()) == {frozenset("abc"), frozenset("de")}


def test_the_core_has_no_import_cycle(graph):
    core = {m for m in graph.modules if m == "entropic_mcp" or m.startswith(_M)}
    found = sorted(sorted(c) for c in cycles(graph) if c <= core)
    assert not found, "import cycles in the core (a lower layer names a higher one):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_plugins_import_only_the_core_public_api(graph):
    assert graph.modules >= PUBLIC
    assert len(PLUGINS) >= 5
    wrong = []
    for plugin in PLUGINS:
        for module in graph.find_children(plugin) | {plugin}:
            for imported in graph.find_modules_directly_imported_by(module):
                if imported.startswith(_M) and imported not in PUBLIC:
                    wrong.append(f"{module} imports {imported}")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_core_imports_no_plugin(graph):
    core = {m for m in graph.modules if m == "entropic_mcp" or m.startswith(_M)}
    wrong = sorted(
        f"{m} imports {i}"
        for m in core
        for i in graph.find_modules_directly_imported_by(m)
        if i.split(".")[0] in PLUGINS
    )
    assert not wrong, "\n".join(wrong)
