"""The filesystem tools through `entropic-mcp serve` and the official MCP client (stdio)."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.anyio]

CONFIG = """\
[entropic_mcp]
plugins = ["filesystem"]
[storage]
backend = "none"
[permissions]
default = "allow"
deny = ["filesystem.read:secrets/*"]
"""
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(20)
PDF = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def project(root: Path) -> Path:
    (root / "entropic-mcp.toml").write_text(CONFIG, encoding="utf-8")
    (root / "a.txt").write_text("alpha\nbeta\n")
    (root / "pic.png").write_bytes(PNG)
    (root / "doc.pdf").write_bytes(PDF)
    (root / "secrets").mkdir()
    (root / "secrets" / "key.txt").write_text("TOPSECRET alpha\n")
    return root


async def test_tools_over_the_official_client(project: Path) -> None:
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("entropic-mcp")), args=["serve"], cwd=str(project), env=env
    )
    async with Client(params, read_timeout_seconds=30) as client:
        read = await client.call_tool("filesystem.read_file", {"path": "a.txt"})
        assert read.is_error is False and read.content[0].text == "alpha\nbeta"
        image = await client.call_tool("filesystem.read_file", {"path": "pic.png"})
        assert image.is_error is False
        assert json.loads(image.content[0].text)["mime_type"] == "image/png"
        assert image.content[1].type == "image" and image.content[1].mime_type == "image/png"
        assert base64.b64decode(image.content[1].data) == PNG
        pdf = await client.call_tool("filesystem.read_file", {"path": "doc.pdf"})
        assert pdf.content[1].type == "resource" and pdf.content[1].resource.mime_type == "application/pdf"
        grep = await client.call_tool("filesystem.grep", {"pattern": "alpha"})
        # Lines over the wire, as ripgrep prints them; no structuredContent (no outputSchema).
        [block] = grep.content
        assert block.text.startswith("a.txt:1:alpha\n[note: ") and grep.structured_content is None
        assert "TOPSECRET" not in block.text
        grep = await client.call_tool("filesystem.grep", {"pattern": "alpha", "format": "json"})
        found = json.loads(grep.content[0].text)
        assert [m["path"] for m in found if "path" in m] == ["a.txt"] and "TOPSECRET" not in grep.content[0].text
        assert found[-1]["skipped_by_rules"] == 1

        # Every other tool, once, through the same client.
        def data(result):
            assert result.is_error is False, result.content[0].text
            return json.loads(result.content[0].text)

        many = await client.call_tool("filesystem.read_files", {"paths": ["a.txt", "secrets/key.txt"]})
        assert many.is_error is True  # a read rule on one path refuses the call
        many = await client.call_tool("filesystem.read_files", {"paths": ["a.txt", "pic.png"]})
        assert many.content[0].text.startswith("==> a.txt <==\nalpha")
        edit = data(
            await client.call_tool(
                "filesystem.edit_file",
                {"path": "a.txt", "edits": [{"old_string": "alpha", "new_string": "ALPHA"}], "dry_run": True},
            )
        )
        assert edit["dry_run"] is True and "+ALPHA" in edit["diff"]
        assert data(await client.call_tool("filesystem.write_file", {"path": "new/b.txt", "content": "b\n"}))["created"]
        assert (
            data(await client.call_tool("filesystem.glob", {"pattern": "**/*.txt", "sort": "mtime", "format": "json"}))[
                0
            ]
            == "new/b.txt"
        )
        listed = data(await client.call_tool("filesystem.list_directory", {"path": "new", "format": "json"}))
        assert [e["name"] for e in listed] == ["b.txt"]
        assert data(await client.call_tool("filesystem.file_info", {"path": "pic.png"}))["mime_type"] == "image/png"
        assert data(await client.call_tool("filesystem.create_directory", {"path": "made/deep"}))["created"] is True
        await client.call_tool("filesystem.read_file", {"path": "new/b.txt"})
        moved = data(
            await client.call_tool("filesystem.move_file", {"source": "new/b.txt", "destination": "made/b.txt"})
        )
        assert moved == {"source": "new/b.txt", "destination": "made/b.txt"}
        assert data(await client.call_tool("filesystem.delete_file", {"path": "made/b.txt"}))["deleted"] == "file"
        denied = await client.call_tool("filesystem.write_file", {"path": "entropic-mcp.toml", "content": ""})
        assert denied.is_error is True
    assert not (project / "made" / "b.txt").exists() and (project / "entropic-mcp.toml").read_text() == CONFIG
