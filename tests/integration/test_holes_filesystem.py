"""Issue 21, filesystem: hostile patterns and hostile edits through a real `entropic-mcp serve`.

A pattern a model supplies (glob's ``pattern``, grep's ``glob`` and ``pattern``) is matched in
linear time, so a pattern built to make a backtracking engine run for minutes answers at once and
never stops the server answering another client. ``edit_file`` refuses a result larger than
``max_edit_bytes`` before writing anything, and its diff of a large file answers promptly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import HTTPServe, connect, start_http, stop, write_project

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ERA = "2026-07-28"
#: Generous for a loaded 2-core machine: before the fix each hostile call ran for minutes.
LIVENESS_SECONDS = 5.0
HOSTILE_SECONDS = 30.0

CONFIG = """\
[entropic_mcp]
plugins = ["filesystem"]
[storage]
backend = "none"
[permissions]
default = "allow"
[servers.filesystem]
timeout_seconds = 20
"""

#: Six stars before a letter no name has: a backtracking matcher tries ~n^6/6! splits per name.
STARS = "*a*a*a*a*a*a*b"
HOSTILE_CALLS = {
    "glob pattern (whole path)": ("filesystem.glob", {"pattern": STARS}),
    "glob pattern (file name)": ("filesystem.glob", {"pattern": "**/" + STARS}),
    "glob pattern (in a directory)": ("filesystem.glob", {"pattern": "deep/" + STARS}),
    "grep glob (file name)": ("filesystem.grep", {"pattern": "x", "glob": STARS}),
    "grep glob (path)": ("filesystem.grep", {"pattern": "x", "glob": "deep/" + STARS}),
    "grep pattern": ("filesystem.grep", {"pattern": "(a+)+$"}),
    "grep pattern, multiline": ("filesystem.grep", {"pattern": "(a|aa)*b$", "multiline": True}),
}


def text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@pytest.fixture
def hostile_project(tmp_path: Path) -> Path:
    root = write_project(tmp_path / "project", CONFIG)
    name = "a" * 100
    for where in (root, root / "deep"):
        where.mkdir(exist_ok=True)
        (where / name).write_text("a" * 40 + "x\n")
    # Content where (a+)+$ backtracks: a long run of a's that ends in something else.
    (root / "evil.txt").write_text(("a" * 60 + "!\n") * 50)
    (root / "ok.txt").write_text("fine\n")
    return root


@pytest.fixture
def served(hostile_project: Path) -> Any:
    server = start_http(hostile_project)
    try:
        yield server
    finally:
        stop(server.process)


@pytest.mark.parametrize("case", sorted(HOSTILE_CALLS))
async def test_a_redos_pattern_answers_and_another_client_is_served_meanwhile(served: HTTPServe, case: str) -> None:
    tool, arguments = HOSTILE_CALLS[case]
    timings: list[float] = []
    hostile: dict[str, Any] = {}

    async def attack() -> None:
        async with connect(served.url, ERA) as peer:
            started = time.monotonic()
            hostile["result"] = await peer.call(tool, arguments)
            hostile["seconds"] = time.monotonic() - started

    async def bystander() -> None:
        async with connect(served.url, ERA) as peer:
            # Keep asking while the hostile call is in flight (and a little after it answered).
            for _ in range(20):
                started = time.monotonic()
                with anyio.fail_after(LIVENESS_SECONDS):
                    result = await peer.call("filesystem.read_file", {"path": "ok.txt"})
                timings.append(time.monotonic() - started)
                assert not result.is_error and "fine" in text(result)
                if "result" in hostile:
                    return

    with anyio.fail_after(HOSTILE_SECONDS + LIVENESS_SECONDS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(attack)
            tg.start_soon(bystander)
    result = hostile["result"]  # nothing matches: no name and no line has a "b"
    assert not result.is_error, text(result)[:500]
    assert text(result) == "(no matches)", text(result)[:500]
    assert timings and max(timings) < LIVENESS_SECONDS


async def test_an_edit_that_would_write_100_mb_is_refused_through_serve(
    served: HTTPServe, hostile_project: Path
) -> None:
    target = hostile_project / "small.txt"
    target.write_text("x" * 1000)
    async with connect(served.url, ERA) as peer:
        assert not (await peer.call("filesystem.read_file", {"path": "small.txt"})).is_error
        with anyio.fail_after(HOSTILE_SECONDS):
            result = await peer.call(
                "filesystem.edit_file",
                {"path": "small.txt", "old_string": "x", "new_string": "y" * 100_000, "replace_all": True},
            )
        assert result.is_error, text(result)[:500]
        error = json.loads(text(result))
        assert error["error"] == "too_large"
        assert "max_edit_bytes" in error["message"] and "[servers.filesystem]" in error["message"]
        # The other client, and this one, are still served.
        assert "fine" in text(await peer.call("filesystem.read_file", {"path": "ok.txt"}))
    assert target.read_text() == "x" * 1000
    assert [p.name for p in hostile_project.iterdir() if p.name.startswith(".small")] == []


async def test_an_edit_of_a_large_file_answers_promptly_with_a_bounded_diff(
    served: HTTPServe, hostile_project: Path
) -> None:
    # ~270 kB whose lines repeat every 150 lines, every third one changed: difflib took ~50 s on it.
    lines = [f"{'value':>20} {i % 150:03d} {'odd' if i % 3 == 0 else 'even'}" for i in range(8_000)]
    target = hostile_project / "big.txt"
    target.write_text("\n".join(lines) + "\n")
    async with connect(served.url, ERA) as peer:
        assert not (await peer.call("filesystem.read_file", {"path": "big.txt"})).is_error
        with anyio.fail_after(HOSTILE_SECONDS):
            result = await peer.call(
                "filesystem.edit_file",
                {"path": "big.txt", "old_string": " odd", "new_string": " odd!", "replace_all": True},
            )
        assert not result.is_error, text(result)[:500]
        answer = json.loads(text(result))
        assert answer["replacements"] == 2_667
        assert isinstance(answer["diff"], str) and answer["diff"]
        with anyio.fail_after(LIVENESS_SECONDS):
            assert "fine" in text(await peer.call("filesystem.read_file", {"path": "ok.txt"}))
    assert target.read_text().splitlines()[3] == f"{'value':>20} 003 odd!"
