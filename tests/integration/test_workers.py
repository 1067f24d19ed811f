"""Stateless workers (issue 27): two `entropic-mcp serve --transport http` workers on one
PostgreSQL store behind a real haproxy in round robin, no affinity (docs/deployment.md), driven by
official-SDK 2026-07-28 clients; the same scenario against one worker gives the same answers.

Needs ``ENTROPIC_MCP_TEST_POSTGRES_DSN`` and ``haproxy`` on PATH (.ci/run installs it).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import HTTPServe, connect, start_http, stop, wait_until, write_project

pytestmark = [pytest.mark.integration]

CONVERSATION_KEY = "entropic-mcp/conversation"
KIND = "entropic-mcp/kind"


def _haproxy() -> str:
    found = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if Path(p).exists()), None)
    if found is None:
        import os

        if os.environ.get("CI") == "true":
            pytest.fail("haproxy is not installed (.ci/run installs Debian's package)")
        pytest.skip("haproxy is not installed (apt-get install haproxy)")
    return found


@contextmanager
def fresh_store() -> Iterator[tuple[str, str]]:
    from entropic_mcp_postgres.testing import fresh_schema, test_dsn

    dsn = test_dsn()
    with fresh_schema(dsn, "wk") as schema:
        yield dsn, schema


def _project(root: Path, dsn: str, schema: str) -> Path:
    return write_project(
        root,
        f"""\
