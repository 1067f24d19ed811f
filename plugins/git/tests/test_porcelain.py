"""The parsers of git's machine formats, on hand-written records (the tool tests cover real git)."""

from __future__ import annotations

from entropic_mcp_git._porcelain import parse_branches, parse_log, parse_status

SHA = "0" * 40


def _z(*records: str) -> bytes:
    return "".join(f"{r}\x00" for r in records).encode()


def test_status_headers_entries_and_odd_paths():
    data = _z(
        f"# branch.oid {SHA}",
        "# branch.head feature/x",
        "# branch.upstream origin/feature/x",
        "# branch.ab +3 -0",
        f"1 M. N... 100644 100644 100644 {SHA} {SHA} dir with space/ü.txt",
        f"1 .T N... 100644 100644 120000 {SHA} {SHA} link",
        f"2 C. N... 100644 100644 100644 {SHA} {SHA} C75 copy -> of.txt",
        "orig.txt",
        f"u AA N... 000000 100644 100644 100644 {SHA} {SHA} {SHA} both.txt",
        f"u DU N... 100644 000000 100644 100644 {SHA} {SHA} {SHA} gone.txt",
        "? new file.txt",
        "! ignored.log",
    )
    assert parse_status(data) == {
        "branch": "feature/x",
        "upstream": "origin/feature/x",
        "ahead": 3,
        "behind": 0,
        "staged": [
            {"path": "dir with space/ü.txt", "status": "modified"},
            {"path": "copy -> of.txt", "status": "copied", "from": "orig.txt"},
        ],
        "unstaged": [{"path": "link", "status": "type_changed"}],
        "untracked": ["new file.txt"],
        "conflicted": [
            {"path": "both.txt", "status": "both_added"},
            {"path": "gone.txt", "status": "deleted_by_us"},
        ],
    }


def test_status_cut_by_the_read_cap_drops_the_partial_record_and_says_so():
    whole = _z("# branch.head main", "? a.txt", "? b.txt")
    result = parse_status(whole[:-4], truncated=True)
    assert result["untracked"] == ["a.txt"]
    assert result["truncated"] is True


def test_log_records_keep_separators_in_subjects_and_drop_a_cut_record():
    record = f"{SHA}\x1fAda\x1fada@example.com\x1f2024-01-02T03:04:05+00:00\x1fsubject\x1fwith unit separator"
    data = f"{record}\x00{record}".encode()
    commits = parse_log(data)
    assert len(commits) == 2
    assert commits[0]["subject"] == "subject\x1fwith unit separator"
    assert parse_log(data[:-10], truncated=True) == commits[:1]
    assert parse_log(b"") == []


def test_log_fields_are_utf8_with_invalid_bytes_replaced_within_their_own_record():
    # a multi-byte sequence cut short right before the record separator
    first = f"{SHA}\x1fJürgen\x1fj@example.com\x1f2024-01-02T03:04:05+00:00\x1fcut ".encode() + b"\xe2\x82"
    second = f"{SHA}\x1fAda\x1fada@example.com\x1f2024-01-02T03:04:05+00:00\x1fok".encode()
    commits = parse_log(first + b"\x00" + second + b"\x00")
    assert commits[0]["author"] == "Jürgen"
    assert commits[0]["subject"] == "cut \ufffd"
    assert commits[1]["subject"] == "ok"


def test_branches_skip_symbolic_refs_and_shorten_names():
    data = b"refs/heads/main\x00\nrefs/remotes/origin/HEAD\x00refs/remotes/origin/main\nrefs/remotes/origin/main\x00\n"
    assert parse_branches(data) == ["main", "origin/main"]
