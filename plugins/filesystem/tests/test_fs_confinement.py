"""The confinement corpus of reliability.md, for every path-taking tool; the swap race."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "TOPSECRET-outside\n"
REFUSED = {"outside_root_denied", "invalid_args"}


@pytest.fixture
def world(tmp_path: Path, root: Path) -> dict[str, Path]:
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (outside / "dir" / "secret.txt").write_text(SECRET)
    for sibling in ("root2", "root_backup", "rootling"):
        (tmp_path / sibling).mkdir()
        (tmp_path / sibling / "secret.txt").write_text(SECRET)
    (root / "inside.txt").write_text("inside\n")
    (root / "link_file").symlink_to(outside / "secret.txt")
    (root / "link_dir").symlink_to(outside)
    (root / "chain2").symlink_to("../outside/secret.txt")
    (root / "chain1").symlink_to("chain2")
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    (root / "rel_dir").symlink_to("../outside/dir")
    return {"outside": outside, "tmp": tmp_path}


def corpus(root: Path, outside: Path) -> list[str]:
    return [
        "../outside/secret.txt",
        "./../outside/secret.txt",
        "a/../../outside/secret.txt",
        "../../../../../../../../etc/passwd",
        "inside.txt/../../outside/secret.txt",
        "../root2/secret.txt",
        "../root_backup/secret.txt",
        "../rootling/secret.txt",
        str(outside / "secret.txt"),
        "/etc/passwd",
        str(root) + "2/secret.txt",
        str(root) + "ling/secret.txt",
        "link_file",
        "link_dir/secret.txt",
        "link_dir/dir/secret.txt",
        "link_dir",
        "chain1",
        "dangling",
        "rel_dir/secret.txt",
        "rel_dir",
        "link_dir/new.txt",
        "link_dir/newdir/new.txt",
        "inside\x00.txt",
        "",
    ]


def calls_for(path: str) -> list[tuple[str, dict]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "pwned\n"}),
        ("edit_file", {"path": path, "old_string": "TOPSECRET", "new_string": "pwned"}),
        ("edit_file", {"path": path, "insert_line": 0, "new_string": "pwned"}),
        ("list_directory", {"path": path}),
        ("glob", {"pattern": "*", "path": path}),
        ("grep", {"pattern": "TOPSECRET", "path": path}),
        ("file_info", {"path": path}),
        ("delete_file", {"path": path}),
        ("create_directory", {"path": path}),
        ("move_file", {"source": path, "destination": "moved.txt"}),
        ("move_file", {"source": "inside.txt", "destination": path}),
    ]


def snapshot(tmp: Path, root: Path) -> dict[str, str]:
    """Every file outside the project root, with its content (links recorded as targets)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(tmp):
        if Path(dirpath) == root or root in Path(dirpath).parents:
            continue
        for name in filenames + dirnames:
            path = Path(dirpath) / name
            out[str(path)] = (
                os.readlink(path) if path.is_symlink() else ("<dir>" if path.is_dir() else path.read_text())
            )
    return out


@pytest.mark.parametrize("policy", [False, "optional"])
def test_corpus_is_refused_by_every_tool_and_nothing_outside_changes(make, root, world, policy):
    fs = make({"allow_outside_root": policy})
    before = snapshot(world["tmp"], root)
    expected = REFUSED if policy is False else REFUSED | {"outside_root_approval_required"}
    for path in corpus(root, world["outside"]):
        # read_files answers per file: each refused section names its error, and none leaks.
        outcome, text = fs.call("read_files", {"paths": [path, path]})
        assert "TOPSECRET" not in outcome.response.result
        if not outcome.response.is_error:
            codes = {section.split("\n")[1][1:].split(":")[0] for section in text.split("\n\n")}
            assert codes <= expected, (path, text)
        for tool, args in calls_for(path):
            outcome, data = fs.call(tool, args)
            assert outcome.response.is_error, (tool, path, outcome.response.result)
            assert data["error"] in expected, (tool, path, data)
            assert outcome.response.directives == ()
            assert "TOPSECRET" not in outcome.response.result
    assert snapshot(world["tmp"], root) == before


def test_walks_from_the_root_never_follow_links_out(fs, root, world):
    assert fs.ok("grep", {"pattern": "TOPSECRET"}) == []
    found = fs.ok("glob", {"pattern": "**/*"})
    assert "link_dir/secret.txt" not in found and "rel_dir/secret.txt" not in found
    listed = {e["path"]: e["type"] for e in fs.ok("list_directory", {"recursive": True, "max_depth": 5})}
    assert listed["link_dir"] == "symlink" and not any(p.startswith("link_dir/") for p in listed)


def test_symlink_inside_root_pointing_inside_is_followed(fs, root):
    (root / "real").mkdir()
    (root / "real" / "f.txt").write_text("ok\n")
    (root / "alias").symlink_to("real")
    assert fs.ok("read_file", {"format": "json", "path": "alias/f.txt"}) | {"lines": None} == {
        "path": "real/f.txt",
        "total": 1,
        "start": 1,
        "lines": None,
        "truncated": False,
        "next_offset": None,
    }


