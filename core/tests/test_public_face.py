"""Each audience its own face: entropic_mcp for plugin authors and hosts (small), storage for
backend authors, directives, toolkit and testing; names that left entropic_mcp still import from
it for one release, with a DeprecationWarning naming their new home."""

from __future__ import annotations

import importlib
import sys
import warnings

import entropic_mcp
import pytest

FACES = [
    "entropic_mcp",
    "entropic_mcp.directives",
    "entropic_mcp.hookspecs",
    "entropic_mcp.storage",
    "entropic_mcp.testing",
    "entropic_mcp.toolkit",
    "entropic_mcp.toolkit.args",
    "entropic_mcp.toolkit.git",
    "entropic_mcp.toolkit.paths",
    "entropic_mcp.toolkit.processes",
    "entropic_mcp.toolkit.results",
    "entropic_mcp.toolkit.settings",
]


def test_the_plugin_author_and_host_face_stays_small():
    assert len(entropic_mcp.__all__) <= 35, sorted(entropic_mcp.__all__)


@pytest.mark.parametrize("face", [f for f in FACES if f != "entropic_mcp.hookspecs"])
def test_every_name_a_face_lists_exists_once(face):
    module = importlib.import_module(face)
    names = module.__all__
    assert len(names) == len(set(names)), f"{face}.__all__ lists a name twice"
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"{face}.__all__ lists names it does not have: {missing}"


def test_the_toolkit_package_offers_every_name_of_its_submodules():
    import entropic_mcp.toolkit as toolkit

    for concern in ("args", "git", "paths", "processes", "results", "settings"):
        sub = importlib.import_module(f"entropic_mcp.toolkit.{concern}")
        for name in sub.__all__:
            assert getattr(toolkit, name) is getattr(sub, name), f"toolkit.{name}"
            assert name in toolkit.__all__


def test_a_name_lives_in_one_face_only():
    seen: dict[str, str] = {}
    for face in ("entropic_mcp", "entropic_mcp.directives", "entropic_mcp.storage", "entropic_mcp.toolkit"):
        for name in importlib.import_module(face).__all__:
            assert name not in seen, f"{name} is listed by {seen.get(name)} and {face}"
            seen[name] = face


@pytest.mark.parametrize("name", sorted(entropic_mcp._MOVED))
def test_a_moved_name_still_imports_from_entropic_mcp_with_a_warning_naming_its_home(name):
    home = entropic_mcp._MOVED[name]
    with pytest.warns(DeprecationWarning, match=rf"entropic_mcp\.{name} has moved: import it from {home}\b"):
        value = getattr(entropic_mcp, name)
    assert value is getattr(importlib.import_module(home), name)
    assert name not in entropic_mcp.__all__
    assert home == "entropic_mcp.hookspecs" or name in importlib.import_module(home).__all__


def test_the_warning_points_at_the_importing_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        from entropic_mcp import StorageError  # noqa: F401

    # the import machinery asks for the name before the import statement reads it: two warnings,
    # both from this line (the default filter shows one)
    assert caught and {(w.filename, w.lineno) for w in caught} == {(__file__, line)}


def test_every_importer_of_a_moved_name_is_warned_not_only_the_first():
    for _ in range(2):
        with pytest.warns(DeprecationWarning):
            entropic_mcp.StorageBackend


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        entropic_mcp.NoSuchThing
