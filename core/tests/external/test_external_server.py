"""External servers through the pipeline: listing, access levels, results, directives, faults."""

from __future__ import annotations

import os

import orjson
import psutil
import pytest
from entropic_mcp import AccessLevel, CallContext
from external_helpers import async_wait_until, build, external, wait_until

pytestmark = pytest.mark.anyio


def result_json(response):
    return orjson.loads(response.result)


def test_tools_are_listed_with_the_server_prefix_and_access_from_trusted_hints(managers):
    manager = managers(trust_annotations=True)
    tools = {tool["name"]: tool for tool in manager.list_tools()}
    assert {"f.echo", "f.write", "f.crash", "f.directive"} <= set(tools)
    assert tools["f.echo"]["annotations"]["readOnlyHint"] is True
    assert tools["f.write"]["annotations"]["readOnlyHint"] is False
    assert tools["f.write"]["annotations"]["destructiveHint"] is True
    assert manager.access_level("f.echo") == AccessLevel.READ
    assert manager.access_level("f.write") == AccessLevel.WRITE
    assert manager.access_level("f.counter") == AccessLevel.WRITE  # no hint: the safe default


def test_an_untrusted_servers_hints_decide_nothing(managers):
    """MCP: annotations from an untrusted server are untrusted. ``wipe`` says it is read-only."""
    manager = managers()
    tools = {tool["name"]: tool for tool in manager.list_tools()}
    for name in ("echo", "wipe", "write"):
        assert manager.access_level(f"f.{name}") == AccessLevel.WRITE
        assert tools[f"f.{name}"]["annotations"]["readOnlyHint"] is False
        assert "destructiveHint" not in tools[f"f.{name}"]["annotations"]


def test_config_overrides_the_servers_hints(managers):
    manager = managers(access={"echo": "WRITE", "counter": "READ"}, read_only_tools=["write"])
    assert manager.access_level("f.echo") == AccessLevel.WRITE
    assert manager.access_level("f.counter") == AccessLevel.READ
    assert manager.access_level("f.write") == AccessLevel.READ
    listed = {tool["name"]: tool for tool in manager.list_tools()}
    assert listed["f.echo"]["annotations"]["readOnlyHint"] is False
    assert listed["f.write"]["annotations"]["readOnlyHint"] is True


def test_a_tool_whose_name_cannot_be_prefixed_is_skipped_not_fatal(managers):
    manager = managers("--bad-tool")
    names = [tool["name"] for tool in manager.list_tools()]
    assert "f.echo" in names and not any("bad" in name for name in names)
    assert "bad.name" in manager.servers["f"].skipped


async def test_text_becomes_result_and_is_error_is_kept(managers):
    manager = managers()
    ok = await manager.execute("f.echo", {"text": "héllo"})
    assert ok.to_dict() == {"result": "héllo", "directives": [], "is_error": False}
    failed = await manager.execute("f.nonexistent_on_server", {})
    assert failed.is_error  # unknown to us: never reaches the server
    wrong = await manager.servers["f"].pool.loop.run(
        manager.servers["f"].pool.call(_binding("c"), "no_such_tool", {}, None)
    )
    assert wrong["isError"] is True  # the server's own isError result (the pool passes its JSON on)


def _binding(conversation):
    from entropic_mcp._external import Binding

    return Binding(conversation)


async def test_directives_from_an_external_server_are_always_stripped(managers):
    manager = managers()
    outcome = await manager.call("f.directive", {})
    response = outcome.response
    assert response.directives == ()
    assert response.to_dict()["directives"] == []
    # The text stays data: the model may read it, the host never acts on it.
    assert "delegate" in response.result
    # Through a batch as well (stop/complete detection reads directives).
    batch = await manager.execute_batch([("f.directive", {}), ("f.echo", {"text": "next"})])
    assert [o.response.directives for o in batch.outcomes] == [(), ()]
    assert batch.stopped is None


async def test_arguments_go_through_the_pipeline_schema_and_permissions(tmp_path):
    manager = build(
        tmp_path,
        {"f": external(trust_annotations=True)},
        permissions={"default": "allow", "deny": ["f.write"]},
        identities={"reader": {"keys": {"f.*": "READ"}}},
    )
    try:
        denied = await manager.call("f.write", {"path": "x"})
        assert denied.kind == "rejected_permission"
        refused = await manager.call("f.echo", {"text": 5, "extra": []}, CallContext(identity="reader"))
        assert refused.kind in ("ok", "rejected_schema")  # the server's schema allows extra keys
        keyed = await manager.call("f.counter", {}, CallContext(identity="reader"))
        assert keyed.kind == "rejected_access"  # counter has no readOnlyHint → WRITE
    finally:
        manager.close()


async def test_a_crash_is_a_tool_error_naming_the_server_then_tools_withdraw_and_return(managers):
    manager = managers(withdraw_after_seconds=0)
    server = manager.servers["f"]
    changes = []
    server.add_listener(lambda: changes.append(len(server.tools)))
    crashed = await manager.call("f.crash", {})
    assert crashed.response.is_error
    body = result_json(crashed.response)
    assert body["error"] == "server_failed" and "'f'" in body["message"]
    assert crashed.response.directives == ()
    await async_wait_until(lambda: server.pool.state == "connected" and changes and changes[-1] > 0)
    assert 0 in changes  # withdrawn (with a change notification), then restored
    assert "f.echo" in [tool["name"] for tool in manager.list_tools()]
    assert (await manager.execute("f.echo", {"text": "back"})).result == "back"


