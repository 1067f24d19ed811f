""".entropicignore and path read rules: git never prints what the project hides."""

from __future__ import annotations

import orjson
import pytest
from entropic_mcp.testing import call, make_manager
from git_testkit import Repo, execute, init_repo, make_server, ok, refused

SECRET = "TOP-SECRET-CONTENT"


@pytest.fixture
def hidden_repo(tmp_path) -> Repo:
    repo = init_repo(tmp_path / "work")
    repo.commit(
        "initial",
        **{
            "src__app.py": "print('hi')\n",
            "secrets__key": f"{SECRET} key\n",
            "deep__nested__x.key": f"{SECRET} x\n",
            "build__out.txt": f"{SECRET} build\n",
            "notes.md": "notes\n",
        },
    )
    repo.commit(
        "change everything",
        **{
            "src__app.py": "print('bye')\n",
            "secrets__key": f"{SECRET} key 2\n",
            "deep__nested__x.key": f"{SECRET} x2\n",
        },
    )
    (repo.path / ".entropicignore").write_text("secrets/\n*.key\n/build\n# comment\n!deep/nested/x.key\n")
    return repo


HIDDEN_SPELLINGS = [
    "HEAD:secrets/key",
    "HEAD:./secrets/key",
    "HEAD:secrets//key",
    "HEAD:src/../secrets/key",
    "HEAD:secrets",
    "HEAD:secrets/",
    ":secrets/key",
    ":0:secrets/key",
    "HEAD~1:secrets/key",
    "HEAD^{commit}:secrets/key",
    "main:deep/nested/x.key",
    "HEAD:deep/nested/x.key",
    "HEAD:build/out.txt",
    "HEAD:build",
]


@pytest.mark.parametrize("spelling", HIDDEN_SPELLINGS)
def test_show_refuses_a_hidden_file_however_it_is_spelled(hidden_repo, spelling):
    server = make_server(hidden_repo.path)
    error = refused(server, "show", {"revision": spelling})
    assert error["error"] == "path_hidden", error
    assert ".entropicignore" in error["message"]
    assert SECRET not in orjson.dumps(error).decode()


@pytest.mark.parametrize(
    "path", ["secrets/key", "deep/nested/x.key", "build/out.txt", "./secrets/key", "secrets/../secrets/key"]
)
def test_blame_refuses_a_hidden_file(hidden_repo, path):
    server = make_server(hidden_repo.path)
    error = refused(server, "blame", {"path": path})
    assert error["error"] == "path_hidden" and SECRET not in error["message"]
    assert "print('bye')" in ok(server, "blame", {"path": "src/app.py"})


def test_show_prints_files_the_project_does_not_hide(hidden_repo):
    server = make_server(hidden_repo.path)
    assert ok(server, "show", {"revision": "HEAD:src/app.py"}) == "print('bye')\n"
    assert "src/" in ok(server, "show", {"revision": "HEAD:"})
    assert "notes.md" in ok(server, "show", {"revision": "HEAD~1:notes.md"}) or "notes" in ok(
        server, "show", {"revision": "HEAD~1:notes.md"}
    )


def test_show_refuses_blobs_and_trees_named_by_object_id(hidden_repo):
    server = make_server(hidden_repo.path)
    blob = hidden_repo.git("rev-parse", "HEAD:secrets/key").strip()
    tree = hidden_repo.git("rev-parse", "HEAD:secrets").strip()
    hidden_repo.git("tag", "-a", "-m", "points at a blob", "blobtag", blob)
    for rev in (blob, blob[:8], tree, "blobtag", "HEAD^{tree}"):
        error = refused(server, "show", {"revision": rev})
        assert error["error"] == "invalid_argument" and "<revision>:<path>" in error["message"], (rev, error)


def test_show_of_a_commit_leaves_hidden_files_out_of_the_patch(hidden_repo):
    server = make_server(hidden_repo.path)
    for rev in ("HEAD", "HEAD~1", "main"):
        text = ok(server, "show", {"revision": rev})
        assert "src/app.py" in text
        assert SECRET not in text and "secrets/key" not in text and "x.key" not in text and "build/out" not in text


