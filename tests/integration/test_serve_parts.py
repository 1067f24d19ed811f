"""The serve package's pieces in-process: name table, pages, framing, results, the HTTP guard's rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from entropic_mcp import ConfigError, ServerResponse, config_from_dict
from entropic_mcp._pipeline import CallOutcome
from entropic_mcp._serve._http import _origin_allowed, is_loopback, token_for
from entropic_mcp._serve._listing import InvalidCursor, Listing
from entropic_mcp._serve._names import ToolNames
from entropic_mcp._serve._results import call_result
from entropic_mcp._serve._stdio import LineFramer, Oversized, classify


def test_underscored_names_round_trip_through_the_table() -> None:
    names = ToolNames.build(["file_system.read_file", "git.status"], "underscored")
    assert names.to_exposed["file_system.read_file"] == "file_system__read_file"
    assert names.internal("file_system__read_file") == "file_system.read_file"
    assert names.internal("file.system__read_file") is None


def test_two_tools_sharing_an_underscored_name_are_reported_whole() -> None:
    with pytest.raises(ConfigError) as raised:
        ToolNames.build(["a__b.c", "a.b__c"], "underscored")
    assert "'a__b.c'" in str(raised.value) and "'a.b__c'" in str(raised.value) and "dotted" in str(raised.value)


def test_portable_names_are_the_default_and_match_the_model_api_pattern() -> None:
    import re

    from entropic_mcp import config_from_dict

    internal = ["filesystem.read_file", "git.status", "bash.output", "my-server.do_it"]
    names = ToolNames.build(internal, config_from_dict({}, root=".").serve.tool_names)
    assert names.style == "portable" and names.to_exposed["filesystem.read_file"] == "filesystem_read_file"
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in names.to_internal)
    for spelling in ("filesystem_read_file", "filesystem.read_file", "filesystem__read_file"):
        assert names.internal(spelling) == "filesystem.read_file"
    # Rules, audit rows and docs keep the dotted names: messages are renamed for the client only.
    assert names.rename_mentions("call filesystem.read_file first") == "call filesystem_read_file first"


def test_a_spelling_two_tools_share_is_accepted_for_neither_and_a_listed_clash_is_an_error() -> None:
    names = ToolNames.build(["a_b.c", "a.b__c"], "dotted")
    # 'a_b__c' is a_b.c underscored and a.b__c portable: neither is guessed; the others still work.
    assert names.internal("a_b__c") is None
    assert names.internal("a_b_c") == "a_b.c" and names.internal("a__b__c") == "a.b__c"
    with pytest.raises(ConfigError) as raised:
        ToolNames.build(["a_b.c", "a.b_c"], "portable")
    assert (
        "'a_b.c'" in str(raised.value)
        and "'a.b_c'" in str(raised.value)
        and 'tool_names = "dotted"' in str(raised.value)
    )
    names = ToolNames.build(["a_b.c", "a.b_c"], "dotted")
    assert names.internal("a_b_c") is None  # ambiguous: neither tool is guessed


def test_unknown_names_get_the_nearest_listed_names() -> None:
    names = ToolNames.build(["filesystem.read_file", "filesystem.write_file", "git.status", "bash.execute"], "portable")
    assert names.nearest("filesystem.readfile")[0] == "filesystem_read_file"
    assert names.nearest("read_file")[0] == "filesystem_read_file"  # the server left out
    assert names.nearest("gti_status") == ["git_status"]
    assert names.nearest("launch_rockets") == []


def test_names_longer_than_64_characters_are_reported(caplog: pytest.LogCaptureFixture) -> None:
    long_name = "server." + "t" * 60
    names = ToolNames.build([long_name], "dotted")
    names.report()
    assert names.too_long == (long_name,)
    assert "67 characters" in caplog.text


def test_pages_are_sorted_and_cursors_are_checked() -> None:
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("b.x", "a.y", "c.z")]
    listing = Listing(tools, ToolNames.build([t["name"] for t in tools], "dotted"), 2)
    first = listing.page(None)
    assert [t["name"] for t in first["tools"]] == ["a.y", "b.x"]
    second = listing.page(first["nextCursor"])
    assert [t["name"] for t in second["tools"]] == ["c.z"] and "nextCursor" not in second
    for bad in ("garbage", "ZW50cm9waWMtbWNwOjE", ""):
        with pytest.raises(InvalidCursor):
            listing.page(bad)


def test_framer_splits_lines_and_bounds_them() -> None:
    framer = LineFramer(10)
    assert framer.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert framer.feed(b":2}\n") == [b'{"b":2}']
    out = framer.feed(b'{"id": 7, "x": "' + b"y" * 50 + b'"}\nok\n')
    assert isinstance(out[0], Oversized) and out[0].size == 68 and out[1] == b"ok"
    error = classify(out[0], 10)
    assert error.id == 7 and error.error.code == -32600  # type: ignore[union-attr]
    assert framer.feed(b"tail") == [] and framer.finish() == [b"tail"]


def _outcome(result: str, *, is_error: bool = False) -> CallOutcome:
    kind = "error" if is_error else "ok"
    response = ServerResponse(result=result, is_error=is_error)
    return CallOutcome(name="s.t", kind=kind, elapsed_ms=1.0, conversation_id="c", response=response)


def test_results_are_sent_once_as_text_unless_the_tool_declares_an_output_schema() -> None:
    ok = _outcome('{"a": 1}')
    assert call_result(ok) == {
        "content": [{"type": "text", "text": '{"a": 1}'}],
        "isError": False,
        "_meta": {"entropic-mcp/directives": [], "entropic-mcp/kind": "ok"},
    }
    # A tool declaring an outputSchema: the object also as structuredContent, the text the same JSON.
    declared = call_result(ok, declared=True)
    assert declared["structuredContent"] == {"a": 1} and declared["content"] == [{"type": "text", "text": '{"a": 1}'}]
    # [serve] structured_content = "json": every object result, as before.
    assert call_result(ok, every_object=True)["structuredContent"] == {"a": 1}


@pytest.mark.parametrize(
    "text",
    ["[1, 2]", '"a string"', "12", "null", "{not json", "", "plain text", ' {"a": 1}', '{"a": 1} trailing'],
)
@pytest.mark.parametrize("mode", [{"declared": True}, {"every_object": True}, {}])
def test_only_a_json_object_is_ever_structured(text: str, mode: dict[str, bool]) -> None:
    assert "structuredContent" not in call_result(_outcome(text), **mode)


def test_a_failure_is_structured_only_when_every_object_is() -> None:
    failed = _outcome('{"error": "boom", "message": "call it again"}', is_error=True)
    # A failure's object is no instance of the declared schema (clients would reject it).
    assert "structuredContent" not in call_result(failed, declared=True)
    assert "structuredContent" not in call_result(failed)
    assert call_result(failed, every_object=True)["structuredContent"]["error"] == "boom"


def test_the_tools_own_structured_value_wins_over_its_text() -> None:
    response = ServerResponse._make("3 words", structured={"words": 3})
    outcome = CallOutcome(name="s.t", kind="ok", elapsed_ms=1.0, conversation_id="c", response=response)
    result = call_result(outcome, declared=True)
    assert result["structuredContent"] == {"words": 3} and result["content"][0]["text"] == "3 words"
    assert "structuredContent" not in call_result(outcome)


def test_structured_content_setting_is_checked(tmp_path: Path) -> None:
    assert config_from_dict({}, root=tmp_path).serve.structured_content == "declared"
    assert config_from_dict({"serve": {"structured_content": "json"}}, root=tmp_path).serve.structured_content == "json"
    for wrong in ("always", True, ["json"]):
        with pytest.raises(ConfigError, match="structured_content"):
            config_from_dict({"serve": {"structured_content": wrong}}, root=tmp_path)


def test_http_rules() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    assert token_for("127.0.0.1", {}) is None
    with pytest.raises(ConfigError, match="ENTROPIC_MCP_TOKEN"):
        token_for("0.0.0.0", {})
    with pytest.raises(ConfigError, match="too short"):
        token_for("0.0.0.0", {"ENTROPIC_MCP_TOKEN": "short"})
    assert token_for("0.0.0.0", {"ENTROPIC_MCP_TOKEN": "x" * 32}) == "x" * 32
    assert _origin_allowed("http://localhost:6274", ()) and _origin_allowed("http://127.0.0.1", ())
    assert not _origin_allowed("https://evil.example", ())
    assert _origin_allowed("https://app.example", ("https://app.example",))
    assert _origin_allowed("https://app.example:8443", ("https://app.example:*",))


def test_serve_settings_come_from_the_config(tmp_path: Path) -> None:
    config = config_from_dict({"serve": {"tool_names": "underscored", "list_page_size": 5}}, root=tmp_path)
    assert config.serve.tool_names == "underscored" and config.serve.list_page_size == 5


def test_event_loop_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from entropic_mcp._serve import use_uvloop

    assert config_from_dict({}, root=tmp_path).serve.event_loop == "auto"
    with pytest.raises(ConfigError, match="event_loop"):
        config_from_dict({"serve": {"event_loop": "trio"}}, root=tmp_path)
    installed = importlib.util.find_spec("uvloop") is not None
    assert use_uvloop("auto") is installed and use_uvloop("asyncio") is False
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a))
    assert use_uvloop("auto") is False
    with pytest.raises(ConfigError, match='event_loop = "uvloop" but uvloop is not installed'):
        use_uvloop("uvloop")


def test_answers_to_the_two_questions() -> None:
    from entropic_mcp import OutsideRootRequest
    from entropic_mcp._serve._approval import (
        INPUT_KEY,
        answer_from,
        decision_from,
        input_required,
        outside_root_answer,
        outside_root_question,
    )

    request = OutsideRootRequest(path=Path("/etc/hosts"), tool="filesystem.read_file", access="read", root=Path("/p"))
    message, schema = outside_root_question(request)
    assert "/etc/hosts" in message and "outside_root_allow" in message
    assert schema["properties"]["decision"]["enum"] == ["allow_once", "deny_once"]
    assert outside_root_answer(("accept", {"decision": "allow_once"})) is True
    assert outside_root_answer(("accept", {"decision": "deny_once"})) is False
    assert outside_root_answer(("decline", None)) is False and outside_root_answer(("cancel", None)) is False
    assert outside_root_answer(("accept", {"decision": "always_allow"})) is None
    assert outside_root_answer(None) is None
    wire = input_required((message, schema), "state-1")
    assert wire["requestState"] == "state-1" and wire["inputRequests"][INPUT_KEY]["params"]["message"] == message
    assert answer_from({INPUT_KEY: {"action": "accept", "content": {"decision": "deny_once"}}}) == (
        "accept",
        {"decision": "deny_once"},
    )
    assert answer_from({}) is None and answer_from({INPUT_KEY: {"content": {}}}) is None
    decision = decision_from("accept", {"decision": "always_allow", "feedback": "ok"})
    assert decision is not None and decision.answer == "always_allow" and decision.feedback == "ok"
    assert decision_from("accept", {"decision": "maybe"}) is None


def test_only_requests_asking_for_progress_are_streamed() -> None:
    from entropic_mcp._serve._http import _wants_stream

    assert _wants_stream(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"t"}}}')
    assert _wants_stream(b'{"params":{"_meta":{"progressToken":7}}}')
    assert not _wants_stream(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}')
    # The key appearing elsewhere (an argument's text) is not a request for progress.
    assert not _wants_stream(b'{"params":{"arguments":{"text":"\\"progressToken\\""}}}')
    assert not _wants_stream(b'{"params":{"arguments":{"progressToken":"t"}}}')
    assert not _wants_stream(b'not json "progressToken"') and not _wants_stream(b'["progressToken"]')