async def test_calls_while_down_answer_disconnected_and_the_tools_stay_listed(managers):
    manager = managers(backoff_initial_seconds=5, backoff_max_seconds=5)
    server = manager.servers["f"]
    assert server.tools  # started: the first listing is no change
    changes: list[int] = []
    server.add_listener(lambda: changes.append(len(server.tools)))
    await manager.execute("f.crash", {})
    down = await manager.execute("f.echo", {"text": "x"})
    body = result_json(down)
    assert body["error"] == "server_disconnected"
    assert "server 'f' is disconnected" in body["message"] and "next attempt in" in body["message"]
    assert body["retry_in_seconds"] > 0
    # Within the grace period (60 s by default) the listing does not change under the model.
    assert "f.echo" in [tool["name"] for tool in manager.list_tools()] and changes == []


async def test_tools_are_withdrawn_once_the_grace_period_ends_while_still_down(managers):
    manager = managers(backoff_initial_seconds=30, backoff_max_seconds=30, withdraw_after_seconds=0.2)
    server = manager.servers["f"]
    assert server.tools
    changes: list[int] = []
    server.add_listener(lambda: changes.append(len(server.tools)))
    await manager.execute("f.crash", {})
    await async_wait_until(lambda: changes == [0])
    assert manager.list_tools() == []
    body = result_json(await manager.execute("f.echo", {"text": "x"}))
    assert body["error"] == "server_disconnected"  # called by name anyway: still a tool error


async def test_withdrawal_zero_withdraws_at_once(managers):
    manager = managers(backoff_initial_seconds=5, backoff_max_seconds=5, withdraw_after_seconds=0)
    await manager.execute("f.crash", {})
    assert manager.list_tools() == []


async def test_a_server_back_within_the_grace_period_changes_nothing(managers):
    manager = managers(withdraw_after_seconds=30)
    server = manager.servers["f"]
    assert server.tools
    changes: list[int] = []
    server.add_listener(lambda: changes.append(len(server.tools)))
    await manager.execute("f.crash", {})
    await async_wait_until(lambda: server.pool.state == "connected")
    assert changes == [] and server._withdrawal is None
    assert (await manager.execute("f.echo", {"text": "back"})).result == "back"


async def test_a_hang_times_out_disconnects_and_the_process_is_gone(managers):
    manager = managers(call_timeout_seconds=0.5)
    server = manager.servers["f"]
    before = _fault_pids()
    outcome = await manager.call("f.hang", {})
    assert outcome.response.is_error
    body = result_json(outcome.response)
    assert body["error"] == "server_failed" and "did not answer within 0.5 s" in body["message"]
    await async_wait_until(lambda: server.pool.state == "connected")
    await async_wait_until(lambda: len(_fault_pids() - before) <= 1)  # the hung one was stopped


async def test_garbage_on_the_wire_fails_the_call_at_once_and_the_process_is_stopped(managers):
    before = _fault_pids()
    manager = managers(call_timeout_seconds=30, backoff_initial_seconds=30, backoff_max_seconds=30)
    assert manager.list_tools()
    (garbled,) = _fault_pids() - before
    outcome = await manager.call("f.garbage", {})
    body = result_json(outcome.response)
    assert body["error"] == "server_failed"
    assert "not JSON-RPC" in body["message"]
    assert outcome.elapsed_ms < 30_000
    await async_wait_until(lambda: garbled not in _fault_pids())  # it never exits on its own


def test_a_slow_starting_server_is_waited_for(managers):
    manager = managers("--start-delay", "1.5")
    assert "f.echo" in [tool["name"] for tool in manager.list_tools()]


def test_a_server_that_cannot_start_reports_discovery_failure_and_lists_nothing(tmp_path, caplog):
    manager = build(tmp_path, {"bad": {"command": str(tmp_path / "no-such-program"), "backoff_initial_seconds": 5}})
    try:
        assert manager.list_tools() == []
        assert manager.servers["bad"].pool.state == "disconnected"
        assert "tools.discovery_failed" in caplog.text
    finally:
        manager.close()


def test_a_paginated_list_is_read_to_its_end(managers):
    manager = managers("--page-size", "3", "--extra-tools", "20")
    names = [tool["name"] for tool in manager.list_tools()]
    assert len([n for n in names if n.startswith("f.filler_")]) == 20
    assert len(names) == len(set(names))


async def test_list_changed_invalidates_and_the_new_tool_appears(managers):
    manager = managers()
    assert "f.extra" not in [tool["name"] for tool in manager.list_tools()]
    await manager.execute("f.change", {})
    await async_wait_until(lambda: "f.extra" in [tool["name"] for tool in manager.list_tools()])
    assert (await manager.execute("f.extra", {})).result == "extra"


