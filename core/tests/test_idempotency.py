"""Idempotency keys (``_pipeline/_idempotency.py``): a retried call is applied once, on one
process and on two sharing a store (issue 27)."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import anyio.to_thread
import pytest
from entropic_mcp import AccessLevel, CallContext, MCPServerBase, ServerManager, ToolBase, ToolResult, config_from_dict
from entropic_mcp import ToolDefinition as TD
from entropic_mcp._pipeline import _idempotency
from entropic_mcp._pipeline._idempotency import NAMESPACE
from entropic_mcp.testing import MemoryStorage, fresh_plugins

ALLOW = {"permissions": {"default": "allow"}}


class Ledger(MCPServerBase):
    """``ledger.add`` appends to a list every manager of a test shares (the write under test)."""

    name = "ledger"

    def __init__(self, entries: list[str], *, gate: threading.Event | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.register_tool(_Add(entries, gate))
        self.register_tool(_Fail(entries))


class _Add(ToolBase):
    definition = TD(
        name="add",
        description="",
        input_schema={"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
    )
    required_access_level = AccessLevel.WRITE

    def __init__(self, entries: list[str], gate: threading.Event | None) -> None:
        self.entries = entries
        self.gate = gate

    def execute(self, args: dict[str, Any], ctx: CallContext) -> Any:
        if self.gate is not None:
            assert self.gate.wait(10)
        self.entries.append(args["item"])
        return ToolResult.json({"added": args["item"], "count": len(self.entries)})


class _Fail(ToolBase):
    definition = TD(name="fail", description="", input_schema={"type": "object"})
    required_access_level = AccessLevel.WRITE

    def __init__(self, entries: list[str]) -> None:
        self.entries = entries

    def execute(self, args: dict[str, Any], ctx: CallContext) -> Any:
        self.entries.append("fail")
        return ToolResult.error("broken", "it broke")


def workers(tmp_path: Any, n: int, entries: list[str], **options: Any) -> list[ServerManager]:
    """``n`` managers on one store, per-conversation state in it (as workers of a deployment)."""
    store = MemoryStorage()
    tmp_path.mkdir(exist_ok=True)
    gate = options.pop("gate", None)
    config = {**ALLOW, "storage": {"backend": "none", "conversation_state": "store"}, **options}
    return [
        ServerManager(
            config_from_dict(config, root=tmp_path),
            plugins=fresh_plugins(),
            servers=[Ledger(entries, gate=gate, root=tmp_path)],
            storage=store,
        )
        for _ in range(n)
    ]


def call(manager: ServerManager, name: str, args: dict[str, Any], key: str | None, conversation: str = "c") -> Any:
    return manager.call_sync(name, args, CallContext(conversation_id=conversation, idempotency_key=key))


def scenario(managers: list[ServerManager], entries: list[str]) -> list[Any]:
    """Round robin: retries of one add, a new key, the key reused for other arguments, a failure."""
    turn = iter(managers * 10)
    out = []
    for _ in range(3):
        outcome = call(next(turn), "ledger.add", {"item": "milk"}, "k1")
        out.append((outcome.kind, outcome.response.result))
    out.append(call(next(turn), "ledger.add", {"item": "milk"}, "k2").response.result)
    reused = call(next(turn), "ledger.add", {"item": "eggs"}, "k1")
    out.append((reused.kind, reused.response.code))
    for _ in range(2):
        failed = call(next(turn), "ledger.fail", {}, "k3")
        out.append((failed.kind, failed.response.code))
    other = call(next(turn), "ledger.add", {"item": "milk"}, "k1", conversation="other")
    out.append(other.response.result)
    out.append(list(entries))
    return out


def test_a_retry_with_the_key_is_applied_once_and_two_workers_answer_as_one(tmp_path: Any) -> None:
    alone_entries: list[str] = []
    alone = scenario(workers(tmp_path / "one", 1, alone_entries), alone_entries)
    assert alone[0] == alone[1] == alone[2] and alone[0][0] == "ok" and '"count":1' in alone[0][1].replace(" ", "")
    assert '"count":2' in alone[3].replace(" ", "")  # a new key: a new call
    assert alone[4] == ("error", "idempotency_key_reused")
    assert alone[5] == alone[6] == ("error", "broken")  # the tool's own failure is kept too: it ran once
    assert '"count":4' in alone[7].replace(" ", "")  # the same key in another conversation is another call
    assert alone[8] == ["milk", "milk", "fail", "milk"]
    pair_entries: list[str] = []
    assert scenario(workers(tmp_path / "two", 2, pair_entries), pair_entries) == alone


def test_without_a_key_every_call_runs(tmp_path: Any) -> None:
    entries: list[str] = []
    (manager,) = workers(tmp_path, 1, entries)
    call(manager, "ledger.add", {"item": "a"}, None)
    call(manager, "ledger.add", {"item": "a"}, None)
    assert entries == ["a", "a"]


def test_a_refusal_before_the_tool_ran_is_not_kept(tmp_path: Any) -> None:
    entries: list[str] = []
    (manager,) = workers(tmp_path, 1, entries)
    assert call(manager, "ledger.add", {}, "k").kind == "rejected_schema"
    assert call(manager, "ledger.add", {"item": "a"}, "k").kind == "ok"  # the key was never used up
    assert entries == ["a"]


@pytest.mark.parametrize("key", ["", " ", "x" * 257, 7])
def test_a_bad_key_is_refused_without_running(tmp_path: Any, key: Any) -> None:
    entries: list[str] = []
    (manager,) = workers(tmp_path, 1, entries)
    outcome = call(manager, "ledger.add", {"item": "a"}, key)
    assert outcome.response.code == "invalid_idempotency_key" and entries == []


def test_an_in_flight_duplicate_waits_for_the_first_and_gets_its_outcome(tmp_path: Any) -> None:
    entries: list[str] = []
    gate = threading.Event()
    first, second = workers(tmp_path, 2, entries, gate=gate)
    outcomes: list[Any] = [None, None]

    async def both() -> None:
        async def run(index: int, manager: ServerManager) -> None:
            ctx = CallContext(conversation_id="c", idempotency_key="k")
            outcomes[index] = await manager.call("ledger.add", {"item": "a"}, ctx)

        async with anyio.create_task_group() as group:
            group.start_soon(run, 0, first)
            await _until_claimed(first)
            group.start_soon(run, 1, second)
            await anyio.sleep(0.3)  # the retry is waiting, not running: the tool ran once so far
            assert outcomes[1] is None
            gate.set()

    anyio.run(both)
    assert entries == ["a"]
    assert outcomes[0].response.result == outcomes[1].response.result and outcomes[1].kind == "ok"


def test_an_in_flight_duplicate_past_the_wait_reports_the_first_running(tmp_path: Any) -> None:
    entries: list[str] = []
    gate = threading.Event()
    options = {"pipeline": {"idempotency_wait_seconds": 0.2}}
    first, second = workers(tmp_path, 2, entries, gate=gate, **options)
    late: list[Any] = []

    async def both() -> None:
        async def run_first() -> None:
            await first.call("ledger.add", {"item": "a"}, CallContext(conversation_id="c", idempotency_key="k"))

        async with anyio.create_task_group() as group:
            group.start_soon(run_first)
            await _until_claimed(first)
            late.append(
                await second.call("ledger.add", {"item": "a"}, CallContext(conversation_id="c", idempotency_key="k"))
            )
            gate.set()

    anyio.run(both)
    assert late[0].response.code == "idempotency_key_in_flight" and "still running" in late[0].response.result
    assert entries == ["a"]


def test_a_record_past_its_time_lets_the_key_run_again(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    entries: list[str] = []
    (manager,) = workers(tmp_path, 1, entries, pipeline={"idempotency_seconds": 60})
    call(manager, "ledger.add", {"item": "a"}, "k")
    later = time.time() + 61
    monkeypatch.setattr(_idempotency.time, "time", lambda: later)
    call(manager, "ledger.add", {"item": "a"}, "k")
    assert entries == ["a", "a"]


def test_an_unreachable_store_runs_nothing(tmp_path: Any) -> None:
    entries: list[str] = []
    (manager,) = workers(tmp_path, 1, entries)

    class Down:
        def load_state(self, namespace: str, key: str) -> Any:
            raise OSError("store unreachable")

    manager.idempotency._store = Down()
    outcome = call(manager, "ledger.add", {"item": "a"}, "k")
    assert outcome.response.code == "storage_unavailable" and entries == []


async def _until_claimed(manager: ServerManager) -> None:
    document = _idempotency._document(CallContext(conversation_id="c"), "k")
    for _ in range(500):
        record, _ = await anyio.to_thread.run_sync(manager.idempotency.store().load_state, NAMESPACE, document)
        if isinstance(record, dict) and record.get("state") == "running":
            return
        await anyio.sleep(0.01)
    raise AssertionError("the first call never claimed its key")
