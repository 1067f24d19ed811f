"""filesystem.edit_file: unique replacement, replace_all, insert_line, line endings, diff."""

from __future__ import annotations

import pytest


@pytest.fixture
def src(fs, root):
    (root / "m.py").write_text("a = 1\nb = 2\na = 1\nc = 3\n")
    fs.ok("read_file", {"path": "m.py"})
    return root / "m.py"


def test_unique_replacement_with_diff(fs, src):
    data = fs.ok("edit_file", {"path": "m.py", "old_string": "b = 2", "new_string": "b = 20"})
    assert data["path"] == "m.py" and data["replacements"] == 1
    assert "-b = 2" in data["diff"] and "+b = 20" in data["diff"] and data["diff"].startswith("--- a/m.py")
    assert src.read_text() == "a = 1\nb = 20\na = 1\nc = 3\n"


def test_multiple_matches_reports_count_and_lines(fs, src):
    error = fs.error("edit_file", {"path": "m.py", "old_string": "a = 1", "new_string": "x"})
    assert error["error"] == "multiple_matches" and error["count"] == 2 and error["lines"] == [1, 3]
    assert "replace_all" in error["message"]
    assert src.read_text() == "a = 1\nb = 2\na = 1\nc = 3\n"


def test_replace_all(fs, src):
    data = fs.ok("edit_file", {"path": "m.py", "old_string": "a = 1", "new_string": "a = 9", "replace_all": True})
    assert data["replacements"] == 2 and src.read_text().count("a = 9") == 2


def test_no_match_is_not_found(fs, src):
    assert fs.error("edit_file", {"path": "m.py", "old_string": "zzz", "new_string": "y"})["error"] == "not_found"


def test_empty_old_string_is_invalid_args(fs, src):
    assert fs.error("edit_file", {"path": "m.py", "old_string": "", "new_string": "y"})["error"] == "invalid_args"


def test_both_or_neither_mode_is_invalid_args(fs, src):
    assert fs.error("edit_file", {"path": "m.py", "new_string": "y"})["error"] == "invalid_args"
    both = {"path": "m.py", "new_string": "y", "old_string": "a", "insert_line": 1}
    assert fs.error("edit_file", both)["error"] == "invalid_args"


def test_insert_line_zero_inserts_at_the_top(fs, src):
    fs.ok("edit_file", {"path": "m.py", "insert_line": 0, "new_string": "# header"})
    assert src.read_text().splitlines()[:2] == ["# header", "a = 1"]


def test_insert_after_line_n(fs, src):
    fs.ok("edit_file", {"path": "m.py", "insert_line": 2, "new_string": "inserted\n"})
    assert src.read_text().splitlines() == ["a = 1", "b = 2", "inserted", "a = 1", "c = 3"]


def test_insert_past_the_end_appends(fs, src):
    fs.ok("edit_file", {"path": "m.py", "insert_line": 99, "new_string": "tail"})
    assert src.read_text().endswith("c = 3\ntail\n")


def test_insert_into_file_without_final_newline(fs, root):
    (root / "n.txt").write_text("a\nb")
    fs.ok("read_file", {"path": "n.txt"})
    fs.ok("edit_file", {"path": "n.txt", "insert_line": 5, "new_string": "c"})
    assert (root / "n.txt").read_text() == "a\nb\nc\n"


def test_crlf_file_stays_crlf(fs, root):
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    fs.ok("read_file", {"path": "w.txt"})
    fs.ok("edit_file", {"path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2\n2.5"})
    assert (root / "w.txt").read_bytes() == b"1\r\n2\r\n2.5\r\nthree\r\n"
    fs.ok("edit_file", {"path": "w.txt", "insert_line": 0, "new_string": "top"})
    assert (root / "w.txt").read_bytes() == b"top\r\n1\r\n2\r\n2.5\r\nthree\r\n"


def test_edit_needs_a_read_first(fs, root):
    (root / "u.txt").write_text("x\n")
    error = fs.error("edit_file", {"path": "u.txt", "old_string": "x", "new_string": "y"})
    assert error["error"] == "read_before_write"


def test_edit_after_external_change_is_refused(fs, src):
    src.write_text("a = 1\nb = 2\n")
    assert fs.error("edit_file", {"path": "m.py", "old_string": "b = 2", "new_string": "q"})["error"] == "file_changed"


def test_consecutive_edits_need_no_reread(fs, src):
    fs.ok("edit_file", {"path": "m.py", "old_string": "b = 2", "new_string": "b = 3"})
    fs.ok("edit_file", {"path": "m.py", "old_string": "c = 3", "new_string": "c = 4"})
    assert src.read_text() == "a = 1\nb = 3\na = 1\nc = 4\n"


def test_edit_of_missing_file_says_use_write_file(fs):
    error = fs.error("edit_file", {"path": "nope.py", "old_string": "a", "new_string": "b"})
    assert error["error"] == "not_found" and "filesystem.write_file" in error["message"]


def test_edit_of_non_utf8_file_is_refused_and_file_untouched(fs, root):
    (root / "l.txt").write_bytes(b"caf\xe9\n")
    fs.ok("read_file", {"path": "l.txt"})
    assert fs.error("edit_file", {"path": "l.txt", "old_string": "caf", "new_string": "x"})["error"] == "not_utf8"
    assert (root / "l.txt").read_bytes() == b"caf\xe9\n"


def test_edit_keeps_mode(fs, src):
    src.chmod(0o700)
    fs.ok("edit_file", {"path": "m.py", "old_string": "c = 3", "new_string": "c = 4"})
    assert src.stat().st_mode & 0o777 == 0o700


