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


def test_list_directory_lines_mark_directories_and_symlinks_like_ls_p_and_json_keeps_sizes(fs, root):
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("12345")
    (root / "a.txt").write_text("abc")
    (root / "link").symlink_to("a.txt")
    assert text(fs, "list_directory", {}) == "a.txt\nlink@\nsrc/"
    assert text(fs, "list_directory", {"recursive": True}) == "a.txt\nlink@\nsrc/\nsrc/m.py"
    assert text(fs, "list_directory", {"path": "src"}) == "m.py"
    assert fs.ok("list_directory", {"path": "src", "format": "json"})[0]["size"] == 5
    (root / "empty").mkdir()
    assert text(fs, "list_directory", {"path": "empty"}) == "(empty directory)"


def test_json_is_kept_on_request_and_other_formats_are_refused(fs, root):
    (root / "a.txt").write_text("k\n")
    assert fs.ok("grep", {"pattern": "k", "format": "json"}) == [{"path": "a.txt", "line": 1, "content": "k"}]
    assert fs.ok("glob", {"pattern": "*", "format": "json"}) == ["a.txt"]
    outcome, _ = fs.call("list_directory", {"format": "xml"})
    assert outcome.response.is_error and "format" in outcome.response.result


def _pages(fs, tool: str, args: dict) -> tuple[list[str], int]:
    """Every line of ``tool`` followed through its next_offset notes, and the number of calls."""
    lines: list[str] = []
    offset, calls = 0, 0
    while calls < 50:
        calls += 1
        *body, last = text(fs, tool, {**args, "offset": offset}).split("\n")
        found = re.match(r"\[truncated, next_offset=(\d+): ", last)
        if not found:
            return [*lines, *body, last], calls
        assert int(found[1]) == offset + len(body)
        lines.extend(body)
        offset = int(found[1])
    raise AssertionError(f"still cut after {calls} calls")


def test_glob_cut_by_the_byte_cap_says_where_to_continue_and_the_pages_join_up(make, root):
    fs = make(result_cap=1024)
    names = [f"file_number_{i:03d}.txt" for i in range(200)]
    for name in names:
        (root / name).write_text("")
    first = text(fs, "glob", {"pattern": "*.txt"})
    assert len(first.encode()) <= 1024
    assert re.search(r"\[truncated, next_offset=\d+: the result was cut to fit max_result_bytes", first)
    lines, calls = _pages(fs, "glob", {"pattern": "*.txt"})
    assert lines == names and calls >= 3
    data = fs.ok("glob", {"pattern": "*.txt"})
    assert len(orjson.dumps(data)) <= 1024
    assert data[-1]["truncated"] is True and data[-1]["next_offset"] == len(data) - 1
    rest = fs.ok("glob", {"pattern": "*.txt", "offset": data[-1]["next_offset"]})
    assert rest[0] == names[len(data) - 1]


def test_glob_cut_by_max_glob_results_gives_next_offset_and_an_offset_past_the_end_says_so(make, root):
    fs = make({"max_glob_results": 3})
    for i in range(7):
        (root / f"f{i}.py").write_text("")
    page = fs.ok("glob", {"pattern": "*.py"})
    assert page[:3] == ["f0.py", "f1.py", "f2.py"] and page[3]["next_offset"] == 3
    lines, calls = _pages(fs, "glob", {"pattern": "*.py"})
    assert lines == [f"f{i}.py" for i in range(7)] and calls == 3
    past = fs.ok("glob", {"pattern": "*.py", "offset": 9})
    assert past == [{"note": past[0]["note"]}] and "past the last match: 7 paths" in past[0]["note"]
    assert fs.error("glob", {"pattern": "*.py", "offset": -1})["error"] == "invalid_args"


def test_list_directory_cut_by_the_byte_cap_says_where_to_continue_in_both_forms(make, root):
    fs = make(result_cap=1024)
    names = [f"entry_number_{i:03d}.txt" for i in range(150)]
    for name in names:
        (root / name).write_text("x" * (len(name) % 7))
    lines, calls = _pages(fs, "list_directory", {})
    assert lines == names and calls >= 3
    data = fs.ok("list_directory", {"recursive": True})
    assert len(orjson.dumps(data)) <= 1024 and data[-1]["next_offset"] == len(data) - 1
    rest = fs.ok("list_directory", {"recursive": True, "offset": data[-1]["next_offset"]})
    assert rest[0]["path"] == names[len(data) - 1]


def test_list_directory_over_its_entry_limit_pages_in_one_sorted_order(make, root, monkeypatch):
    from entropic_mcp_filesystem import _listing

    monkeypatch.setattr(_listing, "MAX_ENTRIES", 4)
    fs = make()
    # walk order (a directory's files, then its sub-directories) differs from path order here
    for rel in ["a.txt", "a/x.txt", "a/y.txt", "b.txt", "b/z.txt", "c.txt"]:
        (root / rel).parent.mkdir(exist_ok=True)
        (root / rel).write_text("")
    page = fs.ok("list_directory", {"recursive": True})
    assert [e["path"] for e in page[:4]] == ["a", "a.txt", "a/x.txt", "a/y.txt"]
    assert page[4]["next_offset"] == 4
    lines, calls = _pages(fs, "list_directory", {"recursive": True})
    assert lines == ["a/", "a.txt", "a/x.txt", "a/y.txt", "b/", "b.txt", "b/z.txt", "c.txt"]
    assert calls == 2
    assert "past the last entry: 5 entries" in fs.ok("list_directory", {"offset": 20})[0]["note"]