[entropic_mcp]
plugins = ["probe", "entropic", "postgres"]
[storage]
backend = "postgres"
options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)}, audit_flush_seconds = 0.2 }}
[permissions]
default = "ask"
allow = ["probe.echo", "probe.info", "probe.fail", "probe.note(spin*)", "entropic.*"]
deny = ["probe.note(secret*)"]
[servers.entropic]
tiers = ["lead", "researcher"]
without_sampling = "directives"
""",
    )


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def haproxy(tmp_path: Path, workers: list[HTTPServe]) -> Iterator[str]:
    """The recipe of docs/deployment.md: round robin, no affinity, /readyz checks."""
    from entropic_mcp_postgres.testing import haproxy_recipe

    port = _free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_recipe(port, [_port(w.url) for w in workers], log=True), encoding="utf-8")
    log = (tmp_path / "haproxy.log").open("wb")
    process = subprocess.Popen([_haproxy(), "-db", "-f", str(config)], stdout=log, stderr=log)
    try:

        def up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return True
            except OSError:
                return False

        assert wait_until(up, timeout=15), (tmp_path / "haproxy.log").read_text()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        log.close()


@contextmanager
def deployment(
    tmp_path: Path, workers: int, project: Callable[[Path, str, str], Path] | None = None
) -> Iterator[tuple[str, list[HTTPServe], tuple[str, str]]]:
    """``workers`` serve processes of ``project`` (this module's by default), each with a project
    directory of its own, on one fresh store: (haproxy's URL in front of them or the one worker's,
    the workers, the store)."""
    project = project or _project
    with fresh_store() as store:
        served = [start_http(project(tmp_path / f"worker{n}", *store)) for n in range(workers)]
        try:
            if workers == 1:
                yield served[0].url, served, store
            else:
                with haproxy(tmp_path, served) as url:
                    yield url, served, store
        finally:
            for worker in served:
                stop(worker.process)


def _text(result: Any) -> str:
    return result.content[0].text


async def scenario(url: str) -> dict[str, Any]:
    """The calls of one conversation, with what a client sees of each answer."""
    from mcp_types import ElicitResult

    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message.split("\n", 1)[0])
        decision = "always_allow" if "always" in params.message else "allow_once"
        return ElicitResult(action="accept", content={"decision": decision})

    answers: list[tuple[str, str, str]] = []
    pids: set[int] = set()
    meta = {CONVERSATION_KEY: f"scenario-{uuid.uuid4().hex[:8]}"}
    async with connect(url, "2026-07-28", elicitation=elicit) as peer:

        async def call(label: str, name: str, arguments: dict[str, Any] | None = None) -> None:
            result = await peer.call(name, arguments or {}, meta=meta)
            answers.append((label, result.meta[KIND], _text(result)))

        for item in ("first", "second", "third"):
            await call("todo", "entropic_todo", {"action": "add", "content": item})
        for _ in range(3):  # the second identical answer is flagged, the third says STOP
            await call("duplicate", "probe_echo", {"text": "same"})
        for _ in range(4):  # refused before the third run
            await call("identical failure", "probe_fail")
        for i in range(52):  # the 51st WRITE of one tool in a row is refused
            await call("spiral", "probe_note", {"text": f"spin {i}"})
        await call("break the run", "probe_echo", {"text": "something else"})
        await call("approval", "probe_note", {"text": "approved once"})
        for _ in range(3):  # asked once, then honoured on whichever worker gets the call
            await call("always allow", "probe_note", {"text": "always this"})
        for _ in range(6):
            info = await peer.call("probe_info", meta=meta)
            pids.add(info.structured_content["pid"])
    return {"answers": answers, "asked": asked, "pids": pids}


def test_two_workers_behind_round_robin_answer_as_one_worker(tmp_path: Path) -> None:
    with deployment(tmp_path / "one", 1) as (url, _, _):
        alone = anyio.run(scenario, url)
    with deployment(tmp_path / "two", 2) as (url, workers, _):
        shared = anyio.run(scenario, url)
    # Round robin really spread the calls; the answers are the same, call for call.
    assert len(alone["pids"]) == 1 and len(shared["pids"]) == 2
    assert shared["answers"] == alone["answers"]
    assert shared["asked"] == alone["asked"]

    answers = alone["answers"]
    kinds = [kind for label, kind, _ in answers]
    assert "third" in answers[2][2] and "first" in answers[2][2]
    duplicates = [text for label, _, text in answers if label == "duplicate"]
    assert not duplicates[0].startswith("[duplicate_call]") and duplicates[1].startswith("[duplicate_call]")
    assert "STOP" in duplicates[2]
    failures = [kind for label, kind, _ in answers if label == "identical failure"]
    assert failures == ["error", "error", "rejected_loop", "rejected_loop"]
    spiral = [kind for label, kind, _ in answers if label == "spiral"]
    assert spiral.index("rejected_loop") == 50 and spiral.count("rejected_loop") == 2
    assert [kind for label, kind, _ in answers if label in ("approval", "always allow")] == ["ok"] * 4
    # One question for the approval, one for "always": the other worker did not ask again.
    assert [q.split(" (")[0] for q in alone["asked"]] == ["Allow the tool call probe.note"] * 2
    assert kinds.count("rejected_permission") == 0


def test_an_approval_paused_on_one_worker_is_answered_on_the_other(tmp_path: Path) -> None:
    """Each retry carrying an answer reaches the other worker (round robin, two workers)."""
    from mcp_types import ElicitResult

    with deployment(tmp_path, 2) as (url, _, (dsn, schema)):
        asked: list[str] = []

        async def elicit(context: Any, params: Any) -> ElicitResult:
            asked.append(params.message)
            return ElicitResult(action="accept", content={"decision": "allow_once"})

        async def run() -> list[Any]:
            results = []
            async with connect(url, "2026-07-28", elicitation=elicit) as peer:
                for i in range(5):
                    results.append(
                        await peer.call("probe_note", {"text": f"ask {i}"}, meta={CONVERSATION_KEY: f"ap-{i}"})
                    )
            return results

        results = anyio.run(run)
        assert [(r.meta[KIND], _text(r)) for r in results] == [("ok", f"noted: ask {i}") for i in range(5)]
        assert len(asked) == 5
        # Every paused call was taken from the store by the worker that answered it.
        import psycopg
        from psycopg import sql

        with psycopg.connect(dsn) as conn:
            left = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.states WHERE namespace = 'serve.paused'").format(
                    sql.Identifier(schema)
                )
            ).fetchone()
        assert left == (0,)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_a_worker_whose_store_is_unreachable_is_not_ready(tmp_path: Path) -> None:
    with fresh_store() as (dsn, schema):
        good = start_http(_project(tmp_path / "good", dsn, schema))
        dead = f"postgresql://postgres@127.0.0.1:{_free_port()}/test?connect_timeout=1"
        bad = start_http(_project(tmp_path / "bad", dead, schema))
        try:
            base = {name: w.url.rsplit("/mcp", 1)[0] for name, w in (("good", good), ("bad", bad))}
            assert _status(base["bad"] + "/healthz") == 200  # alive ...
            assert _status(base["bad"] + "/readyz") == 503  # ... but not to be sent traffic
            assert _status(base["good"] + "/readyz") == 200
            with haproxy(tmp_path, [good, bad]) as url:
                # Once haproxy's checks have taken the bad worker out, every todo call succeeds.
                async def todo_works() -> bool:
                    async with connect(url, "2026-07-28") as peer:
                        for i in range(6):
                            result = await peer.call(
                                "entropic_todo", {"action": "add", "content": f"r{i}"}, meta={CONVERSATION_KEY: "rz"}
                            )
                            if result.is_error:
                                return False
                    return True

                assert wait_until(lambda: anyio.run(todo_works), timeout=30)
        finally:
            stop(good.process)
            stop(bad.process)


def test_sigterm_of_a_worker_under_load_loses_no_call(tmp_path: Path) -> None:
    from entropic_mcp_postgres import PostgresBackend

    clients, calls = 6, 40
    with deployment(tmp_path, 2) as (url, workers, (dsn, schema)):
        done: list[int] = []
        failures: list[str] = []

        async def client(n: int) -> None:
            async with connect(url, "2026-07-28") as peer:
                for i in range(calls):
                    result = await peer.call("probe_echo", {"text": f"{n}-{i}"}, meta={CONVERSATION_KEY: f"load-{n}"})
                    if result.is_error or _text(result) != f"{n}-{i}":
                        failures.append(f"{n}-{i}: {_text(result)}")
                    done.append(1)

        async def load() -> None:
            async with anyio.create_task_group() as group:
                for n in range(clients):
                    group.start_soon(client, n)
                while len(done) < clients * calls // 4:
                    await anyio.sleep(0.01)
                workers[0].process.terminate()  # SIGTERM, as systemd, Docker and Kubernetes send

        anyio.run(load)
        assert failures == [] and len(done) == clients * calls
        assert workers[0].process.wait(30) == 0
        assert "stopped (SIGTERM)" in workers[0].log.read_text(errors="replace")
        stop(workers[1].process)
        store = PostgresBackend(dsn, schema=schema)
        try:
            # The audit is complete: every answered call, from both workers, is recorded once.
            assert store.stats()["tool_calls"] == clients * calls
        finally:
            store.close()


def _bash_project(root: Path, dsn: str, schema: str) -> Path:
    project = write_project(
        root,
        f"""\
[entropic_mcp]
plugins = ["bash", "postgres"]
[storage]
backend = "postgres"
options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)}, audit_flush_seconds = 0.2 }}
[permissions]
default = "allow"
""",
    )
    (project / "sub").mkdir()
    return project


async def _cwd_scenario(url: str, roots: list[Path]) -> tuple[list[str], set[Path]]:
    """cd on one call, pwd on the next ones: wherever they land, they run in the same directory.
    Also: the roots (workers) whose directory the commands printed."""
    texts, seen = [], set()
    meta = {CONVERSATION_KEY: f"cwd-{uuid.uuid4().hex[:8]}"}
    async with connect(url, "2026-07-28") as peer:
        for command in ("cd sub", "pwd", "pwd", "pwd", "cd ..", "pwd"):
            result = await peer.call("bash_execute", {"command": command}, meta=meta)
            text = _text(result)
            for root in roots:
                if str(root.resolve()) in text:
                    seen.add(root)
                text = text.replace(str(root.resolve()), "<root>")
            texts.append(re.sub(r"\b\d+ (ms|s)\b", "<time>", text))  # the footer's run time
    return texts, seen


def test_bash_keeps_the_conversations_directory_across_workers(tmp_path: Path) -> None:
    """bash's working directory through the store (bash.cwd, issue 27's bash part)."""
    results = []
    for workers in (1, 2):
        with fresh_store() as store:
            roots = [_bash_project(tmp_path / f"{workers}" / f"worker{n}", *store) for n in range(workers)]
            served = [start_http(root) for root in roots]
            try:
                if workers == 1:
                    results.append(anyio.run(_cwd_scenario, served[0].url, roots))
                else:
                    with haproxy(tmp_path / "2", served) as url:
                        results.append(anyio.run(_cwd_scenario, url, roots))
            finally:
                for worker in served:
                    stop(worker.process)
    (alone, _), (shared, seen) = results
    assert len(seen) == 2  # the pwd calls ran on both workers
    assert shared == alone
    assert [text.splitlines()[0] for text in alone[1:4]] == ["<root>/sub"] * 3
    assert alone[5].splitlines()[0] == "<root>"
