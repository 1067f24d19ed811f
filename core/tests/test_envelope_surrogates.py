"""Lone surrogates (a name not UTF-8 on disk, decoded with surrogateescape) never fail a result:
they show as U+FFFD, the form ``toolkit.paths.printable`` gives and ``shown_entry`` finds again."""

from __future__ import annotations

import os

import orjson
import pytest
from entropic_mcp import ToolError, ToolResult
from entropic_mcp.toolkit.paths import printable, shown_entry
from hypothesis import given
from hypothesis import strategies as st


def test_json_results_and_text_results_carry_no_surrogates():
    name = b"caf\xe9/\xe2\x82x".decode("utf-8", "surrogateescape")
    assert orjson.loads(ToolResult.json({name: [name, 1]}).text) == {"caf\ufffd/\ufffdx": ["caf\ufffd/\ufffdx", 1]}
    # with a surrogate that stands for no byte (from a JSON escape) each becomes one U+FFFD
    assert ToolResult(text=f"{name}\ud800").text == "caf\ufffd/\ufffd\ufffdx\ufffd"
    assert ToolResult(text="plain é").text == "plain é"


@given(st.binary(max_size=16))
def test_printable_is_what_replace_decoding_shows(data):
    shown = printable(data.decode("utf-8", "surrogateescape"))
    assert shown == data.decode("utf-8", "replace")
    orjson.dumps(shown)


def test_shown_entry_finds_the_one_name_and_refuses_two(tmp_path):
    base = os.fsencode(tmp_path)
    os.close(os.open(os.path.join(base, b"a\xff"), os.O_CREAT | os.O_WRONLY, 0o644))
    assert shown_entry(tmp_path, "a\ufffd", display="a\ufffd") == b"a\xff".decode("utf-8", "surrogateescape")
    assert shown_entry(tmp_path, "b\ufffd", display="b\ufffd") is None
    os.close(os.open(os.path.join(base, b"a\xfe"), os.O_CREAT | os.O_WRONLY, 0o644))
    with pytest.raises(ToolError) as caught:
        shown_entry(tmp_path, "a\ufffd", display="a\ufffd")
    assert caught.value.code == "ambiguous_path" and "a\\xfe, a\\xff" in caught.value.message
