"""The init starter's header tells the truth: every value it marks (default) is what no config gives.

Here, not in core's tests: the starter sets server tables whose defaults live in the plugins.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_every_value_init_calls_a_default_is_the_default_without_a_config(tmp_path):
    """The starter's header says lines marked (default) hold what no config file gives: check each."""
    import tomllib

    from entropic_mcp import load_config
    from entropic_mcp.cli._config import STARTER

    marked: list[tuple[str, str]] = []
    section = ""
    for line in STARTER.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif "# (default)" in line and not line.startswith("#"):
            marked.append((section, line.split("=", 1)[0].strip()))
    assert len(marked) >= 8, marked
    starter = tomllib.loads(STARTER)
    empty = tmp_path / "empty"
    empty.mkdir()
    defaults = load_config(cwd=empty)
    for section, key in marked:
        written = starter
        for part in section.split("."):
            written = written[part]
        value = written[key]
        if section == "entropic_mcp":
            assert key == "root" and value == "."  # the directory of the file, or the cwd without one
        elif section.startswith("servers."):
            server = section.partition(".")[2]
            assert _server_default(server, key, empty) == value, (section, key)
        else:
            assert getattr(getattr(defaults, section), key) == value, (section, key)


def _server_default(server: str, key: str, root):
    from entropic_mcp._paths import PathPolicy
    from entropic_mcp_bash._settings import DEFAULT_TIMEOUT

    return {
        ("bash", "timeout_seconds"): DEFAULT_TIMEOUT,
        ("filesystem", "allow_outside_root"): PathPolicy().allow_outside_root,
    }[(server, key)]
