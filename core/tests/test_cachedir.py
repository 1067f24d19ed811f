"""``toolkit.paths.cache_directory``: the one per-user cache directory of the host and its plugins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from entropic_mcp.cli import _listing
from entropic_mcp.toolkit.paths import cache_directory


def test_the_data_directory_variable_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("ENTROPIC_MCP_DATA_DIR", str(tmp_path / "link"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_directory("listings") == str(tmp_path / "real" / "cache" / "listings")


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG layout is Linux's")
def test_xdg_cache_home_then_the_home_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ENTROPIC_MCP_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_directory("tools") == str(tmp_path / "xdg" / "entropic-mcp" / "tools")
    monkeypatch.setenv("XDG_CACHE_HOME", "  ")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_directory("tools") == str(tmp_path / "home" / ".cache" / "entropic-mcp" / "tools")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/abs", "nul\0"])
def test_a_name_is_one_path_component(name: str) -> None:
    with pytest.raises(ValueError, match="one path component"):
        cache_directory(name)


def test_the_host_listing_cache_uses_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The filesystem plugin's listing store is held to it in that plugin's own tests.
    monkeypatch.setenv("ENTROPIC_MCP_DATA_DIR", str(tmp_path))
    assert _listing._directory() == str(tmp_path / "cache" / "tools")


def test_finding_it_imports_neither_pathlib_nor_platformdirs_on_linux(tmp_path: Path) -> None:
    # ``entropic-mcp tools`` answers from its cache before anything heavier is imported.
    code = (
        "import sys; from entropic_mcp._cachedir import cache_directory; cache_directory('tools'); "
        "print(sorted(m for m in ('pathlib', 'platformdirs') if m in sys.modules))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("ENTROPIC_MCP_DATA_DIR", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    if sys.platform == "linux":
        assert out.strip() == "[]"
