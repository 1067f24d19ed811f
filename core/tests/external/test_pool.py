"""The client pool against real processes: joined listings, admission, plans, binding, eviction, records."""

from __future__ import annotations

import itertools
import os

import anyio
import orjson
import psutil
import pytest
from entropic_mcp import CallContext
from entropic_mcp._external import (
    Binding,
    BindingChangedError,
    DiscoveryFailedError,
    ToolListIncompleteError,
)
from entropic_mcp._external import _pool as _pool_module
from external_helpers import async_wait_until

pytestmark = pytest.mark.anyio


async def stats(manager, conversation="default"):
    response = await manager.execute("f.stats", {}, CallContext(conversation_id=conversation))
    return orjson.loads(response.result)


def pool_of(manager):
    return manager.servers["f"].pool


async def run_on_pool(pool, coro):
    return await pool.loop.run(coro)


async def test_twenty_concurrent_listings_of_one_key_cost_one_tools_list(managers):
    manager = managers("--list-delay", "0.3", "--ttl-ms", "0")
    pool = pool_of(manager)
    assert manager.list_tools()
    before = (await stats(manager))["lists"]
    results = []

    async def listing():
        results.append(await run_on_pool(pool, pool.list(lambda: Binding("conv-1"))))

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(listing)
    assert (await stats(manager))["lists"] == before + 1
    assert len(results) == 20 and all(len(r) == len(results[0]) > 5 for r in results)
    hows = [r.how for r in pool.records if r.operation == "list" and r.outcome == "ok"][-20:]
    assert hows.count("wire") == 1 and hows.count("joined") == 19


async def test_a_current_list_is_served_without_a_client(managers):
    manager = managers("--ttl-ms", "60000")
    pool = pool_of(manager)
    assert manager.list_tools()
    before = (await stats(manager))["lists"]
    for conversation in ("a", "b", "c"):
        await run_on_pool(pool, pool.list(lambda c=conversation: Binding(c)))
    assert (await stats(manager))["lists"] == before
    record = pool.records[-2]  # the last listing (the stats call came after)
    assert (record.operation, record.how, record.client) == ("list", "cached", "not-needed")


async def test_private_lists_are_cached_per_conversation_only(managers):
    manager = managers("--ttl-ms", "60000", "--scope", "private")
    pool = pool_of(manager)
    assert manager.list_tools()
    before = (await stats(manager))["lists"]
    await run_on_pool(pool, pool.list(lambda: Binding("a")))
    await run_on_pool(pool, pool.list(lambda: Binding("a")))  # a's own entry: not-needed
    await run_on_pool(pool, pool.list(lambda: Binding("b")))  # never a's private list
    assert (await stats(manager))["lists"] == before + 2


async def test_max_operations_two_with_ten_concurrent_calls_never_more_than_two_in_flight(managers):
    manager = managers(max_operations=2)
    pool = pool_of(manager)
    assert manager.list_tools()

    async def call(i):
        response = await manager.execute("f.slow", {"seconds": 0.15}, CallContext(conversation_id=f"c{i}"))
        assert not response.is_error, response.result

    async with anyio.create_task_group() as group:
        for i in range(10):
            group.start_soon(call, i)
    assert (await stats(manager))["peak"] == 2
    assert pool.admission.peak == 2


async def test_admission_honours_the_callers_deadline(managers):
    manager = managers(max_operations=1)
    pool = pool_of(manager)
    assert manager.list_tools()
    async with anyio.create_task_group() as group:
        group.start_soon(manager.execute, "f.slow", {"seconds": 1.0})
        await async_wait_until(lambda: pool.admission.in_flight == 1)
        import time

        from entropic_mcp._external import BusyError

        with pytest.raises(BusyError, match="max_operations = 1"):
            await run_on_pool(pool, pool.call(Binding("x"), "echo", {"text": "x"}, time.monotonic() + 0.2))


async def test_a_cancelled_wait_for_a_slot_leaks_no_slot(managers):
    manager = managers(max_operations=1)
    pool = pool_of(manager)
    assert manager.list_tools()
    async with anyio.create_task_group() as group:
        group.start_soon(manager.execute, "f.slow", {"seconds": 0.8})
        await async_wait_until(lambda: pool.admission.in_flight == 1)
        with anyio.move_on_after(0.2) as scope:
            await manager.execute("f.echo", {"text": "waits"})  # cancelled while waiting for the slot
        assert scope.cancelled_caught
    assert pool.admission.in_flight == 0
    assert (await manager.execute("f.echo", {"text": "next"})).result == "next"
    assert any(r.outcome == "cancelled" for r in pool.records)


