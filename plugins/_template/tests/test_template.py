import asyncio
import json
from pathlib import Path

import entropic_mcp_template
from entropic_mcp.testing import call, check_plugin, make_manager


def test_plugin_passes_the_conformance_checks(tmp_path: Path) -> None:
    assert check_plugin(entropic_mcp_template, root=tmp_path, examples=30) == []


def test_word_count_counts_words_lines_and_characters(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, plugins=[entropic_mcp_template], config={"permissions": {"default": "allow"}})
    outcome = call(manager, "template.word_count", {"text": "one two\nthree"})
    assert outcome.kind == "ok"
    assert outcome.response.structured == {"words": 3, "lines": 2, "characters": 13}


def test_word_count_called_directly_refuses_text_that_is_not_a_string(tmp_path: Path) -> None:
    server = entropic_mcp_template.TemplateServer(root=tmp_path)
    response = asyncio.run(server.execute("word_count", {"text": ["not", "text"]}))
    assert response.is_error
    assert json.loads(response.result)["error"] == "invalid_args"


def test_word_count_is_read_only_and_listed_with_its_prefix(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, plugins=[entropic_mcp_template])
    [tool] = manager.list_tools()
    assert tool["name"] == "template.word_count"
    assert tool["annotations"]["readOnlyHint"] is True