def test_root_reached_through_a_symlink(make, root, world):
    alias = world["tmp"] / "root_alias"
    alias.symlink_to(root)
    fs = make(at=alias)
    assert fs.server.root == root
    assert fs.ok("read_file", {"format": "json", "path": "inside.txt"})["path"] == "inside.txt"
    assert fs.ok("read_file", {"format": "json", "path": str(alias / "inside.txt")})["path"] == "inside.txt"
    assert fs.error("read_file", {"path": str(alias / ".." / "outside" / "secret.txt")})["error"] in (
        "outside_root_approval_required",
        "not_found",
    )
    fs.ok("write_file", {"path": "made.txt", "content": "x"})
    assert (root / "made.txt").read_text() == "x"


HARD_NAMES = [
    "with space.txt",
    "ünïcödé.txt",
    "100%.txt",
    "%2e%2e.txt",
    "-rf",
    "--help.txt",
    "a'b\"c.txt",
    "tab\there.txt",
    "new\nline.txt",
    "~tilde.txt",
    "*star?.txt",
    "[brackets].txt",
    "{a,b}.txt",
]


@pytest.mark.parametrize("name", HARD_NAMES)
def test_hard_to_spell_names_work_with_every_tool(fs, root, name):
    (root / "d").mkdir()
    rel = f"d/{name}"
    assert fs.ok("write_file", {"path": rel, "content": "hello\n"})["path"] == rel
    assert fs.ok("read_file", {"format": "json", "path": rel})["lines"] == ["hello"]
    assert fs.ok("edit_file", {"path": rel, "old_string": "hello", "new_string": "bye"})["replacements"] == 1
    assert (root / "d" / name).read_text() == "bye\n"
    assert [e["path"] for e in fs.ok("list_directory", {"path": "d"})] == [rel]
    assert fs.ok("glob", {"pattern": "**/*", "path": "d"}) == [rel]
    assert fs.ok("grep", {"pattern": "bye", "path": "d"}) == [{"path": rel, "line": 1, "content": "bye"}]
    assert fs.ok("grep", {"pattern": "bye", "path": rel}) == [{"path": rel, "line": 1, "content": "bye"}]


def _race(fs, root: Path, outside: Path, rounds: int) -> dict[str, int]:
    """Swap root/swap between a real directory and a link to ``outside`` while tools use it."""
    real = root / "swap"
    real.mkdir()
    (real / "f.txt").write_text("inside\n")
    (outside / "f.txt").write_text(SECRET)
    parked = root / ".parked"
    # A separate process, not a thread: a spinning thread would fight the tools for the GIL.
    script = (
        "import os, sys\n"
        "real, parked, outside = sys.argv[1:4]\n"
        "n = 0\n"
        "while True:\n"
        "    try:\n"
        "        os.rename(real, parked); os.symlink(outside, real); os.unlink(real); os.rename(parked, real)\n"
        "    except OSError:\n"
        # write_file makes missing parents: while the directory was parked it may have made a new
        # one in its place, which would wedge this loop (and end the swapping): set it aside.
        "        if os.path.isdir(parked) and os.path.isdir(real) and not os.path.islink(real):\n"
        "            n += 1\n"
        "            try:\n"
        "                os.rename(real, parked + '-made-' + str(n)); os.rename(parked, real)\n"
        "            except OSError:\n"
        "                pass\n"
    )
    swapper = subprocess.Popen([sys.executable, "-c", script, str(real), str(parked), str(outside)])
    codes: dict[str, int] = {}
    try:
        for i in range(rounds):
            for tool, args in (
                ("read_file", {"path": "swap/f.txt"}),
                ("write_file", {"path": f"swap/new{i}.txt", "content": "x\n"}),
                ("write_file", {"path": "swap/f.txt", "content": "inside\n"}),
                ("edit_file", {"path": "swap/f.txt", "old_string": "inside", "new_string": "inside"}),
                ("list_directory", {"path": "swap"}),
                ("grep", {"pattern": "TOPSECRET", "path": "swap"}),
                ("glob", {"pattern": "*", "path": "swap"}),
            ):
                response = fs.direct(tool, args)
                assert "TOPSECRET" not in response.result, (tool, response.result)
                if tool == "list_directory" and not response.is_error:
                    assert "new" not in response.result or "f.txt" in response.result
                code = "ok" if not response.is_error else response.result.split('"')[3]
                codes[code] = codes.get(code, 0) + 1
    finally:
        swapper.kill()
        swapper.wait()
    if parked.exists() and not real.exists():
        os.rename(parked, real)
    return codes


def test_component_swapped_for_symlink_between_check_and_use_never_escapes(fs, root, world):
    outside = world["outside"]
    before = sorted(p.name for p in outside.iterdir())
    codes = _race(fs, root, outside, rounds=150)
    assert sorted(p.name for p in outside.iterdir()) == sorted({*before, "f.txt"})
    assert (outside / "f.txt").read_text() == SECRET
    assert codes.get("ok", 0) > 0
    assert set(codes) <= {
        "ok",
        "outside_root_approval_required",
        "not_found",
        "unsafe_path",
        "invalid_args",
        "read_before_write",
        "file_changed",
        "not_directory",
    }


@pytest.mark.slow
def test_swap_race_soak(fs, root, world):
    outside = world["outside"]
    codes = _race(fs, root, outside, rounds=1500)
    assert (outside / "f.txt").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == sorted(["dir", "secret.txt", "f.txt"])
    assert codes.get("unsafe_path", 0) > 0  # the window was hit, and held