async def test_a_per_conversation_server_never_receives_another_conversations_call(managers):
    manager = managers(plan="per_conversation")
    assert "f.counter" in [tool["name"] for tool in manager.list_tools()]
    seen: dict[str, list[dict]] = {"a": [], "b": []}

    async def calls(conversation, n):
        for _ in range(n):
            response = await manager.execute("f.counter", {}, CallContext(conversation_id=conversation))
            seen[conversation].append(orjson.loads(response.result))

    async with anyio.create_task_group() as group:
        group.start_soon(calls, "a", 4)
        group.start_soon(calls, "b", 3)
    assert [r["count"] for r in seen["a"]] == [1, 2, 3, 4]
    assert [r["count"] for r in seen["b"]] == [1, 2, 3]
    pids_a, pids_b = {r["pid"] for r in seen["a"]}, {r["pid"] for r in seen["b"]}
    assert len(pids_a) == len(pids_b) == 1 and not pids_a & pids_b
    listing_pid = (await stats(manager, "c"))["pid"]
    assert listing_pid not in pids_a | pids_b


async def test_a_binding_that_moves_on_every_wait_is_refused_after_three_rounds(managers):
    manager = managers(plan="per_conversation")
    pool = pool_of(manager)
    assert manager.list_tools()
    counter = itertools.count()

    def moving():
        return Binding(f"moving-{next(counter)}")

    with pytest.raises(BindingChangedError, match="3 listings"):
        await run_on_pool(pool, pool.list(moving))
    moved = [r for r in pool.records if r.operation == "list" and r.outcome == "binding_moved"]
    assert len(moved) == 3


async def test_a_list_cut_off_mid_pagination_is_never_served_nor_cached(managers):
    manager = managers("--page-size", "4", "--drop-on-page", "2", connect_timeout_seconds=10)
    pool = pool_of(manager)
    assert manager.list_tools() == []  # the first listing dropped mid-way: nothing is served
    with pytest.raises(DiscoveryFailedError) as excinfo:
        await run_on_pool(pool, pool.list(lambda: Binding("a")))
    assert excinfo.value.code == "tools.discovery_failed"
    assert "could not be read to its end (page 2 failed" in pool.last_error
    assert any(r.outcome == "tool_list_incomplete" for r in pool.records)
    assert pool.snapshot()["cached_lists"] == 0


async def test_a_cursor_that_fails_raises_incomplete_and_is_not_cached(managers):
    manager = managers("--page-size", "4", "--fail-on-page", "3")
    pool = pool_of(manager)
    assert manager.list_tools() == []
    client = await run_on_pool(pool, pool._client_for(pool.home, None, force=True))
    with pytest.raises(ToolListIncompleteError, match="page 3 failed"):
        await run_on_pool(pool, client.list_tools(5))
    assert pool.snapshot()["cached_lists"] == 0


async def test_discovery_for_a_turn_reports_failures_not_tool_results(tmp_path):
    from entropic_mcp._external import discover_tools
    from external_helpers import build, external

    manager = build(
        tmp_path,
        {"f": external(), "broken": external("--page-size", "2", "--drop-on-page", "2", backoff_initial_seconds=5)},
    )
    try:
        found = await discover_tools(manager, CallContext(conversation_id="turn"))
        names = [tool["name"] for tool in found.tools]
        assert "f.echo" in names and not [n for n in names if n.startswith("broken.")]
        assert [(f.server, f.event) for f in found.failures] == [("broken", "tools.discovery_failed")]
    finally:
        manager.close()


async def test_an_evicted_idle_client_process_is_gone(managers):
    manager = managers(plan="per_conversation", idle_seconds=0.3)
    pool = pool_of(manager)
    assert manager.list_tools()
    pid = orjson.loads((await manager.execute("f.counter", {}, CallContext(conversation_id="idle"))).result)["pid"]
    assert psutil.pid_exists(pid)
    await async_wait_until(lambda: not _alive(pid), timeout=15)
    assert "idle" not in pool.clients
    assert any(r.operation == "evict" for r in pool.records)


async def test_a_client_in_use_is_never_evicted(managers):
    manager = managers(plan="per_conversation", idle_seconds=0.1, max_clients=1)
    assert manager.list_tools()
    async with anyio.create_task_group() as group:
        results = []

        async def slow():
            results.append(await manager.execute("f.slow", {"seconds": 1.0}, CallContext(conversation_id="busy")))

        group.start_soon(slow)
        await async_wait_until(lambda: pool_of(manager).admission.in_flight == 1)
        other = await manager.execute("f.counter", {}, CallContext(conversation_id="other"))  # over max_clients
        assert not other.is_error
    assert not results[0].is_error, results[0].result


