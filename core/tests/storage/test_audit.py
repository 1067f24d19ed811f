"""The audit trail: cheap batched appends, flushed on size, time, other writes and close."""

from __future__ import annotations

from pathlib import Path

import orjson
from entropic_mcp import CallOutcome, ServerResponse
from entropic_mcp._storage._tinydb import TinyDBBackend
from entropic_mcp.storage import ToolCallRecord


def _outcome(i: int = 0) -> CallOutcome:
    return CallOutcome(
        name="demo.echo",
        response=ServerResponse(result=f"r{i}"),
        kind="success",
        elapsed_ms=1.5,
        conversation_id="c1",
        args={"text": f"t{i}"},
        permission="allow",
    )


def _record(i: int = 0) -> ToolCallRecord:
    return ToolCallRecord.from_outcome(_outcome(i))


def _lines(store: Path) -> list[bytes]:
    path = store / "tool_calls.jsonl"
    return path.read_bytes().splitlines() if path.exists() else []


def test_records_are_buffered_until_the_batch_is_full(tmp_path: Path) -> None:
    backend = TinyDBBackend(tmp_path / "s", audit_batch=5, audit_flush_seconds=3600)
    for i in range(4):
        backend.record_tool_call(_record(i))
    assert _lines(tmp_path / "s") == []
    backend.record_tool_call(_record(4))
    assert len(_lines(tmp_path / "s")) == 5
    backend.close()


def test_a_record_is_the_outcomes_audit_form(tmp_path: Path) -> None:
    backend = TinyDBBackend(tmp_path / "s")
    outcome = _outcome(7)
    backend.record_tool_call(ToolCallRecord.from_outcome(outcome))
    backend.close()
    (line,) = _lines(tmp_path / "s")
    written = orjson.loads(line)
    assert written == orjson.loads(orjson.dumps(ToolCallRecord.from_outcome(outcome).to_dict()))
    # the documented record holds everything the pipeline's own audit form does
    expected = orjson.loads(orjson.dumps(outcome.to_record()))
    assert {key: written[key] for key in expected} == expected


def test_the_timer_writes_a_lone_record(tmp_path: Path) -> None:
    backend = TinyDBBackend(tmp_path / "s", audit_batch=100, audit_flush_seconds=0.01)
    backend.record_tool_call(_record())
    timer = backend._audit._timer
    assert timer is not None
    timer.join(timeout=10)
    assert len(_lines(tmp_path / "s")) == 1
    backend.close()


def test_a_durable_write_also_writes_the_buffered_records(tmp_path: Path) -> None:
    backend = TinyDBBackend(tmp_path / "s", audit_batch=100, audit_flush_seconds=3600)
    backend.record_tool_call(_record())
    backend.create_conversation("x")
    assert len(_lines(tmp_path / "s")) == 1
    backend.close()


def test_close_writes_the_rest_and_stats_count_file_plus_buffer(tmp_path: Path) -> None:
    backend = TinyDBBackend(tmp_path / "s", audit_batch=100, audit_flush_seconds=3600)
    for i in range(3):
        backend.record_tool_call(_record(i))
    assert backend.stats()["tool_calls"] == 3
    backend.close()
    assert len(_lines(tmp_path / "s")) == 3
    assert TinyDBBackend(tmp_path / "s").stats()["tool_calls"] == 3


def test_a_partial_line_from_a_killed_writer_costs_only_that_record(tmp_path: Path) -> None:
    store = tmp_path / "s"
    backend = TinyDBBackend(store, audit_batch=1)
    backend.record_tool_call(_record(1))
    with (store / "tool_calls.jsonl").open("ab") as fh:
        fh.write(b'{"tool": "demo.ec')
    backend.record_tool_call(_record(2))
    backend.close()
    lines = _lines(store)
    assert orjson.loads(lines[0])["args"] == {"text": "t1"}
    assert orjson.loads(lines[-1])["args"] == {"text": "t2"}
    assert lines[1] == b'{"tool": "demo.ec'


def test_values_json_cannot_hold_are_recorded_as_text(tmp_path: Path) -> None:
    backend = TinyDBBackend(tmp_path / "s", audit_batch=1)
    outcome = CallOutcome(
        name="demo.echo",
        response=ServerResponse(result="ok"),
        kind="success",
        elapsed_ms=1.0,
        conversation_id="c1",
        args={"blob": b"\x00\x01", "when": {1, 2}},
    )
    backend.record_tool_call(ToolCallRecord.from_outcome(outcome))
    backend.close()
    record = orjson.loads(_lines(tmp_path / "s")[0])
    assert record["args"]["blob"] == repr(b"\x00\x01")


def test_records_that_cannot_be_written_are_kept_for_the_next_try(tmp_path: Path, monkeypatch) -> None:
    from entropic_mcp._storage import _audit
    from entropic_mcp.storage import StorageError

    backend = TinyDBBackend(tmp_path / "s", audit_batch=2, audit_flush_seconds=3600)
    real_open = _audit.os.open

    def full_disk(*args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_audit.os, "open", full_disk)
    backend.record_tool_call(_record(1))
    try:
        backend.record_tool_call(_record(2))
    except StorageError as exc:
        assert "No space left on device" in str(exc)
    else:
        raise AssertionError("a failed audit write must raise")
    monkeypatch.setattr(_audit.os, "open", real_open)
    assert backend.stats()["tool_calls"] == 2
    backend.close()
    assert [orjson.loads(line)["args"]["text"] for line in _lines(tmp_path / "s")] == ["t1", "t2"]
