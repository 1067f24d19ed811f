"""One of the two processes of test_two_processes: ``writer`` or ``reader`` (run as a script).

writer: creates and completes N delegations (each with a word of its own) and prints their ids.
reader: finds each by search as soon as it is there, resumes it (loads its messages, starts a new
delegation seeded with them, completes that) and prints the pairs.
"""

from __future__ import annotations

import sys
import time

from entropic_mcp_postgres import PostgresBackend

SCOPE = "two-processes"


def writer(backend: PostgresBackend, root: str, count: int) -> None:
    for i in range(count):
        delegation_id, child = backend.create_delegation(root, "lead", "researcher", f"look into item-{i:03d}", 3, None)
        backend.save_messages(child, [{"role": "assistant", "content": f"notes on item-{i:03d}"}])
        backend.complete_delegation(delegation_id, "completed", f"item-{i:03d} understood")
        print("W", delegation_id, flush=True)


def reader(backend: PostgresBackend, root: str, count: int) -> None:
    deadline = time.monotonic() + 120  # bounded: the writer finishes long before
    for i in range(count):
        word = f"item-{i:03d}"
        while True:
            found = backend.search_delegations(f"{word} understood", 3, SCOPE)
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        if not found:
            print("MISSING", word, flush=True)
            continue
        (hit,) = found
        earlier = backend.load_delegation_with_messages(hit["delegation_id"])
        resumed, child = backend.create_delegation(root, "lead", "researcher", f"go on with {word}", 3, None)
        backend.save_messages(child, earlier["messages"] + [{"role": "user", "content": f"go on with {word}"}])
        backend.complete_delegation(resumed, "completed", f"resumed {word}")
        print("R", hit["delegation_id"], resumed, flush=True)


if __name__ == "__main__":
    role, dsn, schema, root, count = sys.argv[1:6]
    store = PostgresBackend(dsn, schema=schema, pool_max=2)
    try:
        (writer if role == "writer" else reader)(store, root, int(count))
    finally:
        store.close()
