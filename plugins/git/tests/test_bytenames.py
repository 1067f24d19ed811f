"""File names that are not UTF-8 on disk: git's output shows them with U+FFFD (never a crash),
and the shown name, sent back as a path, names the same file."""

from __future__ import annotations

import os

import orjson
from entropic_mcp.testing import call, make_manager
from git_testkit import make_server

BAD = "bad\ufffdname.txt"


def _write(repo, name: bytes, data: bytes) -> None:
    with open(os.path.join(os.fsencode(repo.path), name), "wb") as handle:
        handle.write(data)


def _manager(repo):
    return make_manager(repo.path, servers=[make_server(repo.path)], config={"permissions": {"default": "allow"}})


def _ok(manager, tool, args=None):
    outcome = call(manager, f"git.{tool}", args or {})
    assert not outcome.response.is_error, outcome.response.result
    text = outcome.response.result
    return text if tool in ("diff", "show", "blame") else orjson.loads(text)


def test_read_tools_show_the_name_and_take_it_back(repo):
    _write(repo, b"bad\xffname.txt", b"one \xff\n")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "add bad")
    _write(repo, b"bad\xffname.txt", b"two \xfe\n")
    manager = _manager(repo)
    assert _ok(manager, "status")["unstaged"] == [{"path": BAD, "status": "modified"}]
    assert f"a/{BAD}" in _ok(manager, "diff")
    assert "+two \ufffd" in _ok(manager, "diff", {"paths": [BAD]})
    assert [c["subject"] for c in _ok(manager, "log", {"paths": [BAD]})] == ["add bad"]
    assert f"b/{BAD}" in _ok(manager, "show")
    assert "two \ufffd" in _ok(manager, "blame", {"path": BAD})


def test_write_tools_round_trip_through_the_shown_name(repo):
    _write(repo, b"new\xfe.txt", b"n\n")
    manager = _manager(repo)
    shown = _ok(manager, "status")["untracked"]
    assert shown == ["new\ufffd.txt"]
    assert _ok(manager, "add", {"paths": shown}) == {"staged": shown}
    assert _ok(manager, "reset", {"paths": shown}) == {"unstaged": shown}
    _ok(manager, "add", {"paths": shown})
    assert _ok(manager, "restore", {"paths": shown, "staged": True})["restored"] == shown
    assert _ok(manager, "status")["untracked"] == shown


def test_two_names_shown_alike_are_refused_with_their_bytes(repo):
    _write(repo, b"a\xff.txt", b"1\n")
    _write(repo, b"a\xfe.txt", b"2\n")
    outcome = call(_manager(repo), "git.add", {"paths": ["a\ufffd.txt"]})
    assert outcome.response.is_error
    error = orjson.loads(outcome.response.result)
    assert error["error"] == "ambiguous_path"
    assert "a\\xfe.txt" in error["message"] and "a\\xff.txt" in error["message"]
    assert repo.staged() == []


def test_a_link_behind_a_shown_name_is_confined(repo, tmp_path):
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", os.path.join(os.fsencode(repo.path), b"l\xff"))
    outcome = call(_manager(repo), "git.add", {"paths": ["l\ufffd"]})
    assert orjson.loads(outcome.response.result)["error"] == "outside_root"
