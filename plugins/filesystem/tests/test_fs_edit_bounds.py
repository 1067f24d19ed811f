"""filesystem.edit_file stays bounded: the result by max_edit_bytes, the diff in time, a cancelled call stops."""

from __future__ import annotations

import re
import threading

import anyio
import orjson
import pytest
from entropic_mcp import CallContext, ToolError
from entropic_mcp_filesystem._edit import DIFF_MAX_LINES, unified
from hypothesis import given, settings
from hypothesis import strategies as st

LIMIT = 4096


@pytest.fixture
def small(make, root):
    fs = make({"max_edit_bytes": LIMIT})
    (root / "small.txt").write_text("x" * 1000)
    fs.ok("read_file", {"path": "small.txt"})
    return fs


def leftovers(root):
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".entropic-tmp"))


def assert_refused_untouched(fs, root, args, before):
    error = fs.error("edit_file", args)
    assert error["error"] == "too_large", error
    assert f"max_edit_bytes ({LIMIT})" in error["message"] and "[servers.filesystem]" in error["message"]
    assert "nothing was written" in error["message"] and error["limit"] == LIMIT
    assert (root / "small.txt").read_text() == before and leftovers(root) == []


def test_replace_all_whose_result_passes_max_edit_bytes_is_refused_before_writing(small, root):
    args = {"path": "small.txt", "old_string": "x", "new_string": "y" * 300, "replace_all": True}
    assert_refused_untouched(small, root, args, "x" * 1000)


def test_edits_that_double_the_file_in_turn_are_refused_once_past_the_limit(small, root):
    edits = [{"old_string": "x", "new_string": "xx", "replace_all": True}] * 30
    assert_refused_untouched(small, root, {"path": "small.txt", "edits": edits}, "x" * 1000)


def test_an_insert_past_the_limit_is_refused(small, root):
    args = {"path": "small.txt", "insert_line": 0, "new_string": "z" * LIMIT}
    assert_refused_untouched(small, root, args, "x" * 1000)


def test_the_limit_counts_utf8_bytes_not_characters(small, root):
    # 3,000 characters fit the limit, their 6,000 bytes do not.
    args = {"path": "small.txt", "old_string": "x" * 1000, "new_string": "é" * 3000}
    assert_refused_untouched(small, root, args, "x" * 1000)


def test_a_result_of_exactly_max_edit_bytes_is_written(small, root):
    small.ok("edit_file", {"path": "small.txt", "old_string": "x" * 1000, "new_string": "w" * LIMIT})
    assert (root / "small.txt").read_text() == "w" * LIMIT


def test_a_dry_run_past_the_limit_is_refused_too(small, root):
    args = {"path": "small.txt", "old_string": "x", "new_string": "yy" * 10, "replace_all": True, "dry_run": True}
    assert_refused_untouched(small, root, args, "x" * 1000)


def periodic(changed: bool) -> str:
    # Lines repeating every 150 lines, every third one changed: the comparison difflib took ~40 s over.
    return "".join(
        f"{'value':>20} {i % 150:03d} {'odd' + '!' * changed if i % 3 == 0 else 'even'}\n" for i in range(8000)
    )


def test_a_diff_too_slow_to_compute_is_a_summary_naming_the_changed_lines(fs, root):
    (root / "big.txt").write_text(periodic(False))
    fs.ok("read_file", {"path": "big.txt"})
    data = fs.ok("edit_file", {"path": "big.txt", "old_string": " odd", "new_string": " odd!", "replace_all": True})
    assert data["replacements"] == 2667 and (root / "big.txt").read_text() == periodic(True)
    assert "longer than" in data["diff_omitted"]
    assert data["diff"].startswith("(diff not shown") and "lines 1-7999 of the old file" in data["diff"]
    assert "offset=1" in data["diff"]


def test_a_changed_part_longer_than_the_line_bound_is_summarised_without_comparing():
    before = "".join(f"line {i}\n" for i in range(DIFF_MAX_LINES))
    after = "head\n" + before.replace("line", "LINE") + "tail\n"
    diff = unified(before, after, "f.txt")
    assert diff.omitted is not None and f"more than {DIFF_MAX_LINES} lines" in diff.omitted
    assert "lines 1-" in diff.text


def test_a_small_change_in_a_large_file_gets_a_real_diff_with_true_line_numbers():
    # Kept small enough not to grow the test process (test_fs_limits measures a child's peak RSS,
    # which Linux starts from the parent's).
    before = "".join(f"line {i}\n" for i in range(50_000))
    after = before.replace("line 45000\n", "changed\n")
    diff = unified(before, after, "f.txt")
    assert diff.omitted is None
    assert diff.text.splitlines() == [
        "--- a/f.txt",
        "+++ b/f.txt",
        "@@ -44999,5 +44999,5 @@",
        " line 44998",
        " line 44999",
        "-line 45000",
        "+changed",
        " line 45001",
        " line 45002",
    ]


def apply_unified(before: list[str], diff: str) -> list[str]:
    """Apply a unified diff of lines (the test's own patch program)."""
    out: list[str] = []
    at = 0
    for hunk in re.split(r"^(?=@@ )", diff, flags=re.M)[1:]:
        header, *body = hunk.split("\n")
        start = int(re.match(r"@@ -(\d+)", header).group(1))
        length = re.match(r"@@ -\d+(?:,(\d+))?", header).group(1)
        start = start if length != "0" else start + 1
        out.extend(before[at : start - 1])
        at = start - 1
        for line in body:
            if line[:1] in (" ", "-"):
                assert before[at] == line[1:]
                at += 1
            if line[:1] in (" ", "+"):
                out.append(line[1:])
    return out + before[at:]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c", "", "d d"]), max_size=30),
    st.lists(st.sampled_from(["a", "b", "x", "", "d d"]), max_size=30),
)
def test_the_diff_turns_the_old_lines_into_the_new(before, after):
    diff = unified("".join(x + "\n" for x in before), "".join(x + "\n" for x in after), "f")
    assert diff.omitted is None
    if before == after:
        assert diff.text == ""
    else:
        assert diff.text.startswith("--- a/f\n+++ b/f\n@@ ")
        assert apply_unified(before, diff.text) == after


def test_a_cancelled_comparison_stops_and_says_nothing_was_written():
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(ToolError) as raised:
        unified(periodic(False), periodic(True), "big.txt", cancelled=cancelled)
    assert raised.value.code == "cancelled" and "nothing was written" in raised.value.message


def test_an_edit_whose_deadline_passed_writes_nothing(fs, root):
    (root / "m.txt").write_text("a\n")
    fs.ok("read_file", {"path": "m.txt"})
    cancelled = threading.Event()
    cancelled.set()
    ctx = CallContext(conversation_id="c1", cancelled=cancelled)
    args = {"path": "m.txt", "old_string": "a", "new_string": "b"}
    result = anyio.run(fs.server.execute, "edit_file", args, ctx)
    assert result.is_error and orjson.loads(result.result)["error"] == "cancelled"
    assert (root / "m.txt").read_text() == "a\n" and leftovers(root) == []
