"""Results as plain text with one footer line; ``format: "json"`` keeps the object."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from bash_helpers import make_manager
from entropic_mcp import CallContext
from entropic_mcp_bash._render import as_text, duration, footer


def call(manager: object, tool: str, args: dict[str, object]) -> tuple[str, str, object]:
    result = manager.call_sync(f"bash.{tool}", args, CallContext(conversation_id="c"))  # type: ignore[attr-defined]
    return result.kind, result.response.result, result.response.structured


def test_output_is_plain_text_with_an_exit_and_duration_footer(root: Path) -> None:
    manager, _ = make_manager(root)
    kind, text, structured = call(manager, "execute", {"command": 'echo "a \\"quoted\\" line"; echo err >&2; exit 3'})
    assert kind == "ok"
    body, _, last = text.rpartition("\n")
    assert body == 'a "quoted" line\nerr'  # no escaping of quotes or newlines
    assert last.startswith("[exit 3, ") and last.endswith(" ms]")
    # The object is still the structured value, for hosts that ask for structured content.
    assert isinstance(structured, dict) and structured["exit_code"] == 3 and structured["output"] == body + "\n"


def test_no_output_says_so_and_output_without_newline_gets_one(root: Path) -> None:
    manager, _ = make_manager(root)
    assert call(manager, "execute", {"command": "true"})[1].startswith("(no output)\n[exit 0, ")
    assert call(manager, "execute", {"command": "printf abc"})[1].startswith("abc\n[exit 0, ")


def test_format_json_returns_the_object(root: Path) -> None:
    manager, _ = make_manager(root)
    _, text, structured = call(manager, "execute", {"command": "echo hi", "format": "json"})
    data = orjson.loads(text)
    assert data == structured and data["output"] == "hi\n" and data["exit_code"] == 0 and data["truncated"] is False


def test_an_unknown_format_is_refused_with_the_choices(root: Path) -> None:
    manager, _ = make_manager(root)
    kind, text, _ = call(manager, "execute", {"command": "true", "format": "yaml"})
    assert kind == "rejected_schema" and "format" in text and "text" in text and "json" in text


def test_errors_stay_json_objects(root: Path) -> None:
    manager, _ = make_manager(root)
    kind, text, _ = call(manager, "execute", {"command": "echo started; sleep 5", "timeout_seconds": 0.3})
    data = orjson.loads(text)
    assert kind == "timeout" and data["error"] == "timeout" and "started" in data["output"]


def test_a_changed_directory_is_in_the_footer(root: Path) -> None:
    (root / "sub").mkdir()
    manager, _ = make_manager(root)
    assert call(manager, "execute", {"command": "cd sub"})[1].endswith(", cwd sub]")


def test_background_start_output_and_list_are_text(root: Path) -> None:
    manager, _ = make_manager(root)
    _, started, structured = call(manager, "execute", {"command": "echo one; exit 4", "run_in_background": True})
    assert isinstance(structured, dict)
    run_id = structured["run_id"]
    assert started.startswith(f"[run {run_id}: running, timeout ") and "bash.output" in started
    deadline = time.monotonic() + 20
    text = ""
    while "exit 4" not in text and time.monotonic() < deadline:
        text += call(manager, "output", {"run_id": run_id})[1]
        time.sleep(0.05)
    # Reads may come before "one" is printed ("(no output)") or before the shell is reaped (footer
    # "running"): the exit is then in the footer of a later read.
    assert f"one\n[run {run_id}, " in text and f"[run {run_id}, exit 4, " in text
    listed = call(manager, "list", {})[1].split("\n")
    assert listed[0] == "cwd ." and listed[1].split("\t")[:2] == [run_id, "exited 4"]
    assert listed[1].endswith("\techo one; exit 4")
    assert call(manager, "list", {"format": "json"})[2] == orjson.loads(call(manager, "list", {"format": "json"})[1])
    manager.close()
    fresh, _ = make_manager(root)
    assert call(fresh, "list", {})[1] == "no background runs; cwd ."


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"exit_code": 0, "elapsed_ms": 12}, "[exit 0, 12 ms]"),
        ({"exit_code": 1, "elapsed_ms": 2345, "truncated": True}, "[exit 1, 2 s, truncated]"),
        (
            {"run_id": "bg2", "status": "killed", "elapsed_ms": 5, "dropped_bytes": 9},
            "[run bg2, killed, 5 ms, 9 unread bytes dropped]",
        ),
        ({"exit_code": 0, "elapsed_ms": 1, "note": "moved"}, "[exit 0, 1 ms]\n[note: moved]"),
    ],
)
def test_footer_lines(data: dict[str, object], line: str) -> None:
    assert footer(data) == line
    assert as_text({**data, "output": "x"}) == "x\n" + line


def test_duration_switches_to_seconds_at_one_second() -> None:
    assert (duration(999), duration(1000), duration(61234)) == ("999 ms", "1 s", "61 s")
