"""filesystem.read_file: lines (numbered on request), paging, long lines, notes, errors, anchors, media."""

from __future__ import annotations

import base64

import pytest
from entropic_mcp.directives import ContextAnchor


def json_read(fs, **args):
    return fs.ok("read_file", {"format": "json", **args})


def test_lines_are_the_files_own_text_without_numbers_by_default(fs, root):
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 13)))
    assert fs.ok("read_file", {"path": "a.txt"}).split("\n") == [f"line {i}" for i in range(1, 13)]
    page = fs.ok("read_file", {"path": "a.txt", "offset": 4, "limit": 2}).split("\n")
    assert page == ["line 4", "line 5", "[lines 4-5 of 12; more follow: call again with offset=6]"]


def test_line_numbers_like_cat_n_without_its_padding_on_request(fs, root):
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 13)))
    text = fs.ok("read_file", {"path": "a.txt", "line_numbers": True})
    assert text.split("\n") == [f"{i}\tline {i}" for i in range(1, 13)]
    page = fs.ok("read_file", {"path": "a.txt", "offset": 11, "line_numbers": True})
    assert page == "11\tline 11\n12\tline 12\n[end of file: lines 11-12 of 12]"
    assert json_read(fs, path="a.txt", line_numbers=True)["lines"][0] == "line 1"  # JSON has no numbers
    assert fs.error("read_file", {"path": "a.txt", "line_numbers": "yes"})["error"] == "invalid_args"


def test_the_setting_numbers_lines_by_default_and_the_argument_overrides_it(make, root):
    fs = make({"read_line_numbers": True})
    (root / "a.txt").write_text("x\ny\n")
    assert fs.ok("read_file", {"path": "a.txt"}) == "1\tx\n2\ty"
    assert fs.ok("read_file", {"path": "a.txt", "line_numbers": False}) == "x\ny"
    assert fs.ok("read_files", {"paths": ["a.txt"]}) == "==> a.txt <==\n1\tx\n2\ty"
    listed = {tool["name"]: tool for tool in fs.server.list_tools()}
    schema = listed["read_file"]["inputSchema"]["properties"]["line_numbers"]
    assert schema["description"].endswith("(default true).")
    default = {tool["name"]: tool for tool in make().server.list_tools()}["read_files"]
    assert default["inputSchema"]["properties"]["line_numbers"]["description"].endswith("(default false).")


def test_json_form_is_an_ordered_array(fs, root):
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 13)))
    data = json_read(fs, path="a.txt")
    assert data == {
        "path": "a.txt",
        "total": 12,
        "start": 1,
        "lines": [f"line {i}" for i in range(1, 13)],
        "truncated": False,
        "next_offset": None,
    }


