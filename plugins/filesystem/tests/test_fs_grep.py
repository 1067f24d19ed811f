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
    # A window of the line around the match, marked as cut.
    assert len(match["content"]) <= 1002 and match["content"].startswith("…") and "needle" in match["content"]
    (root / "min.js").write_text("needle" + "x" * 5000 + "\n")
    [match] = fs.ok("grep", {"pattern": "needle"})
    assert match["content"].startswith("needle") and match["content"].endswith("…") and len(match["content"]) == 1001


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


@pytest.fixture
def code(root):
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "a.py").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    (root / "src" / "b.py").write_text("alpha\nneedle one\nbeta\nneedle two\n")
    (root / "web.js").write_text("const needle = 1;\n")
    (root / "notes.md").write_text("needle in notes\n")
    return root


def test_output_modes(fs, code):
    assert fs.ok("grep", {"pattern": "needle", "output_mode": "files_with_matches"}) == [
        "notes.md",
        "web.js",
        "src/b.py",
    ]
    assert fs.ok("grep", {"pattern": "needle", "output_mode": "count"}) == [
        {"path": "notes.md", "count": 1},
        {"path": "web.js", "count": 1},
        {"path": "src/b.py", "count": 2},
    ]
    assert fs.error("grep", {"pattern": "x", "output_mode": "lines"})["error"] == "invalid_args"


def test_before_and_after_context(fs, code):
    [hit] = fs.ok("grep", {"pattern": "^line 5$", "before_context": 2, "after_context": 1})
    assert hit == {
        "path": "src/a.py",
        "line": 5,
        "content": "line 5",
        "before": ["line 3", "line 4"],
        "after": ["line 6"],
    }
    [hit] = fs.ok("grep", {"pattern": "^line 10$", "context": 3})
    assert hit["before"] == ["line 7", "line 8", "line 9"] and hit["after"] == []
    [hit] = fs.ok("grep", {"pattern": "^line 1$", "after_context": 2})
    assert "before" not in hit and hit["after"] == ["line 2", "line 3"]


def test_head_limit_and_offset_page_through_results(fs, code):
    first = fs.ok("grep", {"pattern": "line", "path": "src/a.py", "head_limit": 4})
    assert [m["line"] for m in first[:4]] == [1, 2, 3, 4]
    assert first[4]["truncated"] is True and first[4]["next_offset"] == 4
    second = fs.ok("grep", {"pattern": "line", "path": "src/a.py", "head_limit": 4, "offset": 4})
    assert [m["line"] for m in second[:4]] == [5, 6, 7, 8] and second[4]["next_offset"] == 8
    last = fs.ok("grep", {"pattern": "line", "path": "src/a.py", "head_limit": 4, "offset": 8})
    assert [m["line"] for m in last] == [9, 10]
    files = fs.ok("grep", {"pattern": "needle", "output_mode": "files_with_matches", "head_limit": 1, "offset": 1})
    assert files[0] == "web.js" and files[1]["next_offset"] == 2


def test_type_filter(fs, code):
    assert {m["path"] for m in fs.ok("grep", {"pattern": "needle", "type": "py"})} == {"src/b.py"}
    assert {m["path"] for m in fs.ok("grep", {"pattern": "needle", "type": "js"})} == {"web.js"}
    assert fs.ok("grep", {"pattern": "needle", "type": "py", "glob": "a.py"}) == []
    error = fs.error("grep", {"pattern": "needle", "type": "cobol"})
    assert error["error"] == "invalid_args" and "py" in error["message"]


def test_multiline_mode_matches_across_lines(fs, code):
    assert fs.ok("grep", {"pattern": r"alpha\s+needle"}) == []
    [hit] = fs.ok("grep", {"pattern": r"alpha\s+needle", "multiline": True})
    assert hit == {"path": "src/b.py", "line": 1, "content": "alpha\nneedle one"}
    [hit] = fs.ok("grep", {"pattern": "one.beta", "multiline": True})
    assert hit["line"] == 2
    assert fs.ok("grep", {"pattern": "needle.*two", "multiline": True, "output_mode": "count"}) == [
        {"path": "src/b.py", "count": 1}
    ]


@pytest.mark.parametrize("pattern", [r"(a)\1", r"a(?=b)", r"(?<=a)b", r"(?!x)y", r"(?<!x)y", r"(?>a)", r"a++"])
def test_patterns_re2_cannot_run_get_a_clear_error(fs, root, pattern):
    (root / "a.txt").write_text("aab\n")
    error = fs.error("grep", {"pattern": pattern})
    assert error["error"] == "invalid_regex" and "RE2" in error["message"] and "rewrite" in error["message"]


def test_catastrophic_pattern_answers_while_other_calls_are_served(make, root):
    import anyio
    from entropic_mcp import CallContext

    fs = make({"timeout_seconds": 30})
    (root / "evil.txt").write_text(("a" * 40 + "!\n") * 2000)
    (root / "ok.txt").write_text("fine\n")
    outcomes = {}

    async def run():
        async def call(key, name, args):
            outcomes[key] = await fs.manager.call(f"filesystem.{name}", args, CallContext(conversation_id=key))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "grep", "grep", {"pattern": "(a+)+$", "format": "json"})
            tg.start_soon(call, "grep2", "grep", {"pattern": "(a|aa)*!$", "output_mode": "count", "format": "json"})
            for i in range(5):
                tg.start_soon(call, f"list{i}", "list_directory", {})
                tg.start_soon(call, f"read{i}", "read_file", {"path": "ok.txt"})

    anyio.run(run)
    assert outcomes["grep"].kind == "ok_empty" or outcomes["grep"].response.result == "[]"
    assert outcomes["grep2"].response.result == '[{"path":"evil.txt","count":2000}]'
    assert all(o.kind == "ok" for k, o in outcomes.items() if not k.startswith("grep")), outcomes


