"""blame, stash_list, stash, restore, tag, create_tag; log bodies and statistics; diff formats."""

from __future__ import annotations

import pytest
from git_testkit import Repo, execute, make_server, ok, refused


@pytest.fixture
def history(repo: Repo) -> Repo:
    repo.commit(
        "second\n\nThe body explains why.\nTwo lines.",
        **{"src__app.py": "print('hi')\nprint('two')\n", "data.bin": "\x00\x01"},
    )
    return repo


# -- blame ------------------------------------------------------------------------------------


def test_blame_names_the_commit_of_every_line(server, history):
    first, second = history.git("rev-list", "--reverse", "HEAD").split()
    lines = ok(server, "blame", {"path": "src/app.py"}).splitlines()
    assert len(lines) == 2
    assert lines[0].split()[:4] == ["1", first[:10], "2024-01-02", "Test"]
    assert lines[0].endswith("\tprint('hi')")
    assert lines[1].split()[1] == second[:10] and lines[1].endswith("\tprint('two')")


def test_blame_at_a_revision_and_a_line_range(server, history):
    first = history.git("rev-list", "--reverse", "HEAD").split()[0]
    assert ok(server, "blame", {"path": "src/app.py", "revision": "HEAD~1"}).count("\n") == 1
    two = ok(server, "blame", {"path": "src/app.py", "start_line": 2, "end_line": 2})
    assert two.startswith("     2 ") and "print('two')" in two
    assert first[:10] not in two


def test_blame_of_uncommitted_lines_and_errors(server, history):
    history.write("src/app.py", "print('hi')\nnew\n")
    assert "0000000000" in ok(server, "blame", {"path": "src/app.py"}).splitlines()[1]
    assert refused(server, "blame", {"path": "missing.py"})["error"] == "git_failed"
    assert refused(server, "blame", {"path": "src/app.py", "start_line": 50})["error"] == "invalid_args"
    assert refused(server, "blame", {"path": "src/app.py", "revision": "nope"})["error"] == "invalid_argument"
    assert refused(server, "blame", {"path": "../outside"})["error"] == "outside_root"


def test_blame_output_is_capped_with_a_note(repo):
    repo.commit("big", **{"big.txt": "".join(f"line {i}\n" for i in range(5000))})
    server = make_server(repo.path, max_output_bytes=2048)
    text = ok(server, "blame", {"path": "big.txt"})
    assert len(text.encode()) < 2048 + 200 and text.rstrip().endswith("'start_line' and 'end_line']")


# -- stash ------------------------------------------------------------------------------------


def test_stash_push_list_pop_apply_drop(server, repo):
    repo.write("README.md", "# changed\n")
    assert ok(server, "stash", {"message": "wip one"}) == {"stashed": True, "ref": "stash@{0}"}
    assert (repo.path / "README.md").read_text() == "# readme\n"
    assert ok(server, "stash") == {"stashed": False, "reason": "no local changes to save"}
    repo.write("new.txt", "untracked\n")
    assert ok(server, "stash", {"include_untracked": True, "message": "wip two"})["stashed"] is True
    assert not (repo.path / "new.txt").exists()
    entries = ok(server, "stash_list")
    assert [(e["index"], e["message"]) for e in entries] == [(0, "On main: wip two"), (1, "On main: wip one")]
    assert ok(server, "stash", {"action": "apply", "index": 1}) == {"applied": "stash@{1}"}
    assert (repo.path / "README.md").read_text() == "# changed\n"
    assert len(ok(server, "stash_list")) == 2
    repo.git("checkout", "--", "README.md")
    assert ok(server, "stash", {"action": "pop"}) == {"popped": "stash@{0}"}
    assert (repo.path / "new.txt").exists()
    assert ok(server, "stash", {"action": "drop", "index": 0}) == {"dropped": "stash@{0}"}
    assert ok(server, "stash_list") == []
    assert refused(server, "stash", {"action": "pop"})["error"] == "invalid_argument"


def test_stash_push_of_some_paths_only(server, repo):
    repo.write("README.md", "# changed\n")
    repo.write("src/app.py", "changed\n")
    ok(server, "stash", {"paths": ["src"]})
    assert (repo.path / "README.md").read_text() == "# changed\n"
    assert (repo.path / "src/app.py").read_text() == "print('hi')\n"


def test_a_conflicting_pop_keeps_the_entry(server, repo):
    repo.write("README.md", "# stashed\n")
    ok(server, "stash")
    repo.commit("conflicting", **{"README.md": "# committed\n"})
    error = refused(server, "stash", {"action": "pop"})
    assert error["error"] == "git_failed" and "kept" in error["message"]
    assert len(ok(server, "stash_list")) == 1


# -- restore ----------------------------------------------------------------------------------


def test_restore_discards_work_tree_changes(server, repo):
    repo.write("README.md", "# changed\n")
    assert ok(server, "restore", {"paths": ["README.md"]})["restored"] == ["README.md"]
    assert (repo.path / "README.md").read_text() == "# readme\n"


