"""filesystem.read_file: ordered lines, paging, byte budget, errors, anchors."""

from __future__ import annotations

from entropic_mcp import ContextAnchor


def test_lines_are_an_ordered_array(fs, root):
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 13)))
    data = fs.ok("read_file", {"path": "a.txt"})
    assert data["lines"] == [f"line {i}" for i in range(1, 13)]
    assert data["lines"].index("line 10") == data["lines"].index("line 9") + 1
    assert data == {
        "path": "a.txt",
        "total": 12,
        "start": 1,
        "lines": data["lines"],
        "truncated": False,
        "next_offset": None,
    }


def test_offset_and_limit_select_a_window_with_next_offset(fs, root):
    (root / "a.txt").write_text("".join(f"{i}\n" for i in range(1, 21)))
    data = fs.ok("read_file", {"path": "a.txt", "offset": 5, "limit": 3})
    assert data["lines"] == ["5", "6", "7"]
    assert (data["start"], data["total"], data["truncated"], data["next_offset"]) == (5, 20, True, 8)
    tail = fs.ok("read_file", {"path": "a.txt", "offset": 19, "limit": 5})
    assert tail["lines"] == ["19", "20"] and tail["next_offset"] is None and not tail["truncated"]


def test_file_over_max_read_bytes_returns_first_part_and_rest_by_offset(make, root):
    fs = make({"max_read_bytes": 1024})
    lines = [f"{i:04d} " + "x" * 95 for i in range(1, 51)]  # 100 bytes + newline each
    (root / "big.txt").write_text("\n".join(lines) + "\n")
    first = fs.ok("read_file", {"path": "big.txt"})
    assert first["truncated"] is True and first["total"] == 50
    assert first["lines"] == lines[: len(first["lines"])] and 0 < len(first["lines"]) < 50
    collected, offset = list(first["lines"]), first["next_offset"]
    while offset is not None:
        page = fs.ok("read_file", {"path": "big.txt", "offset": offset})
        assert page["start"] == offset
        collected += page["lines"]
        offset = page["next_offset"]
    assert collected == lines


def test_single_line_longer_than_budget_is_cut_and_paging_moves_on(make, root):
    fs = make({"max_read_bytes": 1024})
    (root / "min.js").write_text("y" * 5000 + "\nsecond\n")
    data = fs.ok("read_file", {"path": "min.js"})
    assert data["lines"] == ["y" * 1024] and data["line_truncated"] is True and data["next_offset"] == 2
    assert fs.ok("read_file", {"path": "min.js", "offset": 2})["lines"] == ["second"]


def test_crlf_and_missing_final_newline(fs, root):
    (root / "w.txt").write_bytes(b"a\r\nb\r\nc")
    data = fs.ok("read_file", {"path": "w.txt"})
    assert data["lines"] == ["a", "b", "c"] and data["total"] == 3


def test_empty_file(fs, root):
    (root / "e.txt").write_text("")
    assert fs.ok("read_file", {"path": "e.txt"})["lines"] == []


def test_invalid_utf8_is_replaced_not_refused(fs, root):
    (root / "latin.txt").write_bytes(b"caf\xe9\n")
    assert fs.ok("read_file", {"path": "latin.txt"})["lines"] == ["caf\ufffd"]


def test_not_found_names_list_directory(fs):
    error = fs.error("read_file", {"path": "nope.txt"})
    assert error["error"] == "not_found" and "filesystem.list_directory" in error["message"]


def test_directory_is_refused(fs, root):
    (root / "d").mkdir()
    assert fs.error("read_file", {"path": "d"})["error"] == "is_directory"
    assert fs.error("read_file", {"path": "."})["error"] == "is_directory"


def test_binary_file_is_refused(fs, root):
    (root / "b.bin").write_bytes(b"\x89PNG\x00\x00\x01")
    assert fs.error("read_file", {"path": "b.bin"})["error"] == "binary_file"


def test_fifo_is_refused_without_hanging(fs, root):
    import os

    os.mkfifo(root / "pipe")
    assert fs.error("read_file", {"path": "pipe"})["error"] == "not_regular_file"


def test_anchor_key_is_canonical_so_spellings_share_it(fs, root):
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("x\n")
    keys = set()
    for spelling in ("src/m.py", "./src/../src/m.py", str(root / "src" / "m.py")):
        outcome, _ = fs.call("read_file", {"path": spelling})
        anchors = [d for d in outcome.response.directives if isinstance(d, ContextAnchor)]
        keys |= {a.key for a in anchors}
    assert keys == {"file:src/m.py"}


def test_refusal_is_not_anchored(fs):
    outcome, _ = fs.call("read_file", {"path": "missing"})
    assert outcome.response.is_error and outcome.response.directives == ()


def test_read_always_runs_skipping_the_duplicate_check(fs, root):
    (root / "a.txt").write_text("one\n")
    fs.ok("read_file", {"path": "a.txt"})
    (root / "a.txt").write_text("two\n")
    assert fs.ok("read_file", {"path": "a.txt"})["lines"] == ["two"]


def test_tilde_is_a_literal_character(fs, root):
    (root / "~").mkdir()
    (root / "~" / "x.txt").write_text("home?\n")
    assert fs.ok("read_file", {"path": "~/x.txt"})["lines"] == ["home?"]


def test_page_fits_the_pipeline_result_cap_and_rest_is_reachable(make, root):
    fs = make(result_cap=2000)
    lines = [f"{i:04d} " + "q" * 60 for i in range(1, 201)]
    (root / "long.txt").write_text("\n".join(lines) + "\n")
    collected, offset = [], 1
    while offset is not None:
        outcome, page = fs.call("read_file", {"path": "long.txt", "offset": offset})
        assert len(outcome.response.result.encode()) <= 2000 and "[... truncated" not in outcome.response.result
        collected += page["lines"]
        offset = page["next_offset"]
    assert collected == lines


def test_one_line_bigger_than_the_result_cap(make, root):
    fs = make(result_cap=1000)
    (root / "one.txt").write_text("z" * 5000 + "\nnext\n")
    outcome, page = fs.call("read_file", {"path": "one.txt"})
    assert len(outcome.response.result.encode()) <= 1000
    assert page["line_truncated"] is True and page["next_offset"] == 2 and page["lines"][0].startswith("zzz")
