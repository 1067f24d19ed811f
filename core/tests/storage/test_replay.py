"""Replaying the files gives exactly what the writer holds: reopened, and caught up by a watcher."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from entropic_mcp._storage._tinydb import TinyDBBackend

WORDS = ["parser", "cache", "login", "retry", "index", "schema", "deploy", "token"]


def _view(backend: TinyDBBackend) -> dict[str, Any]:
    conversations = backend.list_conversations(limit=10_000)
    return {
        "tables": backend._state.dump(),
        "conversations": conversations,
        "messages": {c["conversation_id"]: backend.load_conversation(c["conversation_id"]) for c in conversations},
        "delegations": backend.list_delegations(limit=10_000),
        "latest": {t: backend.latest_delegation_for_target(t) for t in ("coder", "researcher")},
        "search": {w: backend.search_delegations(w, 10) for w in WORDS},
        "stats": {k: v for k, v in backend.stats().items() if k != "tool_calls"},
    }


def _random_operations(backend: TinyDBBackend, watcher: TinyDBBackend, rng: random.Random, count: int) -> None:
    conversations: list[str] = [backend.create_conversation("root")]
    running: list[str] = []
    for step in range(count):
        choice = rng.random()
        if choice < 0.1:
            conversations.append(backend.create_conversation(f"c{step}", {"step": step}))
        elif choice < 0.35:
            size = rng.choice([10, 10, 3000])
            backend.save_messages(rng.choice(conversations), [{"role": "user", "content": "m" * size, "step": step}])
        elif choice < 0.4:
            backend.save_snapshot(rng.choice(conversations), [{"role": "user", "content": f"snap {step}"}])
        elif choice < 0.65:
            target = rng.choice(["coder", "researcher"])
            delegation_id, child = backend.create_delegation(
                rng.choice(conversations), "lead", target, " ".join(rng.sample(WORDS, 2)), 3, None
            )
            conversations.append(child)
            running.append(delegation_id)
        elif choice < 0.9 and running:
            delegation_id = running.pop(rng.randrange(len(running)))
            status = rng.choice(["completed", "completed", "failed"])
            backend.complete_delegation(delegation_id, status, " ".join(rng.sample(WORDS, 3)))
        elif len(conversations) > 3:
            victim = conversations.pop(rng.randrange(1, len(conversations)))
            try:
                backend.delete_conversation(victim)
            except Exception:  # already gone with an ancestor
                pass
            alive = {c["conversation_id"] for c in backend.list_conversations(limit=10_000)}
            conversations = [c for c in conversations if c in alive]
            known = {d["delegation_id"] for d in backend.list_delegations(limit=10_000)}
            running = [d for d in running if d in known]
        if step % 7 == 0:
            watcher.stats()  # catches up part of the way, across compactions


@pytest.mark.parametrize("seed", range(6))
def test_the_writer_the_watcher_and_a_reopened_store_agree(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = tmp_path / "store"
    options = {"compact_bytes": rng.choice([1, 2_000, 50_000]), "inline_bytes": 512, "segment_bytes": 20_000}
    backend = TinyDBBackend(store, **options)
    watcher = TinyDBBackend(store, **options)
    _random_operations(backend, watcher, rng, 150)
    expected = _view(backend)
    assert _view(watcher) == expected
    backend.close()
    watcher.close()
    reopened = TinyDBBackend(store)
    assert _view(reopened) == expected
    reopened.close()
