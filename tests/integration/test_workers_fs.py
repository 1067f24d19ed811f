"""Stateless workers (issue 27), the filesystem part: read-before-write and changed-since-read
across two `entropic-mcp serve --transport http` workers on one PostgreSQL store behind haproxy
round robin (the recipe of docs/deployment.md), one project tree both workers serve.

Needs ``ENTROPIC_MCP_TEST_POSTGRES_DSN`` and ``haproxy`` on PATH (.ci/run installs it).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_workers import CONVERSATION_KEY, KIND, _text, fresh_store, haproxy

from conftest import connect, start_http, stop, write_project

pytestmark = [pytest.mark.integration]

PAIRS = 4


def _project(root: Path, dsn: str, schema: str, conversation_state: str) -> Path:
    project = write_project(
        root,
        f"""\
[entropic_mcp]
plugins = ["filesystem", "postgres"]
[storage]
backend = "postgres"
conversation_state = {json.dumps(conversation_state)}
options = {{ dsn = {json.dumps(dsn)}, schema = {json.dumps(schema)}, audit_flush_seconds = 0.2 }}
[permissions]
default = "allow"
""",
    )
    for n in range(PAIRS):
        (project / f"f{n}.txt").write_text("alpha beta\n")
    (project / "changed.txt").write_text("alpha beta\n")
    return project


async def _scenario(url: str, project: Path) -> list[tuple[str, str]]:
    """Read then edit, call after call (round robin puts each edit on the other worker than its
    read); then a read, a change from outside (same size, mtime put back), an edit."""
    meta = {CONVERSATION_KEY: f"fs-{uuid.uuid4().hex[:8]}"}
    answers: list[tuple[str, str]] = []
    async with connect(url, "2026-07-28") as peer:

        async def call(name: str, arguments: dict[str, Any]) -> None:
            result = await peer.call(f"filesystem_{name}", arguments, meta=meta)
            answers.append((result.meta[KIND], _text(result)))

        edit = {"old_string": "alpha", "new_string": "omega"}
        for n in range(PAIRS):
            await call("read_file", {"path": f"f{n}.txt"})
            await call("edit_file", {"path": f"f{n}.txt", **edit})
        await call("read_file", {"path": "changed.txt"})
        path = project / "changed.txt"
        st = path.stat()
        path.write_text("alpha BETA\n")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        await call("edit_file", {"path": "changed.txt", **edit})
    return answers


def _run(tmp_path: Path, workers: int, conversation_state: str) -> list[tuple[str, str]]:
    with fresh_store() as store:
        project = _project(tmp_path / f"{workers}-{conversation_state}", *store, conversation_state)
        served = [start_http(project) for _ in range(workers)]
        try:
            if workers == 1:
                return anyio.run(_scenario, served[0].url, project)
            with haproxy(tmp_path / f"{workers}-{conversation_state}", served) as url:
                return anyio.run(_scenario, url, project)
        finally:
            for worker in served:
                stop(worker.process)


def test_a_read_on_one_worker_lets_an_edit_on_the_other_through_and_a_change_is_refused(tmp_path: Path) -> None:
    alone = _run(tmp_path, 1, "auto")
    shared = _run(tmp_path, 2, "auto")
    edits = [kind for kind, _ in alone[1 : 2 * PAIRS : 2]]
    assert edits == ["ok"] * PAIRS, alone
    assert alone[-1][0] == "error" and "file_changed" in alone[-1][1], alone[-1]
    # Two workers behind round robin answer exactly as one does.
    assert [kind for kind, _ in shared] == [kind for kind, _ in alone], shared
    assert shared[-1][1] == alone[-1][1]


def test_with_the_tracker_in_each_workers_memory_round_robin_asks_for_a_fresh_read(tmp_path: Path) -> None:
    """The control: the calls of the scenario really cross workers (the memory tracker refuses)."""
    separate = _run(tmp_path, 2, "memory")
    refused = [text for kind, text in separate[1 : 2 * PAIRS : 2] if kind == "error"]
    assert refused and all("read_before_write" in text for text in refused), separate