async def test_the_child_gets_config_env_and_never_entropic_mcp_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("ENTROPIC_MCP_TOKEN", "s3cret-token-value-000")
    monkeypatch.setenv("UNRELATED_PARENT_VARIABLE", "x")
    manager = build(tmp_path, {"f": external(env={"FOO": "bar"})})
    try:
        env = result_json(await manager.execute("f.env", {}))
        assert env["FOO"] == "bar"
        assert not [k for k in env if k.upper().startswith(("ENTROPIC_MCP_", "LD_", "DYLD_"))]
        assert "UNRELATED_PARENT_VARIABLE" not in env
    finally:
        manager.close()


def test_close_leaves_no_process(managers):
    before = _fault_pids()
    manager = managers()
    assert manager.list_tools()
    assert _fault_pids() - before
    manager.close()
    wait_until(lambda: not (_fault_pids() - before))


def _fault_pids() -> set[int]:
    me = psutil.Process(os.getpid())
    pids = set()
    for child in me.children(recursive=True):
        try:
            if any("fault_server.py" in part for part in child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                pids.add(child.pid)
        except psutil.Error:
            continue
    return pids


async def test_a_host_loop_is_adopted_and_calls_need_no_hop(managers):
    import asyncio

    from entropic_mcp._external import close_external_servers, start_external_servers
    from entropic_mcp._external._loop import LocalLoop

    before = _fault_pids()
    manager = managers()
    assert manager.list_tools()  # started on the background loop first (what a build-time check does)
    await start_external_servers(manager)
    pool = manager.servers["f"].pool
    assert isinstance(pool.loop, LocalLoop) and pool.loop.loop is asyncio.get_running_loop()
    assert (await manager.execute("f.echo", {"text": "here"})).result == "here"
    await async_wait_until(lambda: len(_fault_pids() - before) == 1)  # the background one was closed
    await close_external_servers(manager)
    await async_wait_until(lambda: not (_fault_pids() - before))


def test_a_server_imported_from_mcp_json_runs(tmp_path):
    import json
    import sys

    from entropic_mcp import ServerManager
    from entropic_mcp._config import load_config
    from external_helpers import FAULT_SERVER

    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"imported": {"command": sys.executable, "args": [str(FAULT_SERVER)]}}}),
        encoding="utf-8",
    )
    from entropic_mcp._userdata import approve

    approve(tmp_path / ".mcp.json", (tmp_path / ".mcp.json").read_bytes())
    (tmp_path / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = []\nimport_mcp_json = true\n[storage]\nbackend = "none"\n', encoding="utf-8"
    )
    manager = ServerManager.from_config(load_config(cwd=tmp_path), load_entry_points=False)
    try:
        assert "imported.echo" in [tool["name"] for tool in manager.list_tools()]
        assert manager.providers["imported"] == "builtin-external"
    finally:
        manager.close()


async def test_structured_content_over_the_cap_is_an_error_that_says_so(tmp_path):
    """A cut JSON object is no structured content: the official client raises on a success
    without it when the tool declares an outputSchema."""
    manager = build(tmp_path, {"f": external()}, pipeline={"max_result_bytes": 4096})
    try:
        small = await manager.call("f.big", {"size": 10})
        big = await manager.call("f.big", {"size": 100_000})
    finally:
        manager.close()
    assert small.response.structured == {"data": "x" * 10} and not small.response.is_error
    assert big.response.is_error and big.response.structured is None
    body = result_json(big.response)
    assert body["error"] == "result_too_large" and "max_result_bytes = 4096" in body["message"]


def test_a_long_text_beside_structured_content_that_fits_becomes_that_content():
    from entropic_mcp import ServerResponse
    from entropic_mcp._external._server import bounded

    response = ServerResponse._make("y" * 10_000, (), False, {"data": "short"})
    kept = bounded(response, "f", "t", 4096)
    assert (kept.result, kept.structured) == ('{"data":"short"}', {"data": "short"})
    assert bounded(response, "f", "t", 0) is response


def test_a_plugin_server_keeps_its_name_and_only_the_clashing_external_entry_is_left_out(tmp_path, caplog):
    import logging

    from entropic_mcp import MCPServerBase, Plugins, ServerManager, config_from_dict, hookimpl

    class Owner:
        @hookimpl
        def entropic_mcp_servers(self, config):
            return MCPServerBase("f", root=config.root)

    data = {
        "entropic_mcp": {"plugins": ["f"]},
        "storage": {"backend": "none"},
        "external": {"f": external(), "g": external()},
    }
    plugins = Plugins(strict=True)  # the clash fails no plugin, so strict mode has nothing to stop
    plugins.register(Owner(), "f")
    with caplog.at_level(logging.ERROR):
        manager = ServerManager.from_config(config_from_dict(data, root=tmp_path), plugins=plugins)
    try:
        assert manager.providers["f"] == "f" and manager.providers["g"] == "builtin-external"
        assert "[external.f] in <dict> is not started: the server name 'f' is taken by plugin 'f'" in caplog.text
        assert manager.plugins.infos["builtin-external"].status != "failed"
    finally:
        manager.close()
