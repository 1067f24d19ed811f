"""Load: 50 conversations calling concurrently for a minute; per-conversation state never leaks.

Marked slow (``nox -s slow``); ``ENTROPIC_MCP_SOAK_SECONDS`` changes the duration.
"""

import json
import os
import time

import anyio
import entropic_mcp_entropic
import entropic_mcp_filesystem
import pytest
from entropic_mcp import CallContext
from entropic_mcp.testing import make_manager

CONVERSATIONS = 50
SECONDS = float(os.environ.get("ENTROPIC_MCP_SOAK_SECONDS", "60"))


@pytest.mark.slow
def test_fifty_conversations_for_a_minute_keep_their_state_apart(tmp_path):
    manager = make_manager(
        tmp_path,
        plugins=[entropic_mcp_filesystem, entropic_mcp_entropic],
        config={"permissions": {"default": "allow"}, "pipeline": {"same_tool_limit": 10**6}},
    )
    problems: list[str] = []
    rounds = [0] * CONVERSATIONS

    async def conversation(n: int) -> None:
        mine, theirs = f"conv-{n}.txt", f"conv-{(n + 1) % CONVERSATIONS}.txt"

        async def call(name, args):
            return await manager.call(name, args, CallContext(conversation_id=f"c{n}"))

        first = await call("filesystem.write_file", {"path": mine, "content": f"owner {n}\n"})
        if first.kind != "ok":
            problems.append(f"c{n}: first write {first.kind}: {first.response.result}")
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            r = rounds[n]
            read = await call("filesystem.read_file", {"path": mine, "format": "json"})
            lines = json.loads(read.response.result)["lines"] if read.kind == "ok" else []
            if not lines or lines[0] != f"owner {n}":
                problems.append(f"c{n}: read its own file as {read.response.result[:80]}")
            edit = await call("filesystem.edit_file", {"path": mine, "insert_line": 1, "new_string": f"round {r}"})
            if edit.kind != "ok":
                problems.append(f"c{n}: edit after its own read {edit.kind}: {edit.response.result[:120]}")
            # the neighbour's file exists but was never read in this conversation
            other = await call("filesystem.write_file", {"path": theirs, "content": f"stolen {r}"})
            if "read_before_write" not in other.response.result and "file_changed" not in other.response.result:
                problems.append(f"c{n}: wrote a file it never read: {other.kind} {other.response.result[:120]}")
            todo = await call("entropic.todo", {"action": "add", "content": f"item {n}.{r}"})
            if todo.kind != "ok" or f"item {(n + 1) % CONVERSATIONS}." in todo.response.result:
                problems.append(f"c{n}: todo list shows another conversation's items: {todo.response.result[:120]}")
            pattern = f"*-{r}.txt"  # new arguments every round, the same in every conversation
            listing = await call("filesystem.glob", {"pattern": pattern})
            if listing.kind not in ("ok", "ok_empty"):
                problems.append(f"c{n}: first glob with new arguments was {listing.kind}")
            again = await call("filesystem.glob", {"pattern": pattern})
            if again.kind != listing.kind or again.consecutive_duplicates != 1:
                problems.append(f"c{n}: the same glob twice was {again.kind}, repeat {again.consecutive_duplicates}")
            await call("entropic.todo", {"action": "clear"})
            rounds[n] += 1
            if len(problems) > 20:
                return

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for n in range(CONVERSATIONS):
                tg.start_soon(conversation, n)

    anyio.run(main)
    print(f"\n{sum(rounds)} rounds ({sum(rounds) * 9} calls) in {SECONDS:g} s across {CONVERSATIONS} conversations")
    assert problems == []
    assert min(rounds) > 0
