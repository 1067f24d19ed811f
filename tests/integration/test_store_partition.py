"""A network partition between serve and its PostgreSQL store (issue 27): a tool that needs the
store fails at the deadline with what to do, tools that need none answer meanwhile, and the
store works again once the network does. The partition is a proxy that stops forwarding without
closing anything (``entropic_mcp_postgres.testing.PartitionProxy``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_workers import _status

from conftest import connect, start_http, stop, write_project

pytestmark = [pytest.mark.integration]

CONVERSATION_KEY = "entropic-mcp/conversation"
#: Far above the deadline (1 s): a call still unanswered then is a hang.
HANG = 60.0


def _project(root: Path, dsn: str, schema: str) -> Path:
    return write_project(
        root,
        f"""\
[entropic_mcp]
plugins = ["entropic", "postgres"]
[storage]
backend = "postgres"
options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)}, deadline = 1.0, connect_timeout = 1 }}
[permissions]
default = "allow"
""",
    )


def _text(result: Any) -> str:
    return str(result.content[0].text)


def test_a_partition_fails_store_calls_fast_and_spares_the_tools_that_need_no_store(tmp_path: Path) -> None:
    from entropic_mcp_postgres.testing import PartitionProxy, fresh_schema, test_dsn

    dsn = test_dsn()
    with fresh_schema(dsn, "part") as schema, PartitionProxy(dsn) as proxy:
        served = start_http(_project(tmp_path / "project", proxy.dsn, schema))
        meta = {CONVERSATION_KEY: "partition"}
        base = served.url.rsplit("/mcp", 1)[0]

        async def run() -> dict[str, Any]:
            seen: dict[str, Any] = {}
            async with connect(served.url, "2026-07-28") as peer:
                todo = {"action": "add", "content": "before"}
                seen["before"] = await peer.call("entropic_todo", todo, meta=meta)
                proxy.freeze()

                async def store_call() -> None:
                    seen["during"] = await peer.call("entropic_todo", {"action": "add", "content": "x"}, meta=meta)

                async def store_free() -> None:
                    seen["meanwhile"] = await peer.call("entropic_phase_change", {"phase": "review"}, meta=meta)

                with anyio.fail_after(HANG):
                    async with anyio.create_task_group() as group:
                        group.start_soon(store_call)
                        await anyio.sleep(0.2)  # the store call is waiting on the frozen network
                        group.start_soon(store_free)
                    # Known stalled now: a store call fails at once, a store-free one just works.
                    seen["stalled"] = await peer.call("entropic_todo", {"action": "add", "content": "y"}, meta=meta)
                    seen["after"] = await peer.call("entropic_inspect", {"target": "config"}, meta=meta)
                    seen["ready while stalled"] = await anyio.to_thread.run_sync(_status, base + "/readyz")
                proxy.thaw()
                with anyio.fail_after(HANG):
                    while True:
                        seen["healed"] = await peer.call("entropic_todo", {"action": "add", "content": "z"}, meta=meta)
                        if not seen["healed"].is_error:
                            break
                        await anyio.sleep(0.2)
                seen["ready after"] = await anyio.to_thread.run_sync(_status, base + "/readyz")
            return seen

        try:
            seen = anyio.run(run)
        finally:
            proxy.thaw()
            stop(served.process)
    assert not seen["before"].is_error
    # The guard state's read met the deadline first, or the todo list's own read did.
    assert seen["during"].is_error and "storage_unavailable" in _text(seen["during"])
    assert "within the 1 s deadline" in _text(seen["during"])
    assert not seen["meanwhile"].is_error, _text(seen["meanwhile"])
    assert seen["stalled"].is_error and "has not answered for" in _text(seen["stalled"])
    assert not seen["after"].is_error, _text(seen["after"])
    assert "before" in _text(seen["healed"])
    # The balancer is told: not ready while stalled, ready again once the store answers.
    assert (seen["ready while stalled"], seen["ready after"]) == (503, 200)