def test_default_page_is_2000_lines_and_says_where_to_continue(fs, root):
    (root / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    text = fs.ok("read_file", {"path": "big.txt"})
    lines = text.split("\n")
    assert lines[0] == "1" and lines[1999] == "2000"
    assert lines[2000] == "[lines 1-2000 of 2500; more follow: call again with offset=2001]"
    rest = fs.ok("read_file", {"path": "big.txt", "offset": 2001}).split("\n")
    assert rest[0] == "2001" and rest[499] == "2500"
    assert rest[500] == "[end of file: lines 2001-2500 of 2500]"


def test_page_size_is_configurable(make, root):
    fs = make({"read_page_lines": 3})
    (root / "a.txt").write_text("a\nb\nc\nd\n")
    assert fs.ok("read_file", {"path": "a.txt"}).split("\n")[-1] == (
        "[lines 1-3 of 4; more follow: call again with offset=4]"
    )


def test_offset_past_the_end_and_empty_file_say_so(fs, root):
    (root / "a.txt").write_text("x\ny\n")
    (root / "e.txt").write_text("")
    assert fs.ok("read_file", {"path": "a.txt", "offset": 9}) == (
        "[offset 9 is past the end of a.txt, which has 2 lines; read from an offset between 1 and 2]"
    )
    assert json_read(fs, path="a.txt", offset=9)["note"] == "offset 9 is past the end of the file (2 lines)"
    assert fs.ok("read_file", {"path": "e.txt"}) == "[e.txt is empty]"
    assert json_read(fs, path="e.txt")["lines"] == []


def test_offset_and_limit_select_a_window_with_next_offset(fs, root):
    (root / "a.txt").write_text("".join(f"{i}\n" for i in range(1, 21)))
    data = json_read(fs, path="a.txt", offset=5, limit=3)
    assert data["lines"] == ["5", "6", "7"]
    assert (data["start"], data["total"], data["truncated"], data["next_offset"]) == (5, 20, True, 8)
    tail = json_read(fs, path="a.txt", offset=19, limit=5)
    assert tail["lines"] == ["19", "20"] and tail["next_offset"] is None and not tail["truncated"]


def test_file_over_max_read_bytes_returns_first_part_and_rest_by_offset(make, root):
    fs = make({"max_read_bytes": 1024})
    lines = [f"{i:04d} " + "x" * 95 for i in range(1, 51)]  # 100 bytes + newline each
    (root / "big.txt").write_text("\n".join(lines) + "\n")
    first = json_read(fs, path="big.txt")
    assert first["truncated"] is True and first["total"] == 50
    assert first["lines"] == lines[: len(first["lines"])] and 0 < len(first["lines"]) < 50
    collected, offset = list(first["lines"]), first["next_offset"]
    while offset is not None:
        page = json_read(fs, path="big.txt", offset=offset)
        assert page["start"] == offset
        collected += page["lines"]
        offset = page["next_offset"]
    assert collected == lines


def test_long_line_is_cut_with_a_marker_and_continues_by_column(make, root):
    fs = make({"max_line_chars": 100})
    line = "".join(chr(ord("a") + i % 26) for i in range(250))
    (root / "min.js").write_text(line + "\nsecond\n")
    text = fs.ok("read_file", {"path": "min.js"}).split("\n")
    assert text[0] == (f"{line[:100]} [… line continues: 150 more bytes; read them with offset=1, limit=1, column=101]")
    assert text[1] == "second"
    more = fs.ok("read_file", {"path": "min.js", "offset": 1, "limit": 1, "column": 101}).split("\n")
    assert more[0].startswith(f"{line[100:200]} [… line continues: 50 more bytes;") and "column=201" in more[0]
    last = fs.ok("read_file", {"path": "min.js", "offset": 1, "limit": 1, "column": 201}).split("\n")
    assert last[0] == line[200:]
    data = json_read(fs, path="min.js")
    assert data["lines"] == [line[:100], "second"] and data["line_truncated"] is True


def test_one_huge_line_is_linear_and_bounded(fs, root):
    # 64 MiB on one line: the page keeps ~2,000 characters of it, and the stream is read once.
    with open(root / "huge.txt", "wb") as handle:
        for _ in range(64):
            handle.write(b"q" * (1 << 20))
        handle.write(b"\nend\n")
    text = fs.ok("read_file", {"path": "huge.txt"}).split("\n")
    assert text[0].startswith("q" * 2000 + " [… line continues: ")
    assert text[1] == "end"


def test_crlf_and_missing_final_newline(fs, root):
    (root / "w.txt").write_bytes(b"a\r\nb\r\nc")
    data = json_read(fs, path="w.txt")
    assert data["lines"] == ["a", "b", "c"] and data["total"] == 3
    assert fs.ok("read_file", {"path": "w.txt"}) == "a\nb\nc"


def test_invalid_utf8_is_replaced_not_refused(fs, root):
    (root / "latin.txt").write_bytes(b"caf\xe9\n")
    assert json_read(fs, path="latin.txt")["lines"] == ["caf\ufffd"]


def test_not_found_names_list_directory(fs):
    error = fs.error("read_file", {"path": "nope.txt"})
    assert error["error"] == "not_found" and "filesystem.list_directory" in error["message"]


def test_directory_is_refused(fs, root):
    (root / "d").mkdir()
    assert fs.error("read_file", {"path": "d"})["error"] == "is_directory"
    assert fs.error("read_file", {"path": "."})["error"] == "is_directory"


def test_binary_file_is_refused(fs, root):
    (root / "b.bin").write_bytes(b"\x7fELF\x00\x00\x01")
    assert fs.error("read_file", {"path": "b.bin"})["error"] == "binary_file"


def test_bad_format_is_invalid_args(fs, root):
    (root / "a.txt").write_text("x\n")
    assert fs.error("read_file", {"path": "a.txt", "format": "yaml"})["error"] == "invalid_args"


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
    assert fs.ok("read_file", {"path": "a.txt"}) == "two"


def test_tilde_is_a_literal_character(fs, root):
    (root / "~").mkdir()
    (root / "~" / "x.txt").write_text("home?\n")
    assert json_read(fs, path="~/x.txt")["lines"] == ["home?"]


@pytest.fixture
def small_cap(monkeypatch):
    """read_file's own 64 KiB budget off, so small caps apply: the fitting is what these tests check
    (test_fs_read_budget.py checks the budget)."""
    from entropic_mcp_filesystem import _read

    monkeypatch.setattr(_read.ReadFile, "result_budget_bytes", None)
    monkeypatch.setattr(_read.ReadFiles, "result_budget_bytes", None)


def test_page_fits_the_pipeline_result_cap_and_rest_is_reachable(make, root, small_cap):
    fs = make(result_cap=2000)
    lines = [f"{i:04d} " + "q" * 60 for i in range(1, 201)]
    (root / "long.txt").write_text("\n".join(lines) + "\n")
    for form, numbered in (("json", False), ("text", False), ("text", True)):
        collected, offset = [], 1
        while offset is not None:
            args = {"path": "long.txt", "offset": offset, "format": form, "line_numbers": numbered}
            outcome, page = fs.call("read_file", args)
            assert len(outcome.response.result.encode()) <= 2000 and "[... truncated" not in outcome.response.result
            if form == "json":
                collected += page["lines"]
                offset = page["next_offset"]
                continue
            *rows, note = page.split("\n")
            assert note.startswith(("[lines ", "[end of file")), note
            if numbered:
                assert [row.split("\t", 1)[0] for row in rows] == [str(n) for n in range(offset, offset + len(rows))]
                rows = [row.split("\t", 1)[1] for row in rows]
            collected += rows
            offset = int(note.rsplit("offset=", 1)[1].rstrip("]")) if "offset=" in note else None
        assert collected == lines, (form, numbered)


def test_a_text_page_cut_afterwards_continues_at_the_first_line_not_shown():
    """fit_text counts the page's lines it keeps (unnumbered lines carry no number to parse back),
    so blank lines and lines that look like notes do not move the offset it names."""
    from entropic_mcp_filesystem._read import Page, fit_text, render_text

    texts = ["", "[lines 1-2 of 9]", *("w" * 50 for _ in range(38))]
    page = Page(first=3, texts=texts, rests={}, total=60, next_offset=43, size=0, digest=None)
    for numbered in (False, True):
        text = render_text(page, display="f", offset=3, column=1, numbered=numbered)
        cut = fit_text(text, 1000, page=page).split("\n")
        assert len("\n".join(cut).encode()) <= 1000
        shown = len(cut) - 1
        assert 2 < shown < len(texts)
        assert cut[-1].endswith(f"call again with offset={3 + shown}]"), cut[-1]
    whole = render_text(page, display="f", offset=3, column=1)
    only_note_cut = fit_text(whole, len(whole.encode()) - 1 + 200, page=page)
    assert only_note_cut.endswith("call again with offset=43]")


def test_read_files_cut_in_its_first_file_continues_at_the_first_line_not_shown(make, root, small_cap):
    # A 3,000-byte cap: the first file's page fills it less 240 bytes, and its 400-byte path in the
    # header and the note overrun it, so the result is cut inside the first file.
    fs = make(result_cap=3000)
    path = "/".join(("d" * 100, "e" * 100, "g" * 100, "f" * 100 + ".txt"))
    (root / path).parent.mkdir(parents=True)
    body = [f"{n}: " + ("" if n % 5 == 0 else "x" * 40) for n in range(1, 201)]
    (root / path).write_text("\n".join(body) + "\n")
    (root / "b.txt").write_text("b\n")
    for numbered in (False, True):
        text = fs.ok("read_files", {"paths": [path, "b.txt"], "line_numbers": numbered})
        assert len(text.encode()) <= 3000
        header, *shown, note = text.split("\n")
        assert header == f"==> {path} <==" and "b.txt" not in text
        if numbered:
            shown = [row.split("\t", 1)[1] for row in shown]
        assert shown == body[: len(shown)]
        assert note.endswith(
            f"continue {path} with filesystem.read_file offset={len(shown) + 1}; read the other files alone]"
        )


def test_one_line_bigger_than_the_result_cap(make, root, small_cap):
    fs = make(result_cap=1000)
    (root / "one.txt").write_text("z" * 5000 + "\nnext\n")
    outcome, page = fs.call("read_file", {"path": "one.txt", "format": "json"})
    assert len(outcome.response.result.encode()) <= 1000
    assert page["line_truncated"] is True and page["next_offset"] == 2 and page["lines"][0].startswith("zzz")


def test_hard_linked_file_is_refused_unless_allowed(make, root, tmp_path):
    outside = tmp_path / "outside-key.txt"
    outside.write_text("TOPSECRET\n")
    (root / "innocent.txt").hardlink_to(outside)
    fs = make()
    error = fs.error("read_file", {"path": "innocent.txt"})
    assert error["error"] == "hard_link" and "allow_hard_links" in error["message"]
    assert "TOPSECRET" not in str(error)
    assert make({"allow_hard_links": True}).ok("read_file", {"path": "innocent.txt"}) == "TOPSECRET"


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(20)


@pytest.mark.parametrize(
    ("name", "data", "mime"),
    [
        ("a.png", PNG, "image/png"),
        ("b.jpg", b"\xff\xd8\xff\xe0" + bytes(30), "image/jpeg"),
        ("c.gif", b"GIF89a" + bytes(30), "image/gif"),
        ("d.webp", b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(20), "image/webp"),
    ],
)
def test_images_are_returned_as_image_content(fs, root, name, data, mime):
    from entropic_mcp_filesystem._media import supports_content

    (root / name).write_bytes(data)
    outcome, info = fs.call("read_file", {"path": name})
    assert not outcome.response.is_error, outcome.response.result
    assert info == {"path": name, "mime_type": mime, "size": len(data)}
    if supports_content():
        [block] = outcome.response.content
        assert block == {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": mime}


def test_pdf_is_returned_as_an_embedded_resource(fs, root):
    from entropic_mcp_filesystem._media import supports_content

    data = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
    (root / "doc.pdf").write_bytes(data)
    outcome, info = fs.call("read_file", {"path": "doc.pdf"})
    assert info["mime_type"] == "application/pdf"
    if supports_content():
        [block] = outcome.response.content
        assert block["type"] == "resource" and block["resource"]["mimeType"] == "application/pdf"
        assert base64.b64decode(block["resource"]["blob"]) == data
        assert block["resource"]["uri"] == (root / "doc.pdf").as_uri()


def test_media_over_the_limit_is_refused_without_reading(make, root):
    fs = make({"max_media_bytes": 1024})
    (root / "big.png").write_bytes(PNG + bytes(5000))
    error = fs.error("read_file", {"path": "big.png"})
    assert error["error"] == "too_large" and "max_media_bytes" in error["message"]


def test_streamed_pages_agree_with_naive_line_splitting(monkeypatch):
    """Tiny chunks put line ends, CRs and long lines across chunk boundaries."""
    import io

    from entropic_mcp_filesystem import _read
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(
        lines=st.lists(st.text("abc\r", max_size=30), max_size=12),
        final_newline=st.booleans(),
        offset=st.integers(1, 14),
        limit=st.integers(1, 5),
        max_chars=st.integers(1, 12),
        column=st.integers(1, 8),
        chunk=st.integers(1, 9),
    )
    def check(lines, final_newline, offset, limit, max_chars, column, chunk):
        text = "\n".join(lines) + ("\n" if final_newline and lines else "")
        data = text.encode()
        monkeypatch.setattr(_read, "CHUNK", chunk)
        page = _read.read_page(
            io.BytesIO(data),
            offset=offset,
            limit=limit,
            budget=1 << 20,
            display="f",
            max_chars=max_chars,
            column=column,
        )
        rows = text.split("\n")
        if text.endswith("\n") or not text:
            rows = rows[:-1]
        assert page.total == len(rows)
        expected = []
        for number in range(offset, min(len(rows), offset + limit - 1) + 1):
            row = rows[number - 1]
            row = row[:-1] if row.endswith("\r") else row
            skip = column - 1 if number == offset else 0
            shown = row[skip : skip + max_chars]
            expected.append((number, shown, max(0, len(row) - skip - len(shown))))
        assert [(x.number, x.text, x.rest) for x in page.lines] == expected, (text, offset, limit)
        more = offset + limit - 1 < len(rows)
        assert page.next_offset == (offset + limit if more and expected else None)

    check()


# -- pages of a settled file: the line index seeks, the tracker keeps the stat identity ----------


def _settled_text_file(root, monkeypatch):
    import os

    from entropic_mcp_filesystem import _tracker

    monkeypatch.setattr(_tracker, "RACY_NS", 0)
    lines = []
    for n in range(1, 1201):
        if n % 97 == 0:
            lines.append("é" * 3000)  # longer than max_line_chars: cut, with a marker
        elif n % 13 == 0:
            lines.append(f"crlf line {n}\r")
        else:
            lines.append(f"{n} ünïcode ✓ " + "x" * (n % 50))
    path = root / "mixed.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
    probe = root / ".probe"
    probe.write_bytes(b"")
    while probe.stat().st_ctime_ns <= path.stat().st_ctime_ns:
        os.utime(probe)
    probe.unlink()
    return path, [line.removesuffix("\r") for line in lines]


def _page_through(harness, **extra):
    offset, got, calls = 1, [], 0
    while offset:
        data = harness.ok("read_file", {"path": "mixed.txt", "offset": offset, "format": "json", **extra})
        assert data["start"] == offset and data["total"] == 1200
        got.extend(data["lines"])
        offset = data["next_offset"] or 0
        calls += 1
    return got, calls


def test_paging_a_settled_file_returns_every_line_once_through_the_line_index(make, root, monkeypatch, small_cap):
    _, expected = _settled_text_file(root, monkeypatch)
    harness = make(result_cap=16384)
    first, calls = _page_through(harness)
    assert calls > 3  # the byte budget cut the pages
    assert [line[:2000] for line in expected] == first
    again, _ = _page_through(harness, limit=37)  # other page ends: seeks from the nearest known line start
    assert again == first
    assert harness.server.tracker.get("c1", str(root / "mixed.txt")).digest is None


def test_a_page_of_a_settled_file_matches_the_same_page_read_whole(make, root, monkeypatch):
    from entropic_mcp_filesystem import _tracker

    _settled_text_file(root, monkeypatch)
    harness = make(result_cap=16384)
    _page_through(harness)  # fills the line index
    seek = [harness.ok("read_file", {"path": "mixed.txt", "offset": n, "limit": 50}) for n in (1, 388, 777, 1199)]
    monkeypatch.setattr(_tracker, "RACY_NS", 10**20)  # every read streams and hashes the whole file
    fresh = make(result_cap=16384)
    whole = [fresh.ok("read_file", {"path": "mixed.txt", "offset": n, "limit": 50}) for n in (1, 388, 777, 1199)]
    assert seek == whole


def test_a_text_page_fills_the_result_cap_without_being_cut_afterwards(make, root, small_cap):
    (root / "big.txt").write_text("".join(f"line {n} " + "y" * 60 + "\n" for n in range(1, 5001)))
    text = make(result_cap=16384).ok("read_file", {"path": "big.txt"})
    assert len(text.encode()) <= 16384
    assert "max_result_bytes" not in text  # cut by the page budget, not afterwards by fit_text
    assert text.rsplit("\n", 1)[1].startswith("[lines 1-")
    assert len(text.encode()) > 16384 - 600  # the page is full, not a quarter of the cap


def test_the_byte_budget_cuts_a_page_of_short_lines_where_counting_line_by_line_would(monkeypatch):
    """The split fast path sums line costs in bulk: the page it cuts at the budget and the line
    limit is the one the line-by-line rule gives (cost = the line's bytes + 1, and the number's
    width + 1 more when the page is numbered)."""
    import io

    from entropic_mcp_filesystem import _read
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(
        lines=st.lists(st.text("ab\r\u00e9", max_size=10), max_size=30),
        offset=st.integers(1, 8),
        limit=st.integers(1, 40),
        budget=st.integers(1, 120),
        chunk=st.sampled_from([3, 7, 1 << 20]),
        numbered=st.booleans(),
    )
    def check(lines, offset, limit, budget, chunk, numbered):
        text = "".join(f"{line}\n" for line in lines)
        monkeypatch.setattr(_read, "CHUNK", chunk)
        page = _read.read_page(
            io.BytesIO(text.encode()),
            offset=offset,
            limit=limit,
            budget=budget,
            display="f",
            max_chars=40,
            numbered=numbered,
        )
        overhead = len(str(offset + limit)) + 2 if numbered else 1
        expected, used = [], 0
        for row in lines[offset - 1 :]:
            row = row[:-1] if row.endswith("\r") else row
            cost = len(row.encode()) + overhead
            if (expected and used + cost > budget) or len(expected) == limit:
                break
            expected.append(row)
            used += cost
        assert page.texts == expected
        following = offset + len(expected)
        assert page.next_offset == (following if expected and following <= len(lines) else None)

    check()