def test_restore_staged_unstages_and_keeps_the_file(server, repo):
    repo.write("README.md", "# changed\n")
    repo.git("add", "README.md")
    ok(server, "restore", {"paths": ["README.md"], "staged": True})
    assert repo.staged() == []
    assert (repo.path / "README.md").read_text() == "# changed\n"
    repo.git("add", "README.md")
    ok(server, "restore", {"paths": ["."], "staged": True, "worktree": True})
    assert repo.staged() == [] and (repo.path / "README.md").read_text() == "# readme\n"


def test_restore_from_a_source_commit(server, history):
    ok(server, "restore", {"paths": ["src/app.py"], "source": "HEAD~1"})
    assert (history.path / "src/app.py").read_text() == "print('hi')\n"
    assert refused(server, "restore", {"paths": ["src"], "source": "nope"})["error"] == "invalid_argument"
    assert refused(server, "restore", {"paths": ["x"], "staged": False, "worktree": False})["error"] == "invalid_args"
    assert refused(server, "restore", {"paths": ["../x"]})["error"] == "outside_root"
    assert refused(server, "restore", {"paths": ["nope.txt"]})["error"] == "git_failed"


# -- tags -------------------------------------------------------------------------------------


def test_create_and_list_tags(server, history):
    head = history.git("rev-parse", "HEAD").strip()
    first = history.git("rev-parse", "HEAD~1").strip()
    assert ok(server, "create_tag", {"name": "v1.0", "revision": "HEAD~1"}) == {
        "tag": "v1.0",
        "sha": first,
        "annotated": False,
    }
    assert ok(server, "create_tag", {"name": "v2.0", "message": "Release 2\n\nnotes"})["annotated"] is True
    assert history.git("cat-file", "-t", "v2.0").strip() == "tag"
    tags = {t["name"]: t for t in ok(server, "tag")}
    assert tags["v2.0"] == {"name": "v2.0", "sha": head, "annotated": True, "message": "Release 2"}
    assert tags["v1.0"] == {"name": "v1.0", "sha": first, "annotated": False, "message": None}
    assert [t["name"] for t in ok(server, "tag", {"pattern": "v1*"})] == ["v1.0"]
    assert [t["name"] for t in ok(server, "tag", {"contains": "HEAD"})] == ["v2.0"]
    assert refused(server, "create_tag", {"name": "v1.0"})["error"] == "invalid_argument"
    assert history.git("rev-parse", "v1.0").strip() == first  # never overwritten
    assert refused(server, "create_tag", {"name": "bad name"})["error"] == "invalid_argument"
    assert refused(server, "create_tag", {"name": "x", "revision": "nope"})["error"] == "invalid_argument"


def test_annotated_tags_are_never_signed(server, repo):
    repo.git("config", "tag.gpgSign", "true")
    repo.git("config", "gpg.program", "/nonexistent/gpg")
    ok(server, "create_tag", {"name": "v1", "message": "m"})
    assert "BEGIN PGP" not in repo.git("cat-file", "tag", "v1")


# -- log and diff shapes ----------------------------------------------------------------------


def test_log_with_bodies_and_per_file_statistics(server, history):
    commits = ok(server, "log", {"body": True, "stats": True})
    assert commits[0]["subject"] == "second" and commits[0]["body"] == "The body explains why.\nTwo lines."
    assert commits[0]["files"] == [
        {"path": "data.bin", "added": None, "deleted": None},
        {"path": "src/app.py", "added": 1, "deleted": 0},
    ]
    assert commits[1]["body"] == ""
    assert "body" not in ok(server, "log", {"stats": True})[0]
    assert "files" not in ok(server, "log", {"body": True})[0]
    assert set(ok(server, "log")[0]) == {"sha", "author", "email", "date", "subject"}


def test_log_statistics_show_renames(server, history):
    history.git("mv", "src/app.py", "src/main.py")
    history.git("commit", "-q", "-m", "rename")
    files = ok(server, "log", {"stats": True, "max_count": 1})[0]["files"]
    assert files == [{"path": "src/main.py", "added": 0, "deleted": 0, "from": "src/app.py"}]


def test_diff_formats(server, history):
    history.write("src/app.py", "changed\n")
    history.write("README.md", "# changed\n")
    stat = ok(server, "diff", {"format": "stat"})
    assert "src/app.py | 3 +--" in stat and "2 files changed" in stat
    assert ok(server, "diff", {"format": "name_only"}) == "README.md\nsrc/app.py\n"
    assert ok(server, "diff", {"format": "name_status"}) == "M\tREADME.md\nM\tsrc/app.py\n"
    assert ok(server, "diff", {"format": "name_only", "target": "HEAD~1"}) == "README.md\ndata.bin\nsrc/app.py\n"
    assert execute(server, "diff", {"format": "nope"}).is_error
