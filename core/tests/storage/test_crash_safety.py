"""kill -9 at random moments, and two writers at once: nothing that returned is ever lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from entropic_mcp._storage._tinydb import TinyDBBackend

WRITER = Path(__file__).with_name("_writer.py")


def _start(store: Path, root: str, prefix: str, count: int, compact_bytes: int = 8 << 20) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(store), root, prefix, str(count), str(compact_bytes)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _acks(lines: list[str]) -> dict[str, list[list[str]]]:
    acks: dict[str, list[list[str]]] = {"D": [], "M": [], "C": [], "T": []}
    for line in lines:
        kind, *rest = line.split()
        acks[kind].append(rest)
    return acks


def _check_holds(store: Path, acks: dict[str, list[list[str]]]) -> TinyDBBackend:
    backend = TinyDBBackend(store)
    for delegation_id, child in acks["D"]:
        record = backend.load_delegation_with_messages(delegation_id)
        assert record["child_conversation_id"] == child
    for child, n in acks["M"]:
        assert len(backend.load_conversation(child)["messages"]) == int(n)
    for (delegation_id,) in acks["C"]:
        assert backend.load_delegation_with_messages(delegation_id)["status"] == "completed"
    return backend


def _kill_at_random_moments(tmp_path: Path, iterations: int, seed: int) -> None:
    rng = random.Random(seed)
    store = tmp_path / "store"
    setup = TinyDBBackend(store)
    root = setup.create_conversation("crash root")
    setup.close()
    acked: dict[str, list[list[str]]] = {"D": [], "M": [], "C": [], "T": []}
    for iteration in range(iterations):
        writer = _start(store, root, f"it{iteration}", 40, compact_bytes=rng.choice([4_000, 60_000, 8 << 20]))
        assert writer.stdout is not None
        seen: list[str] = []
        # The kill lands wherever the writer happens to be after its k-th acknowledgement: inside
        # an append, an fsync, a compaction or between operations.
        for _ in range(rng.randrange(0, 60)):
            line = writer.stdout.readline()
            if not line:
                break
            seen.append(line)
        os.kill(writer.pid, signal.SIGKILL)
        rest, _ = writer.communicate(timeout=60)
        seen.extend(rest.splitlines())
        for kind, values in _acks(seen).items():
            acked[kind].extend(values)
        backend = _check_holds(store, acked)
        assert backend.stats()["completed_delegations"] >= len(acked["C"])
        backend.close()
    assert acked["C"], "no writer ever got as far as completing a delegation"


def test_kill_9_at_random_moments_loses_nothing_that_returned(tmp_path: Path) -> None:
    _kill_at_random_moments(tmp_path, iterations=10, seed=1)


@pytest.mark.slow
def test_kill_9_at_random_moments_a_hundred_times(tmp_path: Path) -> None:
    _kill_at_random_moments(tmp_path, iterations=100, seed=2)


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    setup = TinyDBBackend(store)
    root = setup.create_conversation("shared root")
    writers = [_start(store, root, prefix, 60, compact_bytes=30_000) for prefix in ("alpha", "beta")]
    outputs = [writer.communicate(timeout=240) for writer in writers]
    for writer, (_, err) in zip(writers, outputs, strict=True):
        assert writer.returncode == 0, err
    acks = _acks([line for out, _ in outputs for line in out.splitlines()])
    assert len(acks["C"]) == 120
    # The handle opened before the writers started catches up with both of them.
    stats = setup.stats()
    assert (stats["delegations"], stats["completed_delegations"], stats["messages"]) == (120, 120, 240)
    assert stats["tool_calls"] == 120
    assert len(setup.search_delegations("alpha crashproof", 100)) == 60
    assert len(setup.search_delegations("beta crashproof", 100)) == 60
    setup.close()
    _check_holds(store, acks).close()
