"""Tool definitions are read from a package's directory directly, and through importlib.resources
from anywhere else (a zip); both read the same file the same way."""

from __future__ import annotations

import importlib
import json
import sys
import zipfile
from importlib import resources

import pytest
from entropic_mcp import _definitions
from entropic_mcp._definitions import load_tool_definition
from entropic_mcp._errors import ToolDefinitionError

DEFINITION = {"name": "zipped", "description": "línea\r\nsegunda", "inputSchema": {"type": "object"}}


def _package(root, name):
    package = root / name
    (package / "tools").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tools" / "zipped.json").write_bytes(json.dumps(DEFINITION).encode())
    return package


def test_a_zipped_package_reads_through_importlib_resources(tmp_path, monkeypatch):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_defs/__init__.py", "")
        zf.writestr("zipped_defs/tools/zipped.json", json.dumps(DEFINITION))
    monkeypatch.syspath_prepend(str(archive))
    read = []
    real = resources.files
    monkeypatch.setattr(resources, "files", lambda package: read.append(package) or real(package))
    assert load_tool_definition("zipped_defs", "zipped").to_mcp() == DEFINITION
    assert read == ["zipped_defs"]
    with pytest.raises(ToolDefinitionError, match="tool definition file not found"):
        load_tool_definition("zipped_defs", "absent")
    sys.modules.pop("zipped_defs", None)


def test_a_directory_package_is_read_without_importlib_resources(tmp_path, monkeypatch):
    _package(tmp_path, "plain_defs")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(resources, "files", lambda package: pytest.fail("read through importlib.resources"))
    assert load_tool_definition("plain_defs", "zipped").to_mcp() == DEFINITION
    module = importlib.import_module("plain_defs")
    assert _definitions._read_data("plain_defs", "tools", "zipped.json") == json.dumps(DEFINITION)
    with pytest.raises(ToolDefinitionError, match="tool definition file not found"):
        load_tool_definition("plain_defs", "absent")
    with pytest.raises(ToolDefinitionError, match="tool definition file not found"):
        load_tool_definition("no_such_package_here", "zipped")
    sys.modules.pop(module.__name__, None)
