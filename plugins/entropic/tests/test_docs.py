"""The docs stay true: the runnable example of docs/host.md runs and prints what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[3] / "docs"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text("utf-8"), flags=re.S)


@pytest.mark.skipif(not (DOCS / "host.md").exists(), reason="runs in the repository checkout only")
def test_host_md_example_runs_and_prints_its_comments(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    example = python_blocks(DOCS / "host.md")[0]
    exec(compile(example, "docs/host.md", "exec"), {"__name__": "docs_example"})
    printed = capsys.readouterr().out.splitlines()
    promised = [line[2:] for line in example.splitlines() if line.startswith("# ") and not line.startswith("# A ")]
    assert len(printed) == len(promised)
    for line, expected in zip(printed, promised, strict=True):
        pattern = ".*".join(re.escape(part) for part in re.split(r"…|\.\.\.", expected))
        assert re.fullmatch(pattern, line), (line, expected)


@pytest.mark.skipif(not (DOCS / "plugins" / "entropic.md").exists(), reason="runs in the repository checkout only")
def test_entropic_md_names_every_tool_and_error_code():
    page = (DOCS / "plugins" / "entropic.md").read_text("utf-8")
    from entropic_mcp_entropic import EntropicServer

    server = EntropicServer()
    server.configure({"tiers": ["a", "b"]})
    for tool in server.tools:
        assert f"`{tool}`" in page, tool
    source = "".join(p.read_text("utf-8") for p in Path(__file__).resolve().parents[1].joinpath("src").rglob("*.py"))
    for code in sorted(set(re.findall(r'ToolError\(\s*"([a-z_]+)"', source))):
        assert f"`{code}`" in page, code
    assert "entropic_mcp_engine_state(conversation_id: str, identity: str | None) -> EngineState | None" in page