def test_several_edits_in_one_call_apply_in_order(fs, src):
    data = fs.ok(
        "edit_file",
        {
            "path": "m.py",
            "edits": [
                {"old_string": "b = 2", "new_string": "b = 20"},
                {"old_string": "a = 1", "new_string": "a = 5", "replace_all": True},
                {"old_string": "b = 20\n", "new_string": "b = 20\nd = 4\n"},
            ],
        },
    )
    assert data["replacements"] == 4
    assert src.read_text() == "a = 5\nb = 20\nd = 4\na = 5\nc = 3\n"
    assert "+d = 4" in data["diff"]
    # The tracker follows the write: a second edit needs no re-read.
    fs.ok("edit_file", {"path": "m.py", "edits": [{"old_string": "c = 3", "new_string": "c = 30"}]})


def test_edits_are_all_or_nothing(fs, src):
    before = src.read_text()
    error = fs.error(
        "edit_file",
        {
            "path": "m.py",
            "edits": [
                {"old_string": "b = 2", "new_string": "b = 20"},
                {"old_string": "not there", "new_string": "x"},
            ],
        },
    )
    assert error["error"] == "not_found" and error["edit"] == 2 and "edit 2 of 2" in error["message"]
    assert "No edit was applied" in error["message"]
    error = fs.error(
        "edit_file",
        {
            "path": "m.py",
            "edits": [{"old_string": "b = 2", "new_string": "x"}, {"old_string": "a = 1", "new_string": "y"}],
        },
    )
    assert error["error"] == "multiple_matches" and error["edit"] == 2 and error["lines"] == [1, 3]
    assert src.read_text() == before


def test_a_later_edit_sees_the_earlier_ones(fs, src):
    edits = [{"old_string": "b = 2", "new_string": "q = 7"}, {"old_string": "q = 7", "new_string": "q = 8"}]
    fs.ok("edit_file", {"path": "m.py", "edits": edits})
    assert "q = 8" in src.read_text()


@pytest.mark.parametrize(
    "args",
    [
        {"edits": []},
        {"edits": "x"},
        {"edits": [{"old_string": "a"}]},
        {"edits": [{"old_string": "", "new_string": "x"}]},
        {"edits": [{"new_string": "x"}]},
        {"edits": [{"old_string": "a", "new_string": "b", "bogus": 1}]},
        {"edits": [{"old_string": "a = 1", "new_string": "b"}], "old_string": "a", "new_string": "b"},
        {"edits": [{"old_string": "a", "new_string": "b"}] * 101},
    ],
)
def test_bad_edit_lists_are_invalid_args(fs, src, args):
    assert fs.server.tools["edit_file"] is not None
    response = fs.direct("edit_file", {"path": "m.py", **args})
    assert response.is_error and '"invalid_args"' in response.result


def test_dry_run_returns_the_diff_and_writes_nothing(fs, src):
    before = src.read_text()
    data = fs.ok("edit_file", {"path": "m.py", "old_string": "b = 2", "new_string": "b = 3", "dry_run": True})
    assert data["dry_run"] is True and "-b = 2" in data["diff"] and "+b = 3" in data["diff"]
    assert src.read_text() == before
    multi = fs.ok(
        "edit_file",
        {"path": "m.py", "dry_run": True, "edits": [{"old_string": "c = 3", "new_string": "c = 4"}]},
    )
    assert "+c = 4" in multi["diff"] and src.read_text() == before
    # A dry run that fails reports the failure, like the real edit would.
    assert (
        fs.error("edit_file", {"path": "m.py", "old_string": "nope", "new_string": "x", "dry_run": True})["error"]
        == "not_found"
    )
    fs.ok("edit_file", {"path": "m.py", "old_string": "b = 2", "new_string": "b = 3"})
    assert "b = 3" in src.read_text()


def test_dry_run_still_needs_the_read(fs, root):
    (root / "unread.txt").write_text("x\n")
    error = fs.error("edit_file", {"path": "unread.txt", "old_string": "x", "new_string": "y", "dry_run": True})
    assert error["error"] == "read_before_write"


# -- hints a model can act on -------------------------------------------------------------------


def test_an_edit_that_changes_nothing_is_refused(fs, root):
    (root / "a.py").write_text("x = 1\n")
    fs.ok("read_file", {"path": "a.py"})
    error = fs.error("edit_file", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 1"})
    assert error["error"] == "invalid_args" and "the same" in error["message"]


def test_old_string_with_read_files_line_number_prefix_says_to_drop_it(fs, root):
    (root / "a.py").write_text("def f():\n    return 1\n")
    fs.ok("read_file", {"path": "a.py"})
    error = fs.error("edit_file", {"path": "a.py", "old_string": "1\tdef f():\n2\t    return 1", "new_string": "y"})
    assert error["error"] == "not_found"
    assert "line-number prefix" in error["message"] and "drop" in error["message"]
    assert (root / "a.py").read_text() == "def f():\n    return 1\n"


def test_not_found_names_the_nearest_lines_with_their_numbers(fs, root):
    (root / "a.py").write_text("import os\n\n\ndef handle_request(request):\n    return request\n")
    fs.ok("read_file", {"path": "a.py"})
    error = fs.error("edit_file", {"path": "a.py", "old_string": "def handle_requests(req):", "new_string": "y"})
    assert error["error"] == "not_found"
    assert "4: def handle_request(request):" in error["message"]
