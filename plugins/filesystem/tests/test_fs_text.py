"""grep, glob and list_directory answer lines by default (ripgrep's and ls's forms); JSON on request."""

from __future__ import annotations

import re

import orjson


def text(fs, tool: str, args: dict) -> str:
    outcome, _ = fs.call(tool, {**args, "format": "text"})
    assert not outcome.response.is_error, outcome.response.result
    return outcome.response.result


def test_grep_content_is_path_line_text(fs, root):
    (root / "a.py").write_text("x = 1\ndef f():\n    return 'quoted \"x\"'\n")
    (root / "b.py").write_text("nothing\n")
    assert text(fs, "grep", {"pattern": "x"}) == "a.py:1:x = 1\na.py:3:    return 'quoted \"x\"'"


def test_grep_context_lines_use_dashes_groups_are_separated_and_shared_lines_printed_once(fs, root):
    (root / "a.txt").write_text("".join(f"{'hit' if i in (3, 4, 10) else 'row'} {i}\n" for i in range(1, 13)))
    (root / "b.txt").write_text("hit b\n")
    assert text(fs, "grep", {"pattern": "hit", "context": 1}).split("\n") == [
        "a.txt-2-row 2",
        "a.txt:3:hit 3",  # line 3 is also line 4's context: shown once, as a match
        "a.txt:4:hit 4",
        "a.txt-5-row 5",
        "--",
        "a.txt-9-row 9",
        "a.txt:10:hit 10",
        "a.txt-11-row 11",
        "--",
        "b.txt:1:hit b",
    ]


def test_grep_multiline_match_prints_each_line_it_covers(fs, root):
    (root / "m.txt").write_text("start\nmiddle\nend\n")
    assert text(fs, "grep", {"pattern": "start.middle", "multiline": True}) == "m.txt:1:start\nm.txt:2:middle"


def test_grep_other_modes_are_lines(fs, root):
    (root / "a.txt").write_text("k\nk\n")
    (root / "b.txt").write_text("k\n")
    assert text(fs, "grep", {"pattern": "k", "output_mode": "files_with_matches"}) == "a.txt\nb.txt"
    assert text(fs, "grep", {"pattern": "k", "output_mode": "count"}) == "a.txt:2\nb.txt:1"
    assert text(fs, "grep", {"pattern": "absent"}) == "(no matches)"


def test_grep_page_limit_ends_with_a_line_naming_next_offset(fs, root):
    (root / "a.txt").write_text("k\n" * 5)
    lines = text(fs, "grep", {"pattern": "k", "head_limit": 2}).split("\n")
    assert lines[:2] == ["a.txt:1:k", "a.txt:2:k"]
    assert lines[2].startswith("[truncated, next_offset=2: ") and "offset=2" in lines[2]
    assert text(fs, "grep", {"pattern": "k", "head_limit": 2, "offset": 2}).split("\n")[:2] == [
        "a.txt:3:k",
        "a.txt:4:k",
    ]


def test_a_result_cut_by_the_byte_cap_says_where_to_continue_in_both_forms(make, root):
    fs = make(result_cap=1024)
    (root / "a.txt").write_text("".join(f"needle {i:04} {'x' * 40}\n" for i in range(200)))
    cut = text(fs, "grep", {"pattern": "needle"})
    assert len(cut.encode()) <= 1024
    *lines, last = cut.split("\n")
    found = re.match(r"\[truncated, next_offset=(\d+): the result was cut to fit max_result_bytes", last)
    assert found and int(found[1]) == len(lines) and lines[-1].startswith(f"a.txt:{len(lines)}:")
    rest = text(fs, "grep", {"pattern": "needle", "offset": int(found[1])})
    assert rest.startswith(f"a.txt:{len(lines) + 1}:needle {len(lines):04}")
    data = fs.ok("grep", {"pattern": "needle"})
    assert len(orjson.dumps(data)) <= 1024
    assert data[-1]["truncated"] is True and data[-1]["next_offset"] == len(data) - 1


def test_glob_is_one_path_a_line(fs, root):
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("")
    (root / "b.py").write_text("")
    assert text(fs, "glob", {"pattern": "**/*.py"}) == "b.py\nsrc/a.py"
    assert text(fs, "glob", {"pattern": "*.rs"}) == "(no matches)"
    assert text(fs, "glob", {"pattern": "nope/**/*.rs"}) == "(no matches)"


def test_list_directory_lines_mark_directories_and_symlinks_and_give_file_sizes(fs, root):
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("12345")
    (root / "a.txt").write_text("abc")
    (root / "link").symlink_to("a.txt")
    assert text(fs, "list_directory", {}) == "a.txt\t3\nlink@\nsrc/"
    assert text(fs, "list_directory", {"recursive": True}) == "a.txt\t3\nlink@\nsrc/\nsrc/m.py\t5"
    assert text(fs, "list_directory", {"path": "src"}) == "m.py\t5"
    (root / "empty").mkdir()
    assert text(fs, "list_directory", {"path": "empty"}) == "(empty directory)"


def test_json_is_kept_on_request_and_other_formats_are_refused(fs, root):
    (root / "a.txt").write_text("k\n")
    assert fs.ok("grep", {"pattern": "k", "format": "json"}) == [{"path": "a.txt", "line": 1, "content": "k"}]
    assert fs.ok("glob", {"pattern": "*", "format": "json"}) == ["a.txt"]
    outcome, _ = fs.call("list_directory", {"format": "xml"})
    assert outcome.response.is_error and "format" in outcome.response.result
