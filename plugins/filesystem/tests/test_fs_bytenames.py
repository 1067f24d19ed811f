"""Names that are not UTF-8 on disk: shown with U+FFFD, and the shown name works as an argument."""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_CALLS = itertools.count()


def _make(root, name: bytes, data: bytes = b"needle\n") -> None:
    with open(os.path.join(os.fsencode(root), name), "wb") as handle:
        handle.write(data)


def _shown(name: bytes) -> str:
    return name.decode("utf-8", "replace")


def test_every_listing_tool_shows_the_name_with_replacement_characters(fs, root):
    os.mkdir(os.path.join(os.fsencode(root), b"d\xfe"))
    _make(root, b"bad\xffname.txt")
    _make(root, b"d\xfe/x.txt")
    want = ["bad\ufffdname.txt", "d\ufffd/x.txt"]
    assert fs.ok("glob", {"pattern": "**/*"}) == want
    assert fs.ok("glob", {"pattern": "**/*", "format": "text"}) == "\n".join(want)
    assert [m["path"] for m in fs.ok("grep", {"pattern": "needle"})] == want
    assert fs.ok("grep", {"pattern": "needle", "output_mode": "files_with_matches"}) == want
    assert [m["path"] for m in fs.ok("grep", {"pattern": "needle", "output_mode": "count"})] == want
    assert fs.ok("grep", {"pattern": "needle", "format": "text"}).splitlines()[0] == "bad\ufffdname.txt:1:needle"
    assert [e["path"] for e in fs.ok("list_directory", {"recursive": True})] == [want[0], "d\ufffd", want[1]]


def test_a_shown_name_round_trips_through_read_edit_move_and_delete(fs, root):
    os.mkdir(os.path.join(os.fsencode(root), b"d\xfe"))
    _make(root, b"d\xfe/caf\xe9.txt", b"hello\n")
    shown = fs.ok("glob", {"pattern": "**/*.txt"})[0]
    assert shown == "d\ufffd/caf\ufffd.txt"
    assert fs.ok("file_info", {"path": shown})["type"] == "file"
    assert fs.ok("read_file", {"path": shown}) == "hello"
    fs.ok("edit_file", {"path": shown, "old_string": "hello", "new_string": "bye"})
    with open(os.path.join(os.fsencode(root), b"d\xfe/caf\xe9.txt"), "rb") as handle:
        assert handle.read() == b"bye\n"
    assert fs.ok("list_directory", {"path": "d\ufffd"})[0]["name"] == "caf\ufffd.txt"
    fs.ok("move_file", {"source": shown, "destination": "plain.txt"})
    assert (root / "plain.txt").read_bytes() == b"bye\n"
    assert os.listdir(os.path.join(os.fsencode(root), b"d\xfe")) == []
    assert fs.ok("delete_file", {"path": "d\ufffd"})["deleted"] == "directory"
    assert not os.path.lexists(os.path.join(os.fsencode(root), b"d\xfe"))


def test_two_names_shown_alike_are_refused_with_their_bytes(fs, root):
    _make(root, b"a\xff.txt")
    _make(root, b"a\xfe.txt")
    error = fs.error("read_file", {"path": "a\ufffd.txt"})
    assert error["error"] == "ambiguous_path"
    assert "a\\xfe.txt" in error["message"] and "a\\xff.txt" in error["message"]


def test_a_literal_replacement_character_name_is_still_its_own_file(fs, root):
    _make(root, b"a\xff.txt", b"bytes\n")
    (root / "a\ufffd.txt").write_text("literal\n")
    assert fs.ok("read_file", {"path": "a\ufffd.txt"}) == "literal"


def test_a_link_behind_a_shown_name_is_confined(fs, root, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret").write_text("s\n")
    os.symlink(outside, os.path.join(os.fsencode(root), b"l\xff"))
    assert fs.error("read_file", {"path": "l\ufffd/secret"})["error"] == "outside_root"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.binary(min_size=1, max_size=12).filter(
        lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
    )
)
def test_any_byte_name_reads_back_by_its_shown_name(fs, root, name):
    for entry in os.listdir(os.fsencode(root)):
        os.unlink(os.path.join(os.fsencode(root), entry))
    _make(root, name, b"x\n")
    conversation = f"c{next(_CALLS)}"  # a fresh conversation: the duplicate guard sees each example anew
    shown = fs.ok("list_directory", {}, conversation=conversation)
    assert isinstance(shown, list), (name, shown)
    assert [e["name"] for e in shown] == [_shown(name)] or name.startswith(b".")
    if not name.startswith(b"."):
        assert fs.ok("read_file", {"path": shown[0]["path"]}, conversation=conversation) == "x"
