"""filesystem.grep: matches, regex errors, binaries, filters, context, truncation."""

from __future__ import annotations

import pytest


@pytest.fixture
def tree(root):
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("import os\n\ndef alpha():\n    return os.sep\n")
    (root / "src" / "b.txt").write_text("alpha beta\nALPHA\n")
    (root / "bin.dat").write_bytes(b"alpha\x00\x01\x02")
    (root / "u.txt").write_text("ünïcode alpha\n")
    return root


def test_matches_with_path_line_content(fs, tree):
    result = fs.ok("grep", {"pattern": "alpha"})
    assert {"path": "src/a.py", "line": 3, "content": "def alpha():"} in result
    assert {"path": "src/b.txt", "line": 1, "content": "alpha beta"} in result
    assert {"path": "u.txt", "line": 1, "content": "ünïcode alpha"} in result


def test_binary_files_are_skipped(fs, tree):
    assert all(m["path"] != "bin.dat" for m in fs.ok("grep", {"pattern": "alpha"}))


def test_case_insensitive(fs, tree):
    assert {"path": "src/b.txt", "line": 2, "content": "ALPHA"} in fs.ok(
        "grep", {"pattern": "alpha", "case_insensitive": True}
    )
    assert all(m["content"] != "ALPHA" for m in fs.ok("grep", {"pattern": "alpha"}))


def test_invalid_regex_is_an_error_not_a_crash(fs, tree):
    error = fs.error("grep", {"pattern": "(unclosed"})
    assert error["error"] == "invalid_regex" and "escape" in error["message"]


def test_glob_filter_by_name_or_path(fs, tree):
    assert {m["path"] for m in fs.ok("grep", {"pattern": "alpha", "glob": "*.py"})} == {"src/a.py"}
    assert {m["path"] for m in fs.ok("grep", {"pattern": "alpha", "glob": "src/*.txt"})} == {"src/b.txt"}


def test_path_may_be_a_directory_or_a_file(fs, tree):
    assert {m["path"] for m in fs.ok("grep", {"pattern": "alpha", "path": "src"})} == {"src/a.py", "src/b.txt"}
    assert fs.ok("grep", {"pattern": "os", "path": "src/a.py"}) == [
        {"path": "src/a.py", "line": 1, "content": "import os"},
        {"path": "src/a.py", "line": 4, "content": "    return os.sep"},
    ]


def test_context_lines(fs, tree):
    [match] = fs.ok("grep", {"pattern": "def alpha", "context": 1})
    assert match["before"] == [""] and match["after"] == ["    return os.sep"]
    [first] = fs.ok("grep", {"pattern": "import", "context": 2})
    assert first["before"] == [] and first["after"] == ["", "def alpha():"]


def test_one_entry_per_matching_line(fs, root):
    (root / "r.txt").write_text("aaa\nb\naaa\n")
    assert [m["line"] for m in fs.ok("grep", {"pattern": "a"})] == [1, 3]


def test_anchors_work_per_line_and_no_phantom_last_line(fs, root):
    (root / "r.txt").write_text("x\ny\n")
    assert [m["line"] for m in fs.ok("grep", {"pattern": "^"})] == [1, 2]
    assert [m["line"] for m in fs.ok("grep", {"pattern": "y$"})] == [2]


def test_crlf_content_has_no_carriage_return(fs, root):
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    assert fs.ok("grep", {"pattern": "two"}) == [{"path": "w.txt", "line": 2, "content": "two"}]


def test_truncation_after_max_grep_matches(make, root):
    fs = make({"max_grep_matches": 3})
    (root / "many.txt").write_text("hit\n" * 10)
    result = fs.ok("grep", {"pattern": "hit"})
    assert [m["line"] for m in result[:3]] == [1, 2, 3]
    assert result[3]["truncated"] is True and "max_grep_matches" in result[3]["note"]


def test_exactly_max_matches_is_not_truncated(make, root):
    fs = make({"max_grep_matches": 3})
    (root / "three.txt").write_text("hit\n" * 3)
    assert len(fs.ok("grep", {"pattern": "hit"})) == 3


def test_non_ascii_pattern_and_non_utf8_file(fs, root):
    (root / "l.txt").write_bytes(b"caf\xe9 ok\n")
    (root / "u.txt").write_text("café\n")
    assert fs.ok("grep", {"pattern": "é"}) == [{"path": "u.txt", "line": 1, "content": "café"}]
    assert fs.ok("grep", {"pattern": "ok"}) == [{"path": "l.txt", "line": 1, "content": "caf\ufffd ok"}]


def test_long_lines_are_cut(fs, root):
    (root / "min.js").write_text("x" * 5000 + "needle\n")
    [match] = fs.ok("grep", {"pattern": "needle"})
    assert len(match["content"]) <= 1001 and match["content"].endswith("…")


def test_results_follow_path_order(fs, root):
    for name in ("b/z.txt", "a/y.txt", "a.txt", "c.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("hit\n")
    paths = [m["path"] for m in fs.ok("grep", {"pattern": "hit"})]
    assert paths == ["a.txt", "c.txt", "a/y.txt", "b/z.txt"]


def test_results_fit_the_pipeline_result_cap_with_a_note(make, root):
    fs = make(result_cap=1500)
    (root / "many.txt").write_text(("needle " + "w" * 80 + "\n") * 60)
    outcome, result = fs.call("grep", {"pattern": "needle"})
    assert len(outcome.response.result.encode()) <= 1500
    assert result[-1]["truncated"] is True and "max_result_bytes" in result[-1]["note"]
    assert [m["line"] for m in result[:-1]] == list(range(1, len(result)))
