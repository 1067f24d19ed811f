"""Step 7 of confinement, deterministically: opening never follows a link swapped in after the check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from entropic_mcp import ToolError
from entropic_mcp_filesystem._fsio import Location, open_dir, open_directory, open_regular, read_all, write_atomic


@pytest.fixture
def swapped(tmp_path: Path, root: Path) -> Path:
    """root/d is a link to outside/ — as if swapped in after confine saw a real directory."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("secret\n")
    (root / "d").symlink_to(outside)
    (root / "f_link").symlink_to(outside / "f.txt")
    (root / "dangling").symlink_to(outside / "new.txt")
    return outside


def loc(root: Path, *parts: str) -> Location:
    return Location(base=root, parts=parts, display="/".join(parts))


def code_of(action) -> str:
    with pytest.raises(ToolError) as caught:
        action()
    return caught.value.code


def test_read_through_a_swapped_directory_is_refused(root, swapped):
    assert code_of(lambda: open_regular(loc(root, "d", "f.txt"))) == "unsafe_path"


def test_read_of_a_swapped_final_link_is_refused(root, swapped):
    assert code_of(lambda: open_regular(loc(root, "f_link"))) == "unsafe_path"


def test_write_through_a_swapped_directory_writes_nothing(root, swapped):
    before = sorted(p.name for p in swapped.iterdir())
    assert code_of(lambda: write_atomic(loc(root, "d", "new.txt"), lambda existing: b"x")) == "unsafe_path"
    assert code_of(lambda: write_atomic(loc(root, "d", "sub", "new.txt"), lambda existing: b"x")) == "unsafe_path"
    assert sorted(p.name for p in swapped.iterdir()) == before


def test_write_over_a_swapped_final_link_or_dangling_link_is_refused(root, swapped):
    assert code_of(lambda: write_atomic(loc(root, "f_link"), lambda existing: b"x")) == "unsafe_path"
    assert code_of(lambda: write_atomic(loc(root, "dangling"), lambda existing: b"x")) == "unsafe_path"
    assert (swapped / "f.txt").read_text() == "secret\n" and not (swapped / "new.txt").exists()


def test_listing_a_swapped_directory_is_refused(root, swapped):
    assert code_of(lambda: open_directory(loc(root, "d"))) == "unsafe_path"


def test_creating_parents_never_follows_a_link(root, swapped):
    with pytest.raises(OSError) as caught:
        open_dir(root, ("d", "made"), create=True)
    assert caught.value.errno == 40  # ELOOP
    assert not (swapped / "made").exists()


def test_refusing_render_creates_no_directories(root):
    def refuse(existing):
        raise ToolError("nope", "refused")

    assert code_of(lambda: write_atomic(loc(root, "a", "b", "c.txt"), refuse)) == "nope"
    assert not (root / "a").exists()


def test_parent_that_is_a_file_is_not_found(root):
    (root / "file").write_text("x")
    assert code_of(lambda: open_regular(loc(root, "file", "x"))) == "not_found"
    assert code_of(lambda: write_atomic(loc(root, "file", "x"), lambda existing: b"x")) == "not_found"


def test_plain_files_open_and_write(root):
    written = write_atomic(loc(root, "p", "q.txt"), lambda existing: b"hello")
    assert written.created and written.size == 5
    fd, st = open_regular(loc(root, "p", "q.txt"))
    assert read_all(fd) == b"hello" and st.st_size == 5
    seen = []
    write_atomic(loc(root, "p", "q.txt"), lambda existing: seen.append(existing.data) or b"again")
    assert seen == [b"hello"] and (root / "p" / "q.txt").read_bytes() == b"again"
    assert os.listdir(root / "p") == ["q.txt"]