@pytest.mark.parametrize("fmt", ["patch", "stat", "name_only", "name_status"])
def test_diff_leaves_hidden_files_out_in_every_format(hidden_repo, fmt):
    server = make_server(hidden_repo.path)
    for name in ("secrets/key", "deep/nested/x.key", "build/out.txt", "src/app.py"):
        hidden_repo.write(name, f"{SECRET} changed\n" if name != "src/app.py" else "changed\n")
    for args in ({}, {"target": "HEAD~1"}, {"target": "HEAD~1", "staged": True}):
        text = ok(server, "diff", {**args, "format": fmt})
        assert "src/app.py" in text, (args, text)
        assert SECRET not in text and "secrets" not in text and "x.key" not in text and "build/" not in text
    hidden_repo.git("add", "-A")
    text = ok(server, "diff", {"staged": True, "format": fmt})
    assert "src/app.py" in text and "secrets/key" not in text and SECRET not in text


@pytest.mark.parametrize(
    "target",
    [
        "HEAD:secrets/key..HEAD:src/app.py",
        "HEAD:src/app.py...HEAD:secrets/key",
        "HEAD:secrets",
        "HEAD^{tree}",
        "{blob}..{blob2}",
        "{blob}",
        "{tree}",
        "HEAD..HEAD..HEAD",
    ],
)
def test_diff_targets_must_be_commits(hidden_repo, target):
    server = make_server(hidden_repo.path)
    blob = hidden_repo.git("rev-parse", "HEAD:secrets/key").strip()
    blob2 = hidden_repo.git("rev-parse", "HEAD:src/app.py").strip()
    tree = hidden_repo.git("rev-parse", "HEAD:secrets").strip()
    value = target.format(blob=blob, blob2=blob2, tree=tree)
    error = refused(server, "diff", {"target": value})
    assert error["error"] == "invalid_argument", (value, error)
    assert SECRET not in str(error)
    for ok_target in ("HEAD~1", "HEAD~1..HEAD", "HEAD~1...main", "main.."):
        assert SECRET not in ok(server, "diff", {"target": ok_target})


def test_diff_of_only_hidden_paths_is_empty(hidden_repo):
    server = make_server(hidden_repo.path)
    hidden_repo.write("secrets/key", "new secret\n")
    assert ok(server, "diff") == ""
    assert ok(server, "diff", {"paths": ["secrets"]}) == ""


def test_log_statistics_leave_hidden_files_out(hidden_repo):
    server = make_server(hidden_repo.path)
    commits = ok(server, "log", {"stats": True, "body": True})
    paths = {entry["path"] for commit in commits for entry in commit["files"]}
    assert "src/app.py" in paths and "notes.md" in paths
    assert not any("secret" in p or p.endswith(".key") or p.startswith("build") for p in paths)


def test_the_ignore_file_is_reread_when_it_changes(hidden_repo):
    server = make_server(hidden_repo.path)
    assert ok(server, "show", {"revision": "HEAD:notes.md"}) == "notes\n"
    (hidden_repo.path / ".entropicignore").write_text("notes.md\n")
    assert refused(server, "show", {"revision": "HEAD:notes.md"})["error"] == "path_hidden"
    (hidden_repo.path / ".entropicignore").unlink()
    assert SECRET in ok(server, "show", {"revision": "HEAD:secrets/key"})


def test_a_root_below_the_top_reads_its_own_ignore_file(tmp_path):
    repo = init_repo(tmp_path / "work")
    repo.commit("i", **{"app__secrets__k": f"{SECRET}\n", "app__main.py": "x\n", "secrets__top": "top\n"})
    (repo.path / "app" / ".entropicignore").write_text("secrets/\n")
    repo.write("app/secrets/k", f"{SECRET} 2\n")
    repo.write("secrets/top", "top 2\n")
    server = make_server(repo.path / "app")
    assert refused(server, "show", {"revision": "HEAD:app/secrets/k"})["error"] == "path_hidden"
    assert ok(server, "show", {"revision": "HEAD:secrets/top"}) == "top\n"  # outside the root: not its rules
    text = ok(server, "diff")
    assert "secrets/top" in text and SECRET not in text


# -- path read rules of the host ------------------------------------------------------------------


