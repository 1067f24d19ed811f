"""Entry points read from the path (``_entrypoints``) are the ones ``importlib_metadata`` finds."""

from __future__ import annotations

import sys
import zipfile

import importlib_metadata
import pytest
from entropic_mcp import _entrypoints
from entropic_mcp._entrypoints import FoundEntryPoint, entry_points
from entropic_mcp._plugins import _distribution


def _theirs(group: str) -> list[tuple[str, str, str]]:
    return [(ep.name, ep.value, ep.dist._path.name) for ep in importlib_metadata.entry_points(group=group)]


def _ours(group: str) -> list[tuple[str, str, str]]:
    found = _entrypoints._scan(group)
    assert found is not None, "the path was plain directories: read without importlib_metadata"
    return [(ep.name, ep.value, ep.folder.rpartition("/")[2]) for ep in found]


@pytest.mark.parametrize("group", ["entropic_mcp.plugins", "console_scripts", "pytest11"])
def test_same_entry_points_as_importlib_metadata(fake_site, group):
    assert _ours(group) == _theirs(group)


def _dist_info(root, folder, entry_points_txt, *, metadata=True):
    info = root / folder
    info.mkdir(parents=True)
    if metadata:
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {folder.partition('-')[0]}\nVersion: 1\n")
    (info / "entry_points.txt").write_text(entry_points_txt)


def test_first_distribution_of_a_name_wins_and_one_with_metadata_first(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    # Same project (normalised names equal) in two path directories: the first on the path is kept.
    _dist_info(first, "Fake.Shadow-2.0.dist-info", "[entropic_mcp.plugins]\nshadow = shadow_new\n")
    _dist_info(second, "fake_shadow-1.0.dist-info", "[entropic_mcp.plugins]\nshadow = shadow_old\n")
    # A folder without metadata loses to a later one with it, and one alone is listed last.
    _dist_info(first, "nometa-1.0.dist-info", "[entropic_mcp.plugins]\nnometa = bad\n", metadata=False)
    _dist_info(second, "nometa-1.1.dist-info", "[entropic_mcp.plugins]\nnometa = good\n")
    _dist_info(
        first,
        "alone-1.0.dist-info",
        "# a comment\n[entropic_mcp.plugins]\nalone = alone:hook [extra]\n",
        metadata=False,
    )
    _dist_info(
        second,
        "other-1.0.dist-info",
        "[console_scripts]\nx = y\n[entropic_mcp.plugins]\n  later =  later.mod:obj.attr\n",
    )
    monkeypatch.setattr(sys, "path", [str(first), str(second), str(tmp_path / "missing")])
    assert _ours("entropic_mcp.plugins") == _theirs("entropic_mcp.plugins")
    assert [ep.name for ep in entry_points("entropic_mcp.plugins")] == ["shadow", "nometa", "later", "alone"]
    later = next(ep for ep in entry_points("entropic_mcp.plugins") if ep.name == "later")
    assert later.module == "later.mod"
    assert _distribution(later) == ("other", "1.0")


def test_what_is_not_plain_dist_info_directories_goes_to_importlib_metadata(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    _dist_info(plain, "fine-1.0.dist-info", "[entropic_mcp.plugins]\nfine = fine\n")
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
        zf.writestr("zipped-1.0.dist-info/entry_points.txt", "[entropic_mcp.plugins]\nzipped = zipped\n")
    monkeypatch.setattr(sys, "path", [str(plain), str(archive)])
    assert _entrypoints._scan("entropic_mcp.plugins") is None
    found = entry_points("entropic_mcp.plugins")
    assert [ep.name for ep in found] == ["fine", "zipped"]
    assert not any(isinstance(ep, FoundEntryPoint) for ep in found)

    legacy = tmp_path / "legacy"
    _dist_info(legacy, "old.egg-info", "[entropic_mcp.plugins]\nold = old\n")
    monkeypatch.setattr(sys, "path", [str(plain), str(legacy)])
    assert _entrypoints._scan("entropic_mcp.plugins") is None
    assert [ep.name for ep in entry_points("entropic_mcp.plugins")] == ["fine", "old"]


def test_an_entry_point_loads_its_attribute(tmp_path, monkeypatch):
    package = tmp_path / "ep_target_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("class Outer:\n    inner = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert FoundEntryPoint("x", "ep_target_pkg:Outer.inner", "g", str(tmp_path)).load() == 42
    assert FoundEntryPoint("x", "ep_target_pkg", "g", str(tmp_path)).load().Outer.inner == 42
