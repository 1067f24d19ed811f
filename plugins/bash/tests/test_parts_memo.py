"""The permission parts of a command line are kept between calls only while nothing on disk
could change them (``_patterns.permission_parts``' memo): the same text gets the same parts,
and a text whose analysis looked at the file system is analysed again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bash_helpers import make_manager
from entropic_mcp_bash import _patterns


def parts(server, command: str) -> list:
    return server.permission_parts("execute", {"command": command})


def test_a_command_line_gets_the_same_parts_call_after_call(root: Path) -> None:
    _, server = make_manager(root)
    _patterns._MEMO.clear()
    first = parts(server, "git status && ls -la src | wc -l")
    assert parts(server, "git status && ls -la src | wc -l") == first
    assert any(key[0] == "git status && ls -la src | wc -l" for key in _patterns._MEMO)


def test_a_redirection_follows_a_symbolic_link_changed_between_two_calls(root: Path) -> None:
    _, server = make_manager(root)
    (root / "a.txt").write_text("", encoding="utf-8")
    (root / "b.txt").write_text("", encoding="utf-8")
    link = root / "out.txt"
    link.symlink_to(root / "a.txt")
    before = [p.store for p in parts(server, "echo x > out.txt")]
    link.unlink()
    link.symlink_to(root / "b.txt")
    after = [p.store for p in parts(server, "echo x > out.txt")]
    assert any("a.txt" in s for s in before) and not any("a.txt" in s for s in after)
    assert any("b.txt" in s for s in after)


def test_a_function_is_judged_again_once_a_program_of_its_name_appears(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = tmp_path / "bin"
    programs.mkdir()
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
    _, server = make_manager(root)
    command = "zzmemoprog() { echo hi; }; zzmemoprog"
    assert all(p.understood for p in parts(server, command))
    program = programs / "zzmemoprog"
    program.write_text("#!/bin/sh\n", encoding="utf-8")
    program.chmod(0o755)
    # The environment is the same object (os.environ did not change): only the look on PATH differs.
    assert not all(p.understood for p in parts(server, command))