async def test_lru_eviction_closes_the_least_recently_used_idle_client(managers):
    manager = managers(plan="per_conversation", max_clients=2)
    assert manager.list_tools()
    pids = {}
    for conversation in ("one", "two", "three"):
        response = await manager.execute("f.counter", {}, CallContext(conversation_id=conversation))
        pids[conversation] = orjson.loads(response.result)["pid"]
    await async_wait_until(lambda: not _alive(pids["one"]), timeout=15)
    assert _alive(pids["three"])


async def test_ending_a_conversation_closes_its_client(managers):
    manager = managers(plan="per_conversation")
    assert manager.list_tools()
    pid = orjson.loads((await manager.execute("f.counter", {}, CallContext(conversation_id="bye"))).result)["pid"]
    manager.end_conversation("bye")
    await async_wait_until(lambda: not _alive(pid), timeout=15)


async def test_every_use_is_recorded_with_a_hashed_key_never_the_conversation_id(managers):
    manager = managers(plan="per_conversation")
    pool = pool_of(manager)
    assert manager.list_tools()
    secret = "conversation-secret-1234"
    await manager.execute("f.echo", {"text": "x"}, CallContext(conversation_id=secret))
    await run_on_pool(pool, pool.list(lambda: Binding(secret)))
    records = [r.to_dict() for r in pool.records]
    assert {"connect", "list", "call"} <= {r["operation"] for r in records}
    assert all(secret not in str(value) for r in records for value in r.values())
    mine = {r["key"] for r in records if r["operation"] == "call"}
    assert len(mine) == 1 and all(len(k) == 16 for k in mine)
    assert {"plan", "how", "client", "wait_ms", "outcome"} <= set(records[0])


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_no_raw_ids_in_key_hash_across_pools():
    from entropic_mcp._config import ExternalServerConfig
    from entropic_mcp._external._pool import Pool

    config = ExternalServerConfig(name="x", transport="stdio", command="true")
    one = Pool(config, os.getcwd(), None, lambda _tools: None)  # type: ignore[arg-type]
    two = Pool(config, os.getcwd(), None, lambda _tools: None)  # type: ignore[arg-type]
    assert one.key_hash("c") != two.key_hash("c")  # salted per pool: not a dictionary lookup
    assert one.key_hash("c") == one.key_hash("c")


def test_reconnection_delays_grow_exponentially_with_jitter_up_to_the_ceiling(monkeypatch):
    import time as clock

    from entropic_mcp._external._pool import _Backoff

    now = clock.monotonic()
    monkeypatch.setattr(clock, "monotonic", lambda: now)
    delays = []
    for _ in range(200):
        backoff = _Backoff()
        delays.append([backoff.fail("x", 0.5, 4.0) for _ in range(6)])
    for attempt, base in enumerate([0.5, 1.0, 2.0, 4.0, 4.0, 4.0]):
        seen = [row[attempt] for row in delays]
        assert all(base / 2 <= d <= base for d in seen)  # never more than the base, never less than half
        assert len({round(d, 6) for d in seen}) > 100  # jittered: clients do not retry in lockstep


async def test_a_client_opened_and_not_yet_handed_out_outlives_idle_seconds_then_goes(managers, monkeypatch):
    # The window between an opening slower than idle_seconds and the opener's first use is a
    # loop hop wide; hold it open: open a client without handing it out, let the sweeper run.
    # The grace is an hour while the client must stay (an opening slow under load stays inside
    # it), then a moment, so the test waits on what the sweeper does, not on how long it took.
    monkeypatch.setattr(_pool_module, "ORPHAN_GRACE_SECONDS", 3600.0)
    manager = managers(plan="per_conversation", idle_seconds=0.1)
    pool = pool_of(manager)
    assert manager.list_tools()

    async def open_only():
        return await pool._open("orphan", "orphan")

    client = await run_on_pool(pool, open_only())
    await anyio.sleep(0.6)  # the sweeper runs every 0.05 s here; idle is 0.1 s
    assert pool.clients.get("orphan") is client
    # Its opener never came back for it: it goes idle_seconds + the grace later.
    monkeypatch.setattr(_pool_module, "ORPHAN_GRACE_SECONDS", 0.2)
    await async_wait_until(lambda: "orphan" not in pool.clients, timeout=15)
