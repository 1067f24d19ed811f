"""status, diff, log, show and branch against real repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
from entropic_mcp.testing import call, make_manager
from git_testkit import ISOLATED_ENV, Repo, init_repo, make_server, ok, refused

# -- status ------------------------------------------------------------------------------------


def test_status_of_a_clean_repository(server, repo):
    assert ok(server, "status") == {
        "branch": "main",
        "upstream": None,
        "ahead": 0,
        "behind": 0,
        "staged": [],
        "unstaged": [],
        "untracked": [],
        "conflicted": [],
    }


def test_status_lists_staged_unstaged_and_untracked_paths(server, repo):
    repo.write("README.md", "# changed\n")
    repo.write("new.txt")
    repo.git("add", "new.txt")
    repo.write("src/app.py", "print('changed')\n")
    repo.git("add", "src/app.py")
    repo.write("src/app.py", "print('changed again')\n")
    (repo.path / "gone.txt").write_text("x")
    repo.write("notes/todo.txt")
    status = ok(server, "status")
    assert status["staged"] == [{"path": "new.txt", "status": "added"}, {"path": "src/app.py", "status": "modified"}]
    assert status["unstaged"] == [
        {"path": "README.md", "status": "modified"},
        {"path": "src/app.py", "status": "modified"},
    ]
    assert status["untracked"] == ["gone.txt", "notes/"]
    assert status["conflicted"] == []


def test_status_reports_deletions_and_renames(server, repo):
    repo.git("mv", "README.md", "README.txt")
    (repo.path / "src" / "app.py").unlink()
    status = ok(server, "status")
    assert status["staged"] == [{"path": "README.txt", "status": "renamed", "from": "README.md"}]
    assert status["unstaged"] == [{"path": "src/app.py", "status": "deleted"}]


def test_status_lists_conflicted_paths(server, repo):
    repo.git("switch", "-q", "-c", "other")
    repo.commit("theirs", **{"README.md": "theirs\n"})
    repo.git("switch", "-q", "main")
    repo.commit("ours", **{"README.md": "ours\n"})
    repo.git("merge", "other", check=False)
    status = ok(server, "status")
    assert status["conflicted"] == [{"path": "README.md", "status": "both_modified"}]
    assert status["staged"] == [] and status["unstaged"] == []


def test_status_counts_ahead_and_behind_an_upstream(tmp_path, server, repo):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "-b", "main", "--bare", str(remote)], check=True, env=ISOLATED_ENV)
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "-q", "-u", "origin", "main")
    other = Repo(tmp_path / "other")
    subprocess.run(["git", "clone", "-q", str(remote), str(other.path)], check=True, env=ISOLATED_ENV)
    other.git("config", "user.name", "Other")
    other.git("config", "user.email", "other@example.com")
    other.commit("remote side", **{"remote.txt": "r\n"})
    other.git("push", "-q", "origin", "main")
    repo.git("fetch", "-q", "origin")
    repo.commit("local one", **{"a.txt": "a\n"})
    repo.commit("local two", **{"b.txt": "b\n"})
    status = ok(server, "status")
    assert (status["branch"], status["upstream"], status["ahead"], status["behind"]) == ("main", "origin/main", 2, 1)


def test_status_on_an_unborn_branch_and_a_detached_head(empty_repo, repo, server):
    empty = make_server(empty_repo.path)
    empty_repo.write("first.txt")
    assert ok(empty, "status")["branch"] == "main"
    assert ok(empty, "status")["untracked"] == ["first.txt"]
    repo.git("switch", "-q", "--detach", "HEAD")
    assert ok(server, "status")["branch"] is None


# -- diff --------------------------------------------------------------------------------------


def test_diff_of_a_clean_tree_is_empty_text(server):
    assert ok(server, "diff") == ""
    assert ok(server, "diff", {"staged": True}) == ""


def test_diff_separates_staged_from_unstaged_changes(server, repo):
    repo.write("README.md", "# staged\n")
    repo.git("add", "README.md")
    repo.write("src/app.py", "print('unstaged')\n")
    unstaged = ok(server, "diff")
    staged = ok(server, "diff", {"staged": True})
    assert "+print('unstaged')" in unstaged and "README.md" not in unstaged
    assert "+# staged" in staged and "app.py" not in staged


def test_diff_against_a_target_revision_and_limited_to_paths(server, repo):
    first = repo.git("rev-parse", "HEAD").strip()
    repo.commit("second", **{"README.md": "# second\n", "src__app.py": "print('second')\n"})
    both = ok(server, "diff", {"target": first})
    assert "+# second" in both and "+print('second')" in both
    only = ok(server, "diff", {"target": first, "paths": ["src"]})
    assert "+print('second')" in only and "README" not in only
    assert ok(server, "diff", {"target": "HEAD"}) == ""


def test_diff_context_lines(server, repo):
    repo.commit("long", **{"long.txt": "".join(f"line {i}\n" for i in range(20))})
    repo.write("long.txt", "".join(f"line {i}\n" if i != 10 else "changed\n" for i in range(20)))
    assert " line 7\n" in ok(server, "diff")
    tight = ok(server, "diff", {"context_lines": 0})
    assert "\n line 9\n" not in tight and "+changed" in tight


def test_diff_of_an_unknown_target_says_which_argument(server):
    error = refused(server, "diff", {"target": "no-such-branch"})
    assert error["error"] == "invalid_argument" and "'target'" in error["message"]


def test_long_diff_is_cut_with_a_note(repo):
    server = make_server(repo.path, max_output_bytes=4096)
    repo.write("README.md", "".join(f"new line {i}\n" for i in range(2000)))
    text = ok(server, "diff")
    assert len(text.encode()) < 4096 + 300
    assert text.rstrip().endswith("narrow the diff with 'paths', 'context_lines': 0 or 'format': \"stat\"]")


# -- log ---------------------------------------------------------------------------------------


def test_log_lists_commits_newest_first_with_iso_dates(server, repo):
    repo.commit("second", **{"a.txt": "a\n"})
    commits = ok(server, "log")
    assert [c["subject"] for c in commits] == ["second", "initial commit"]
    assert commits[0]["sha"] == repo.git("rev-parse", "HEAD").strip()
    assert commits[0]["author"] == "Test Author" and commits[0]["email"] == "author@example.com"
    assert commits[0]["date"] == "2024-01-02T03:04:05+00:00"


def test_log_max_count_revision_and_paths(server, repo):
    for i in range(5):
        repo.commit(f"c{i}", **{f"f{i}.txt": "x\n"})
    assert [c["subject"] for c in ok(server, "log", {"max_count": 2})] == ["c4", "c3"]
    assert [c["subject"] for c in ok(server, "log", {"revision": "HEAD~3", "max_count": 2})] == ["c1", "c0"]
    assert [c["subject"] for c in ok(server, "log", {"paths": ["f2.txt"]})] == ["c2"]
    assert [c["subject"] for c in ok(server, "log", {"revision": "HEAD~2..HEAD"})] == ["c4", "c3"]


def test_log_since_and_until(tmp_path):
    repo = init_repo(tmp_path / "dated")
    for day, subject in (("2023-01-10", "old"), ("2023-06-10", "middle"), ("2024-01-10", "new")):
        env = {
            **ISOLATED_ENV,
            "GIT_AUTHOR_DATE": f"{day}T12:00:00+00:00",
            "GIT_COMMITTER_DATE": f"{day}T12:00:00+00:00",
        }
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", subject], cwd=repo.path, env=env, check=True)
    server = make_server(repo.path)
    assert [c["subject"] for c in ok(server, "log", {"since": "2023-03-01"})] == ["new", "middle"]
    assert [c["subject"] for c in ok(server, "log", {"until": "2023-03-01"})] == ["old"]
    assert [c["subject"] for c in ok(server, "log", {"since": "2023-03-01", "until": "2023-12-31"})] == ["middle"]


def test_log_refuses_a_date_git_would_read_as_something_else(server):
    # git's approxidate drops words it does not know: "not a date" meant "now", an empty log.
    for bad in ("not a date", "banana", "2 fortnights ago", "   "):
        error = refused(server, "log", {"since": bad})
        assert error["error"] == "invalid_args" and "since" in error["message"]
    error = refused(server, "log", {"until": "tomorrow-ish"})
    assert "'tomorrow'" in error["message"] and '"2 weeks ago"' in error["message"]
    for good in (
        "2 weeks ago",
        "yesterday",
        "2024-01-31",
        "2024-01-31T10:00:00+02:00",
        "last monday",
        "Jan 5 2024",
        "noon yesterday",
        "3.days.ago",
        "1700000000",
    ):
        ok(server, "log", {"since": good})


def test_log_of_an_unborn_branch_is_empty(empty_repo):
    assert ok(make_server(empty_repo.path), "log") == []


def test_log_rejects_out_of_range_max_count(server):
    for bad in (0, 201, "10", True):
        assert refused(server, "log", {"max_count": bad})["error"] == "invalid_args"


def test_whole_numbers_written_as_floats_are_integers_through_the_pipeline(repo):
    # JSON Schema counts 3.0 as an integer, so the schema stage lets it through: the tool must
    # read it as 3 (the toolkit's one rule), not refuse what the schema accepted
    for n in range(2, 6):
        repo.commit(f"commit {n}", **{f"f{n}.txt": f"{n}\n"})
    manager = make_manager(repo.path, servers=[make_server(repo.path)], config={"permissions": {"default": "allow"}})
    outcome = call(manager, "git.log", {"max_count": 3.0})
    assert outcome.kind == "ok", outcome.response.result
    assert [c["subject"] for c in orjson.loads(outcome.response.result)] == ["commit 5", "commit 4", "commit 3"]
    context = call(manager, "git.diff", {"context_lines": 0.0, "target": "HEAD~1"})
    assert context.kind == "ok" and "@@ -0,0 +1 @@" in context.response.result
    blame = call(manager, "git.blame", {"path": "f5.txt", "start_line": 1.0, "end_line": 1.0})
    assert blame.kind == "ok", blame.response.result
    # a fraction, a boolean, a string or a float past the bounds is no count of commits
    for bad in (3.5, True, "3", 1e300):
        outcome = call(manager, "git.log", {"max_count": bad})
        assert outcome.kind in ("rejected_schema", "error"), (bad, outcome.kind)
        assert orjson.loads(outcome.response.result)["error"] in ("invalid_args", "schema_validation_failed"), bad


def test_whole_numbers_written_as_floats_are_integers_called_directly(server, repo):
    repo.commit("second", **{"b.txt": "b\n"})
    assert [c["subject"] for c in ok(server, "log", {"max_count": 1.0})] == ["second"]
    for bad in (1.5, False, float("nan"), float("inf"), 2e300):
        assert refused(server, "log", {"max_count": bad})["error"] == "invalid_args", bad


# -- show --------------------------------------------------------------------------------------


def test_show_the_root_commit_includes_its_patch(server, repo):
    root = repo.git("rev-list", "--max-parents=0", "HEAD").strip()
    repo.commit("second", **{"a.txt": "a\n"})
    text = ok(server, "show", {"revision": root})
    assert text.startswith(f"commit {root}")
    assert "initial commit" in text and "+++ b/README.md" in text and "+print('hi')" in text


def test_show_defaults_to_head(server, repo):
    repo.commit("second", **{"a.txt": "alpha\n"})
    text = ok(server, "show")
    assert "second" in text and "+alpha" in text and "README" not in text


def test_show_of_an_unknown_revision(server):
    assert refused(server, "show", {"revision": "deadbeef"})["error"] == "invalid_argument"


# -- branch ------------------------------------------------------------------------------------


def _with_remote(tmp_path: Path, repo: Repo) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "-b", "main", "--bare", str(remote)], check=True, env=ISOLATED_ENV)
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "-q", "-u", "origin", "main")
    repo.git("remote", "set-head", "origin", "main")


def test_branch_local_remote_and_all(tmp_path, server, repo):
    _with_remote(tmp_path, repo)
    repo.git("branch", "feature")
    assert ok(server, "branch") == {"current": "main", "branches": ["feature", "main"]}
    assert ok(server, "branch", {"kind": "remote"}) == {"current": "main", "branches": ["origin/main"]}
    assert ok(server, "branch", {"kind": "all"})["branches"] == ["feature", "main", "origin/main"]


def test_branch_contains_keeps_only_branches_with_the_commit(server, repo):
    repo.git("branch", "old")
    new = repo.commit("only on main", **{"a.txt": "a\n"})
    repo.git("switch", "-q", "old")
    assert ok(server, "branch", {"contains": new}) == {"current": "old", "branches": ["main"]}
    assert ok(server, "branch", {"contains": "old"})["branches"] == ["main", "old"]


def test_branch_current_is_null_when_detached(server, repo):
    repo.git("switch", "-q", "--detach", "HEAD")
    assert ok(server, "branch") == {"current": None, "branches": ["main"]}