def test_long_line_longer_than_the_cap_is_searched_in_pieces(make, root):
    fs = make({"max_grep_line_bytes": 4096})
    (root / "min.js").write_text("x" * 100_000 + "needle" + "y" * 100_000 + "\nsecond needle\n")
    hits = fs.ok("grep", {"pattern": "needle"})
    assert [h["line"] for h in hits] == [1, 2] and "needle" in hits[0]["content"]


def test_hard_linked_files_are_skipped_in_walks_and_refused_by_name(fs, root, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("TOPSECRET needle\n")
    (root / "linked.txt").hardlink_to(outside)
    (root / "plain.txt").write_text("needle\n")
    found = fs.ok("grep", {"pattern": "needle"})
    assert found[0] == {"path": "plain.txt", "line": 1, "content": "needle"}
    assert found[1]["skipped_hard_links"] == 1 and "TOPSECRET" not in str(found)
    assert fs.error("grep", {"pattern": "needle", "path": "linked.txt"})["error"] == "hard_link"


def _naive(text: bytes, word: bytes, before: int, after: int) -> list[tuple[int, str, list[str], list[str]]]:
    lines = text.split(b"\n")
    if text.endswith(b"\n"):
        lines = lines[:-1]
    out = []
    for i, line in enumerate(lines):
        if word in line:
            shown = [x.decode() for x in lines]
            out.append((i + 1, shown[i], shown[max(0, i - before) : i], shown[i + 1 : i + 1 + after]))
    return out


def test_chunked_scan_agrees_with_a_naive_grep_across_chunk_boundaries(monkeypatch):
    """Tiny chunks put every line, match and context window across chunk boundaries."""
    import random

    from entropic_mcp_filesystem import _grep
    from hypothesis import given, settings
    from hypothesis import strategies as st

    matcher = _grep.Matcher("ab", False)

    @settings(max_examples=300, deadline=None)
    @given(
        words=st.lists(st.sampled_from(["ab", "x", "", "yab", "zzzz", "a", "b"]), min_size=0, max_size=40),
        final_newline=st.booleans(),
        before=st.integers(0, 3),
        after=st.integers(0, 3),
        chunk=st.integers(1, 17),
        seed=st.integers(0, 1000),
    )
    def check(words, final_newline, before, after, chunk, seed):
        rng = random.Random(seed)
        text = "\n".join(w * rng.randint(1, 3) for w in words).encode()
        if final_newline and text:
            text += b"\n"
        monkeypatch.setattr(_grep, "CHUNK", chunk)
        scan = _grep.FileScan(matcher, want=1000, before=before, after=after, max_line=1 << 20, cancelled=None)
        stream = iter([text[i : i + chunk] for i in range(0, len(text), chunk)] + [b""])
        scan.run(lambda size: next(stream), chunk)
        got = [(h.line, h.content, h.before or [], h.after or []) for h in scan.hits]
        assert got == _naive(text, b"ab", before, after), (text, before, after, chunk)
        assert scan.count == len(got)

    check()


@pytest.mark.parametrize("pattern", ["needle", "^needle", "needle$", "^$", r"\Aneedle", r"needle\z", "e+d", "x*"])
def test_small_files_searched_in_batches_give_what_one_by_one_would(fs, root, pattern):
    import re

    from entropic_mcp_filesystem import _grep

    texts = {}
    for i in range(300):  # several batches, matches at their first, middle and last files
        body = f"line {i}\n" * (i % 5)
        if i % 37 in (0, 18, 36):
            body += "needle\n" if i % 2 else "say needle"  # some files end without a newline
        if i % 50 == 7:
            body += "\n\n"
        texts[f"d{i // 40}/f{i:03}.txt"] = body
    for name, body in texts.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(body)
    (root / "d0" / "bin.dat").write_bytes(b"needle\x00\x01")
    expected = []
    flags = re.MULTILINE
    regex = re.compile(pattern.replace(r"\z", r"\Z"), flags)
    for name in sorted(texts):
        lines = texts[name].split("\n") if texts[name] else []  # an empty file has no lines
        if texts[name].endswith("\n"):
            lines = lines[:-1]
        whole = texts[name]
        for number, line in enumerate(lines, 1):
            if pattern.startswith(r"\A") or pattern.endswith(r"\z"):
                start = sum(len(x) + 1 for x in lines[: number - 1])
                if any(start <= m.start() <= start + len(line) for m in regex.finditer(whole)):
                    expected.append((name, number))
            elif re.search(pattern, line):
                expected.append((name, number))
    old = _grep.BATCH_BYTES
    try:
        for size in (old, 64):  # batched, and (nearly) one file at a time
            _grep.BATCH_BYTES = size
            found = fs.ok("grep", {"pattern": pattern, "head_limit": 10_000}, conversation=f"c{size}")
            got = sorted((m["path"], m["line"]) for m in found if "path" in m and "line" in m)
            assert got == sorted(expected), (pattern, size)
    finally:
        _grep.BATCH_BYTES = old
