"""Every distribution in the repository is packaged alike: typed, licensed, described, its imports declared."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
PROJECTS = [REPO / "core", *sorted(p.parent for p in (REPO / "plugins").glob("*/pyproject.toml"))]


def _normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _project(path):
    return tomllib.loads((path / "pyproject.toml").read_text())


def _packages(path):
    return [path / p for p in _project(path)["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]]


@pytest.mark.parametrize("path", PROJECTS, ids=[p.name for p in PROJECTS])
def test_each_distribution_is_typed_licensed_and_described(path):
    project = _project(path)["project"]
    for package in _packages(path):
        assert (package / "py.typed").is_file(), f"{package} has no py.typed: mypy would see it as untyped"
    assert (path / "LICENSE").is_file() and "MIT License" in (path / "LICENSE").read_text()
    assert project.get("license") == "MIT"
    assert "Typing :: Typed" in project.get("classifiers", [])
    if path.name != "_template":
        assert {"Homepage", "Source", "Issues"} <= set(project.get("urls", {}))


@pytest.mark.parametrize("path", PROJECTS, ids=[p.name for p in PROJECTS])
def test_every_third_party_import_is_a_declared_dependency(path):
    """Imports resolve to distributions declared by this package (required or an extra), never transitively."""
    project = _project(path)["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    declared = {_normal(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0]) for r in requirements}
    own = {p.name for p in _packages(path)}
    for package in own:
        # Which distribution a module comes from is known only for what is installed here.
        pytest.importorskip(package, reason=f"{path.name} is not installed in this environment")
    distributions = packages_distributions()
    missing = {}
    for source in (path / "src").rglob("*.py"):
        if "_template" in source.relative_to(path).parts[:3]:
            continue
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.partition(".")[0]
                if top in sys.stdlib_module_names or top in own:
                    continue
                if not {_normal(d) for d in distributions.get(top, [top])} & declared:
                    missing.setdefault(top, str(source.relative_to(REPO)))
    assert not missing, f"{path.name} imports undeclared distributions: {missing}"


def test_the_core_version_has_one_source():
    from importlib.metadata import version

    import entropic_mcp

    core = _project(REPO / "core")
    assert "version" not in core["project"] and core["project"]["dynamic"] == ["version"]
    assert core["tool"]["hatch"]["version"]["path"] == "src/entropic_mcp/_version.py"
    assert version("entropic-mcp") == entropic_mcp.__version__


def test_mcp_is_bounded_below_its_next_major():
    """serve uses SDK internals (ServerSession._connection, the lean mcp.server import)."""
    dependencies = _project(REPO / "core")["project"]["dependencies"]
    [mcp] = [d for d in dependencies if re.match(r"mcp[<>=]", d)]
    assert "<3" in mcp


def test_hypothesis_is_only_in_the_testing_extra():
    project = _project(REPO / "core")["project"]
    assert not any(d.startswith("hypothesis") for d in project["dependencies"])
    assert {"pytest", "hypothesis", "hypothesis-jsonschema"} <= {
        _normal(re.split(r"[<>=]", d)[0]) for d in project["optional-dependencies"]["testing"]
    }
