"""Two processes on one database: one creates and completes delegations while the other searches
and resumes them — nothing lost, no duplicate ids."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pg_two_processes import SCOPE

HERE = Path(__file__).parent
COUNT = 60


def test_a_writer_and_a_resuming_reader_lose_nothing(open_pg, pg_dsn: str, pg_schema: str) -> None:
    store = open_pg()
    root = store.create_conversation("shared by two processes", None, SCOPE)
    script = str(HERE / "pg_two_processes.py")
    args = [pg_dsn, pg_schema, root, str(COUNT)]
    reader = subprocess.Popen([sys.executable, script, "reader", *args], stdout=subprocess.PIPE, text=True)
    writer = subprocess.Popen([sys.executable, script, "writer", *args], stdout=subprocess.PIPE, text=True)
    written_out, _ = writer.communicate(timeout=180)
    read_out, _ = reader.communicate(timeout=180)
    assert writer.returncode == 0 and reader.returncode == 0

    written = [line.split()[1] for line in written_out.splitlines() if line.startswith("W ")]
    pairs = [line.split()[1:] for line in read_out.splitlines() if line.startswith("R ")]
    assert "MISSING" not in read_out
    assert len(written) == COUNT and len(pairs) == COUNT
    assert [found for found, _ in pairs] == written  # each found, in the order it was written
    every = written + [resumed for _, resumed in pairs]
    assert len(set(every)) == 2 * COUNT  # no duplicate ids

    stats = store.stats()
    assert stats["delegations"] == stats["completed_delegations"] == 2 * COUNT
    assert stats["conversations"] == 1 + 2 * COUNT
    listed = {d["delegation_id"] for d in store.list_delegations(limit=1000)}
    assert listed == set(every)
    for found, resumed in pairs[:: COUNT // 6]:
        earlier = store.load_delegation_with_messages(found)["messages"]
        assert store.load_delegation_with_messages(resumed)["messages"][: len(earlier)] == earlier
    assert store.latest_delegation_for_target("researcher", SCOPE) == pairs[-1][1]
