"""read_file and read_files have their own 64 KiB result budget above the pipeline's 16 KiB cap."""

from __future__ import annotations

import re

from entropic_mcp_filesystem._settings import READ_RESULT_BYTES

SOURCE_LINE = "    value = compute(alpha, beta)  # a typical line\n"


def test_a_page_under_the_default_cap_is_the_read_budget_not_16_kib(make, root):
    fs = make(result_cap=16384)
    (root / "big.py").write_text(SOURCE_LINE * 2000)
    text = fs.ok("read_file", {"path": "big.py"})
    assert 16384 < len(text.encode()) <= READ_RESULT_BYTES
    last = text.rsplit("\n", 1)[-1]
    shown = re.match(r"\[lines 1-(\d+) of 2000; more follow: call again with offset=(\d+)\]", last)
    assert shown and int(shown[2]) == int(shown[1]) + 1 and int(shown[1]) > 1000
    following = fs.ok("read_file", {"path": "big.py", "offset": int(shown[2])})
    assert following.startswith(SOURCE_LINE) and following.endswith(
        "[end of file: lines " + shown[2] + "-2000 of 2000]"
    )
    # Other tools keep the configured cap.
    assert len(fs.ok("grep", {"pattern": "value", "format": "text"}).encode()) <= 16384


def test_the_description_states_the_real_page_size(make):
    fs = make(result_cap=16384)
    listed = {tool["name"]: tool for tool in fs.server.list_tools()}
    assert "2,000 lines and 65,536 bytes per call" in listed["read_file"]["description"]
    assert "one budget of 65,536 bytes" in listed["read_files"]["description"]
    small = make({"max_read_bytes": 8192}, result_cap=16384)
    assert (
        "2,000 lines and 8,192 bytes per call"
        in {t["name"]: t for t in small.server.list_tools()}["read_file"]["description"]
    )


def test_read_files_cut_names_the_file_and_the_read_file_call_that_continues_it(make, root):
    fs = make(result_cap=16384)
    for name in ("a.py", "b.py"):
        (root / name).write_text(SOURCE_LINE * 2000)
    text = fs.ok("read_files", {"paths": ["a.py", "b.py"]})
    assert len(text.encode()) <= READ_RESULT_BYTES
    assert "call again with offset" not in text  # read_files has no offset argument
    assert re.search(r"\[lines 1-\d+ of 2000; more follow: filesystem.read_file offset=\d+\]", text)


def test_read_files_cut_by_the_budget_continues_each_file_where_its_lines_end(make, root):
    """Twenty files at the 4 KiB floor share overrun the 64 KiB budget: whole sections first, then
    the one cut, whose note names the read_file offset of its first line not shown."""
    names = [f"m{n:02}.py" for n in range(20)]
    body = [f"{n}: " + ("" if n % 7 == 0 else "    value = compute(alpha, beta)") for n in range(1, 201)]
    for name in names:
        (root / name).write_text("\n".join(body) + "\n")
    text = make(result_cap=16384).ok("read_files", {"paths": names})
    assert len(text.encode()) <= READ_RESULT_BYTES
    *shown, note = text.split("\n")
    cut = re.fullmatch(
        r"\[the page was cut to fit max_result_bytes \(65536 bytes\); continue (m\d\d\.py) with "
        r"filesystem.read_file offset=(\d+); read the other files alone\]",
        note,
    )
    assert cut, note
    lines = shown[shown.index(f"==> {cut[1]} <==") + 1 :]
    assert lines == body[: len(lines)] and int(cut[2]) == len(lines) + 1
