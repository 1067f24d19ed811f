"""The postgres backend across processes: the reference host unchanged on it, and several
`entropic-mcp serve --transport http` workers sharing one store (the way past one machine).

Needs ``ENTROPIC_MCP_TEST_POSTGRES_DSN`` (see ``entropic_mcp_postgres.testing``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from conftest import connect, start_http, stop, wait_until, write_project

pytestmark = [pytest.mark.integration]

WORKERS = 2
CONVERSATIONS = 50
CONVERSATION_KEY = "entropic-mcp/conversation"


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[tuple[str, str]]:
    from entropic_mcp_postgres.testing import fresh_schema, test_dsn

    dsn = test_dsn()
    with fresh_schema(dsn, "it") as schema:
        yield dsn, schema


# -- the reference host ----------------------------------------------------------------------------


class Script:
    """A model that plays its turns in order."""

    def __init__(self, *turns: Any) -> None:
        self.turns = list(turns)
        self.seen: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        self.seen.append(messages)
        turn = self.turns.pop(0)
        return turn(messages) if callable(turn) else turn


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_the_reference_host_works_unchanged_on_postgres(tmp_path: Path, pg: tuple[str, str]) -> None:
    import entropic_mcp_entropic
    import entropic_mcp_postgres
    from entropic_mcp import CallContext, ServerManager, config_from_dict
    from entropic_mcp.host import Host
    from entropic_mcp.testing import fresh_plugins

    dsn, schema = pg
    config = config_from_dict(
        {
            "storage": {"backend": "postgres", "options": {"dsn": dsn, "schema": schema}},
            "permissions": {"default": "allow"},
            "servers": {"entropic": {"tiers": ["lead", "researcher"]}},
        },
        root=tmp_path,
    )
    manager = ServerManager(config, plugins=fresh_plugins(entropic_mcp_entropic, entropic_mcp_postgres))
    manager.build_servers()
    try:
        summary = "Retries back off exponentially; the settings are in config/retry.toml"
        first = Host(
            manager,
            {
                "lead": Script(
                    tool("entropic.delegate", target="researcher", task="find where retries are configured"),
                    tool("entropic.complete", summary="found it"),
                ),
                "researcher": Script(tool("entropic.complete", summary=summary)),
            },
        ).run_sync("sort out retries")
        assert first.status == "completed"
        [delegation] = first.delegations
        assert delegation.persisted and delegation.status == "completed"
        assert type(manager.storage.backend).__name__ == "PostgresBackend"  # behind CheckedStorage
        record = manager.storage.load_delegation_with_messages(delegation.delegation_id)
        assert record["summary"] == summary and record["messages"]

        # follow-up from the lead's own conversation finds it; resume by target continues it
        outcome = anyio.run(
            manager.call,
            "entropic.followup",
            {"query": "RETRY.toml exponentially"},
            CallContext(conversation_id=first.conversation_id),
        )
        found = orjson.loads(outcome.response.result)["results"]
        assert [r["delegation_id"] for r in found] == [delegation.delegation_id]
        researcher = Script(tool("entropic.complete", summary="jitter is 10%"))
        second = Host(
            manager,
            {
                "lead": Script(
                    tool("entropic.resume_delegation", target="researcher", task="now the jitter"),
                    tool("entropic.complete", summary="done"),
                ),
                "researcher": researcher,
            },
        ).run_sync("second")
        [resumed] = second.delegations
        assert resumed.resume_from == delegation.delegation_id and resumed.status == "completed"
        assert any(m.get("content") == "find where retries are configured" for m in researcher.seen[0])
        assert manager.storage.stats()["completed_delegations"] == 2
    finally:
        manager.close()


# -- several serve workers, one store --------------------------------------------------------------


def _project(root: Path, dsn: str, schema: str) -> Path:
    return write_project(
        root,
        f"""\