RULES = [
    "filesystem.read:secrets/*",
    "filesystem.read_file:secrets/*",
    "filesystem.grep:secrets/*",
    "filesystem.read:secrets/key",
    "filesystem.*:secrets/*",
]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("kind", ["deny", "ask"])
def test_read_rules_stop_show_diff_and_log_stats(hidden_repo, rule, kind):
    (hidden_repo.path / ".entropicignore").unlink()
    manager = make_manager(
        hidden_repo.path,
        servers=[make_server(hidden_repo.path)],
        config={"permissions": {"default": "allow", kind: [rule]}},
    )
    outcome = call(manager, "git.show", {"revision": "HEAD:secrets/key"})
    error = orjson.loads(outcome.response.result)
    assert outcome.response.is_error and error["error"] == "path_hidden" and rule in error["message"]
    hidden_repo.write("secrets/key", f"{SECRET} changed\n")
    hidden_repo.write("src/app.py", "changed\n")
    for args in ({}, {"format": "stat"}, {"target": "HEAD~1"}):
        text = call(manager, "git.diff", args).response.result
        assert "src/app.py" in text and "secrets/key" not in text and f"{SECRET} key" not in text
    show = call(manager, "git.show", {"revision": "HEAD"}).response.result
    assert "src/app.py" in show and "secrets/key" not in show
    blame = call(manager, "git.blame", {"path": "secrets/key"})
    assert blame.response.is_error and rule in blame.response.result
    log = orjson.loads(call(manager, "git.log", {"stats": True}).response.result)
    assert all(entry["path"] != "secrets/key" for commit in log for entry in commit["files"])
    # the other hidden-by-.entropicignore files are not hidden by this rule
    assert "x.key" in call(manager, "git.show", {"revision": "HEAD"}).response.result


def test_rules_about_other_servers_cost_no_extra_process(hidden_repo):
    (hidden_repo.path / ".entropicignore").unlink()
    server = make_server(hidden_repo.path)
    manager = make_manager(
        hidden_repo.path,
        servers=[server],
        config={"permissions": {"default": "allow", "deny": ["bash.execute:rm *", "git.commit"]}},
    )
    hidden_repo.write("secrets/key", "changed\n")
    assert "secrets/key" in call(manager, "git.diff").response.result
    assert execute(server, "show", {"revision": "HEAD:secrets/key"}).is_error is False


# -- the exclude pathspecs hide exactly what gitignore would -------------------------------------

PATTERNS = [
    "secrets/",
    "*.key",
    "/build",
    "docs/*.md",
    "**/cache/**",
    "a/**/z.txt",
    "name with space.txt",
    "[ab]?.cfg",
    "\\#hash",
    "deep/er/",
    "*.log",
    "/top-only.txt",
]
PATHS = [
    "secrets/k",
    "x/secrets/k",
    "secretsx/k",
    "a.key",
    "d/e/f.key",
    "keyfile",
    "build/out",
    "sub/build/out",
    "docs/a.md",
    "docs/sub/b.md",
    "cache/x",
    "p/cache/q/r",
    "a/z.txt",
    "a/b/c/z.txt",
    "b/a/z.txt",
    "name with space.txt",
    "d/name with space.txt",
    "a1.cfg",
    "c1.cfg",
    "ab1.cfg",
    "#hash",
    "deep/er/x",
    "x/deep/er/y",
    "y.log",
    "top-only.txt",
    "s/top-only.txt",
    "plain.txt",
]


def test_exclude_pathspecs_hide_what_gitignore_ignores(tmp_path):
    from entropic_mcp_git._hidden import IgnoreRules

    repo = init_repo(tmp_path / "work")
    for path in PATHS:
        repo.write(path, "x\n")
    repo.git("add", "-f", "--", *PATHS)
    repo.git("commit", "-q", "-m", "all")
    # what git's own gitignore matching says, line by line
    (repo.path / ".gitignore").write_text("\n".join(PATTERNS) + "\n")
    ignored = set(repo.git("check-ignore", "--no-index", "--", *PATHS, check=False).splitlines())
    rules = IgnoreRules(PATTERNS)
    shown = set(repo.git("ls-files", "--", ".", *rules.excludes("")).splitlines()) - {".gitignore"}
    assert shown == set(PATHS) - ignored
    assert {p for p in PATHS if rules.hides(p)} == ignored