[entropic_mcp]
plugins = ["entropic", "postgres"]
[storage]
backend = "postgres"
options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)}, audit_flush_seconds = 0.2 }}
[permissions]
default = "allow"
[servers.entropic]
tiers = ["lead", "researcher"]
# These clients do not sample: the delegation tools answer with directives, as for a host that runs them.
without_sampling = "directives"
""",
    )


def test_http_workers_share_one_store_without_crossing_conversations(tmp_path: Path, pg: tuple[str, str]) -> None:
    from entropic_mcp_postgres import PostgresBackend

    dsn, schema = pg
    store = PostgresBackend(dsn, schema=schema)
    try:
        # Each conversation is a tenant's: its own scope, one completed delegation in it.
        conversations = []
        for i in range(CONVERSATIONS):
            root = store.create_conversation(f"conversation {i}", None, f"tenant-{i}")
            delegation_id, _ = store.create_delegation(root, "lead", "researcher", f"study topic {i}", 2, None)
            store.complete_delegation(delegation_id, "completed", f"finding {i}: the shared word is widget")
            conversations.append((i, root, delegation_id))

        servers = [start_http(_project(tmp_path / f"worker{n}", dsn, schema)) for n in range(WORKERS)]
        try:
            problems: list[str] = []

            async def conversation(i: int, root: str, delegation_id: str, limit: anyio.Semaphore) -> None:
                async with limit, connect(servers[i % WORKERS].url, "2026-07-28") as peer:
                    meta = {CONVERSATION_KEY: root}
                    for item in ("first", "second"):
                        await anyio.sleep(random.random() / 50)  # interleave the conversations
                        todo = await peer.call(
                            "entropic.todo", {"action": "add", "content": f"{item} of {i}"}, meta=meta
                        )
                        if todo.is_error:
                            problems.append(f"{i}: todo failed: {todo.content[0].text}")
                    text = todo.content[0].text
                    if f"first of {i}" not in text or f"second of {i}" not in text or text.count(" of ") != 2:
                        problems.append(f"{i}: todo list shows {text!r}")
                    found = await peer.call("entropic.followup", {"query": "widget", "max_results": 10}, meta=meta)
                    results = json.loads(found.content[0].text)["results"]
                    if [r["delegation_id"] for r in results] != [delegation_id]:
                        problems.append(f"{i}: followup found {results}")
                    resumed = await peer.call(
                        "entropic.resume_delegation", {"target": "researcher", "task": "go on"}, meta=meta
                    )
                    directives = (resumed.meta or {}).get("entropic-mcp/directives", [])
                    if resumed.is_error or [d.get("resume_from") for d in directives[:1]] != [delegation_id]:
                        problems.append(f"{i}: resume gave {resumed.content[0].text} {directives}")

            async def load() -> None:
                limit = anyio.Semaphore(10)
                async with anyio.create_task_group() as group:
                    for i, root, delegation_id in conversations:
                        group.start_soon(conversation, i, root, delegation_id, limit)

            anyio.run(load)
            assert problems == []

            # Nothing lost: every call of every conversation is in the one audit trail.
            expected = CONVERSATIONS * 4
            assert wait_until(lambda: store.stats()["tool_calls"] >= expected, timeout=30)
            assert store.stats()["tool_calls"] == expected
        finally:
            for served in servers:
                stop(served.process)
        import psycopg
        from psycopg import sql

        with psycopg.connect(dsn) as conn:
            rows = conn.execute(
                sql.SQL(
                    "SELECT record->>'conversation_id', count(*), count(DISTINCT record->>'tool') "
                    "FROM {}.tool_calls GROUP BY 1"
                ).format(sql.Identifier(schema))
            ).fetchall()
        assert sorted(rows) == sorted((root, 4, 3) for _, root, _ in conversations)
    finally:
        store.close()


def test_http_workers_keep_one_todo_list_per_conversation(tmp_path: Path, pg: tuple[str, str]) -> None:
    from entropic_mcp_postgres import PostgresBackend

    conversations, pairs = 8, 5
    servers = [start_http(_project(tmp_path / f"worker{n}", dsn=pg[0], schema=pg[1])) for n in range(WORKERS)]
    try:
        problems: list[str] = []

        async def conversation(i: int) -> None:
            meta = {CONVERSATION_KEY: f"todo-{i}"}
            async with connect(servers[0].url, "2026-07-28") as zero, connect(servers[1].url, "2026-07-28") as one:

                async def add(peer: Any, item: str) -> None:
                    await anyio.sleep(random.random() / 50)
                    added = await peer.call("entropic.todo", {"action": "add", "content": item}, meta=meta)
                    if added.is_error:
                        problems.append(f"{i}: adding {item} failed: {added.content[0].text}")

                # Each pair of adds reaches both workers at once: the two race for the one list.
                for k in range(pairs):
                    async with anyio.create_task_group() as group:
                        group.start_soon(add, zero, f"{i}.{2 * k} via 0")
                        group.start_soon(add, one, f"{i}.{2 * k + 1} via 1")
                shown = await zero.call("entropic.inspect", {"target": "state"}, meta=meta)
                todo = json.loads(shown.content[0].text)["state"]["todo"]
                expected = [f"{i}.{n} via {n % 2}" for n in range(2 * pairs)]
                if sorted(item["content"] for item in todo) != sorted(expected):
                    problems.append(f"{i}: worker 0 shows {todo}")
                cleared = await one.call("entropic.todo", {"action": "clear"}, meta=meta)
                if cleared.content[0].text != "The todo list is empty.":
                    problems.append(f"{i}: clear on worker 1 gave {cleared.content[0].text!r}")

        async def load() -> None:
            async with anyio.create_task_group() as group:
                for i in range(conversations):
                    group.start_soon(conversation, i)

        anyio.run(load)
        assert problems == []
    finally:
        for served in servers:
            stop(served.process)
    store = PostgresBackend(pg[0], schema=pg[1])
    try:
        # clear deleted every document: nothing is left under the namespace
        left = [store.load_state("entropic.todo", f"todo-{i}") for i in range(conversations)]
        assert left == [(None, 0)] * conversations
    finally:
        store.close()


def test_sigterm_flushes_the_audit_trail_before_the_worker_exits(tmp_path: Path, pg: tuple[str, str]) -> None:
    """What systemd, Docker and Kubernetes send: every call answered before it is in the audit
    trail afterwards (the buffer would otherwise have waited a minute to flush)."""
    import psycopg
    from psycopg import sql

    dsn, schema = pg
    root = _project(tmp_path / "worker", dsn, schema)
    config = (root / "entropic-mcp.toml").read_text().replace("audit_flush_seconds = 0.2", "audit_flush_seconds = 600")
    (root / "entropic-mcp.toml").write_text(config)
    served = start_http(root)
    try:

        async def calls() -> None:
            async with connect(served.url, "2026-07-28") as peer:
                for i in range(5):
                    meta = {CONVERSATION_KEY: "sigterm"}
                    done = await peer.call("entropic.todo", {"action": "add", "content": f"item {i}"}, meta=meta)
                    assert not done.is_error, done

        anyio.run(calls)
    finally:
        stop(served.process)  # SIGTERM to the worker's group
    assert served.process.returncode == 0, served.log.read_text(errors="replace")
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT count(*) FROM {} WHERE record->>'tool' = 'entropic.todo'").format(
            sql.Identifier(schema, "tool_calls")
        )
        assert conn.execute(query).fetchone()[0] == 5


def test_a_worker_whose_store_is_unreachable_is_alive_but_not_ready(tmp_path: Path, pg: tuple[str, str]) -> None:
    import urllib.error
    import urllib.request

    def probe(url: str, path: str) -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(url.removesuffix("/mcp") + path, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    dsn, schema = pg
    good = start_http(_project(tmp_path / "good", dsn, schema))
    # nothing listens on port 9: every connection is refused
    bad = start_http(_project(tmp_path / "bad", "postgresql://postgres@127.0.0.1:9/test", schema))
    try:
        assert probe(good.url, "/healthz") == (200, {"status": "alive"})
        assert probe(good.url, "/readyz") == (200, {"status": "ready"})
        assert probe(bad.url, "/healthz") == (200, {"status": "alive"})
        status, body = probe(bad.url, "/readyz")
        assert status == 503 and body["status"] == "not ready"
        assert any(p.startswith("the store") for p in body["problems"]), body
    finally:
        stop(good.process)
        stop(bad.process)
