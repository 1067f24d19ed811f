"""The directory listing cache: a walk after any change sees exactly what a fresh walk sees.

Most tests push the cache's clock 10 s ahead and age the tree's timestamps, so that listings are
stored (not "racy") and every later change gets a timestamp different from the aged one; the
tests named ``..._real_clock`` keep the real clock and check the racy rule itself.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from entropic_mcp_filesystem._dircache import ListingCache, parse_mountinfo
from entropic_mcp_filesystem._ignore import IgnoreCache

AHEAD_NS = 10_000_000_000
OLD_NS = 1_600_000_000_000_000_000


def populate(root: Path, rels: list[str]) -> None:
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("needle\n")


def age(root: Path) -> None:
    """Set every directory's and ignore file's mtime to one old instant (as if untouched for years)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            if name in (".gitignore", ".entropicignore"):
                os.utime(Path(dirpath) / name, ns=(OLD_NS, OLD_NS))
        os.utime(dirpath, ns=(OLD_NS, OLD_NS))
        dirnames[:] = [d for d in dirnames if d != ".git"]


@pytest.fixture
def tree(root):
    populate(
        root,
        [
            "a.py",
            "notes.log",
            "src/m.py",
            "src/m.log",
            "src/pkg/n.py",
            "src/pkg/deep/o.py",
            "build/gen.py",
            "docs/readme.md",
        ],
    )
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "src" / ".gitignore").write_text("!m.log\n")
    age(root)
    return root


@pytest.fixture
def cached(make):
    """A harness whose listing cache treats everything aged as old enough to store."""
    harness = make()
    harness.server.ignore_cache.listings.clock = lambda: time.time_ns() + AHEAD_NS
    return harness


def fresh_glob(make, pattern: str = "**/*"):
    """The same glob by a new server (empty caches, none on disk): what the cached answer must equal."""
    return make({"listing_cache": False}).ok("glob", {"pattern": pattern})


def listings(harness) -> ListingCache:
    return harness.server.ignore_cache.listings


def test_listings_are_cached_and_reused_with_identical_results(cached, make, tree):
    first = cached.ok("glob", {"pattern": "**/*.py"})
    assert first == ["a.py", "src/m.py", "src/pkg/deep/o.py", "src/pkg/n.py"]
    assert len(listings(cached)) == 5  # root, src, src/pkg, src/pkg/deep, docs (build/ is pruned)
    assert cached.ok("glob", {"pattern": "**/*.py"}, conversation="c2") == first
    assert cached.ok("glob", {"pattern": "**/*"}, conversation="c3") == fresh_glob(make)


@pytest.mark.parametrize("where", ["", "src/", "src/pkg/deep/"])
def test_file_created_after_a_cached_walk_shows_up_in_glob_grep_and_list(cached, tree, where):
    cached.ok("glob", {"pattern": "**/*.py"})
    (tree / f"{where}new.py").write_text("needle\n")
    assert f"{where}new.py" in cached.ok("glob", {"pattern": "**/*.py"}, conversation="c2")
    assert f"{where}new.py" in {m["path"] for m in cached.ok("grep", {"pattern": "needle"}, conversation="c3")}
    listed = cached.ok("list_directory", {"recursive": True, "max_depth": 5}, conversation="c4")
    assert f"{where}new.py" in {e["path"] for e in listed}


def test_file_deleted_after_a_cached_walk_disappears(cached, tree):
    cached.ok("glob", {"pattern": "**/*.py"})
    (tree / "src" / "pkg" / "n.py").unlink()
    assert cached.ok("glob", {"pattern": "**/*.py"}, conversation="c2") == ["a.py", "src/m.py", "src/pkg/deep/o.py"]
    assert "src/pkg/n.py" not in {m["path"] for m in cached.ok("grep", {"pattern": "needle"}, conversation="c3")}
    listed = cached.ok("list_directory", {"recursive": True, "max_depth": 5}, conversation="c4")
    assert "src/pkg/n.py" not in {e["path"] for e in listed}


def test_renames_within_and_across_directories_are_seen(cached, make, tree):
    cached.ok("glob", {"pattern": "**/*"})
    (tree / "src" / "m.py").rename(tree / "src" / "renamed.py")
    (tree / "src" / "pkg" / "deep" / "o.py").rename(tree / "docs" / "moved.py")
    after = cached.ok("glob", {"pattern": "**/*"}, conversation="c2")
    assert "src/renamed.py" in after and "docs/moved.py" in after
    assert "src/m.py" not in after and "src/pkg/deep/o.py" not in after
    assert after == fresh_glob(make)


def test_renamed_directory_is_walked_under_its_new_name(cached, make, tree):
    cached.ok("glob", {"pattern": "**/*.py"})
    (tree / "src" / "pkg").rename(tree / "docs" / "pkg")
    after = cached.ok("glob", {"pattern": "**/*.py"}, conversation="c2")
    assert after == ["a.py", "docs/pkg/deep/o.py", "docs/pkg/n.py", "src/m.py"]
    assert after == fresh_glob(make, "**/*.py")


def test_directory_replaced_by_a_file_and_back(cached, make, tree):
    cached.ok("glob", {"pattern": "**/*"})
    deep = tree / "src" / "pkg" / "deep"
    (deep / "o.py").unlink()
    deep.rmdir()
    deep.write_text("now a file\n")
    assert "src/pkg/deep" in cached.ok("glob", {"pattern": "**/*"}, conversation="c2")
    deep.unlink()
    deep.mkdir()
    (deep / "p.py").write_text("x\n")
    after = cached.ok("glob", {"pattern": "**/*"}, conversation="c3")
    assert "src/pkg/deep/p.py" in after and "src/pkg/deep" not in after
    assert after == fresh_glob(make)


def test_cached_subdirectory_swapped_for_a_link_is_not_followed(cached, tree, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("x\n")
    cached.ok("glob", {"pattern": "**/*.py"})
    pkg = tree / "src" / "pkg"
    pkg.rename(tree / "src" / "pkg_old")
    pkg.symlink_to(outside, target_is_directory=True)
    after = cached.ok("glob", {"pattern": "**/*.py"}, conversation="c2")
    assert not any("secret" in path for path in after if isinstance(path, str))
    assert "src/pkg_old/n.py" in after


def test_change_in_the_same_tick_as_the_listing_is_seen_real_clock(fs, tree):
    """A directory whose timestamps are restored after a change must still be re-read.

    ``utime`` back to the exact old mtime is what a change in the same timestamp tick looks like;
    with the real clock the directory's ctime (just set) is too recent for its listing to be
    stored, so the next walk reads it again.
    """
    src = tree / "src"
    assert "src/late.py" not in fs.ok("glob", {"pattern": "**/*.py"})
    (src / "late.py").write_text("x\n")
    os.utime(src, ns=(OLD_NS, OLD_NS))
    assert "src/late.py" in fs.ok("glob", {"pattern": "**/*.py"}, conversation="c2")


def test_created_within_the_same_second_as_the_previous_walk_real_clock(fs, root):
    populate(root, ["pkg/a.py"])
    assert fs.ok("glob", {"pattern": "**/*.py"}) == ["pkg/a.py"]
    assert len(listings(fs)) == 0  # everything was modified just now: racy, nothing stored
    (root / "pkg" / "b.py").write_text("x\n")
    assert fs.ok("glob", {"pattern": "**/*.py"}, conversation="c2") == ["pkg/a.py", "pkg/b.py"]
    (root / "pkg" / "a.py").unlink()
    assert fs.ok("glob", {"pattern": "**/*.py"}, conversation="c3") == ["pkg/b.py"]


def test_racy_rule_decides_what_is_stored():
    cache = ListingCache(clock=lambda: 0)
    st = os.stat(".")
    trusted = lambda dev: True  # noqa: E731
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    assert not cache.storable(st, newest, trusted)
    assert not cache.storable(st, newest + cache.margin_ns - 1, trusted)
    assert cache.storable(st, newest + cache.margin_ns, trusted)
    assert not cache.storable(st, newest + cache.margin_ns, lambda dev: False)


@pytest.mark.parametrize("clock_ahead", [0, AHEAD_NS], ids=["real_clock", "clock_ahead"])
def test_gitignore_edited_in_place_is_applied(make, tree, clock_ahead):
    harness = make()
    harness.server.ignore_cache.listings.clock = lambda: time.time_ns() + clock_ahead
    before = harness.ok("glob", {"pattern": "**/*"})
    assert "notes.log" not in before and "docs/readme.md" in before
    ignore = tree / ".gitignore"
    inode = ignore.stat().st_ino
    with open(ignore, "r+") as handle:  # same inode, same size: only the content differs
        handle.write("*.md\nbuild/\n")
    assert ignore.stat().st_ino == inode
    after = harness.ok("glob", {"pattern": "**/*"}, conversation="c2")
    assert "notes.log" in after and "docs/readme.md" not in after
    assert after == fresh_glob(make)


def test_gitignore_edit_in_the_same_tick_is_applied_real_clock(fs, root):
    """Same size, same inode, timestamps restored: only the racy rule tells the edit apart."""
    populate(root, ["a.log", "b.txt"])
    ignore = root / ".gitignore"
    ignore.write_text("*.log\n")
    stamp = ignore.stat().st_mtime_ns
    assert fs.ok("glob", {"pattern": "*"}) == [".gitignore", "b.txt"]
    with open(ignore, "r+") as handle:
        handle.write("*.txt\n")
    os.utime(ignore, ns=(stamp, stamp))
    assert fs.ok("glob", {"pattern": "*"}, conversation="c2") == [".gitignore", "a.log"]


def test_gitignore_created_and_removed_after_a_cached_walk(cached, make, tree):
    cached.ok("glob", {"pattern": "**/*"})
    (tree / "docs" / ".gitignore").write_text("*.md\n")
    after = cached.ok("glob", {"pattern": "**/*"}, conversation="c2")
    assert "docs/readme.md" not in after and after == fresh_glob(make)
    (tree / "docs" / ".gitignore").unlink()
    assert "docs/readme.md" in cached.ok("glob", {"pattern": "**/*"}, conversation="c3")


def test_racy_ignore_file_keeps_its_compiled_object_while_unchanged(root):
    (root / ".gitignore").write_text("*.log\n")
    cache = IgnoreCache()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first = cache.load(fd, ".gitignore")
        assert first is not None and cache.load(fd, ".gitignore") is first  # re-read, same bytes
        (root / ".gitignore").write_text("*.tmp\n")
        assert cache.load(fd, ".gitignore") is not first
    finally:
        os.close(fd)


def test_walk_budget_gives_the_same_truncation_with_a_cached_listing(make, tree):
    warm = make({"max_walk_entries": 4})
    warm.server.ignore_cache.listings.clock = lambda: time.time_ns() + AHEAD_NS
    unlimited = make()
    unlimited.server.ignore_cache = warm.server.ignore_cache  # fill the shared cache with full listings
    unlimited.ok("glob", {"pattern": "**/*"})
    assert len(listings(warm)) > 0
    result = warm.ok("glob", {"pattern": "**/*"})
    assert result[-1]["truncated"] is True and "max_walk_entries" in result[-1]["note"]
    assert result == make({"max_walk_entries": 4}).ok("glob", {"pattern": "**/*"})


def test_truncated_listing_is_never_stored(make, root):
    populate(root, [f"f{i}.py" for i in range(10)])
    age(root)
    harness = make({"max_walk_entries": 5})
    harness.server.ignore_cache.listings.clock = lambda: time.time_ns() + AHEAD_NS
    harness.ok("glob", {"pattern": "*.py"})
    assert len(listings(harness)) == 0


def test_set_working_dir_drops_the_listing_cache(cached, tree, tmp_path):
    cached.ok("glob", {"pattern": "**/*"})
    assert len(listings(cached)) > 0
    other = tmp_path / "other"
    other.mkdir()
    assert cached.server.set_working_dir(other)
    assert len(listings(cached)) == 0


def test_memory_is_bounded_by_names_held(make, root):
    populate(root, [f"d{d}/f{i}.py" for d in range(20) for i in range(10)])
    age(root)
    harness = make()
    cache = ListingCache(max_names=60, clock=lambda: time.time_ns() + AHEAD_NS)
    harness.server.ignore_cache.listings = cache
    full = harness.ok("glob", {"pattern": "**/*.py"})
    assert len(full) == 200
    assert 0 < cache.names <= 60
    assert harness.ok("glob", {"pattern": "**/*.py"}, conversation="c2") == full


def test_filesystems_that_may_not_update_directory_times_are_not_cached(make, tree, tmp_path, monkeypatch):
    from entropic_mcp_filesystem import _dircache

    dev = os.stat(tree).st_dev
    info = tmp_path / "mountinfo"
    info.write_text(f"30 1 {os.major(dev)}:{os.minor(dev)} / / rw - fuse.sshfs host:/ rw\n")
    monkeypatch.setattr(_dircache, "MOUNTINFO", str(info))
    harness = make()
    harness.server.ignore_cache.listings.clock = lambda: time.time_ns() + AHEAD_NS
    harness.ok("glob", {"pattern": "**/*"})
    assert len(listings(harness)) == 0
    info.write_text(f"30 1 {os.major(dev)}:{os.minor(dev)} / / rw - ext4 /dev/x rw\n")
    harness.ok("glob", {"pattern": "**/*"}, conversation="c2")
    assert len(listings(harness)) > 0


def test_parse_mountinfo():
    text = (
        b"22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        b"27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        b"40 27 0:50 / /mnt/a rw - tmpfs tmpfs rw\n"
        b"41 27 0:50 / /mnt/b rw - fuse.x x rw\n"
        b"garbage line\n"
    )
    types = parse_mountinfo(text)
    assert types[os.makedev(0, 21)] == "proc"
    assert types[os.makedev(254, 0)] == "ext4"
    assert types[os.makedev(0, 50)] == ""  # the same device under two types is trusted as neither


def test_random_edits_keep_cached_and_fresh_globs_identical(make, root):
    import random

    rng = random.Random(7)
    populate(
        root, [f"d{d}/s{s}/f{i}.{ext}" for d in range(3) for s in range(3) for i in range(3) for ext in ("py", "log")]
    )
    (root / ".gitignore").write_text("*.log\n")
    (root / "d1" / ".gitignore").write_text("!f1.log\ns2/\n")
    age(root)
    harness = make()
    harness.server.ignore_cache.listings.clock = lambda: time.time_ns() + AHEAD_NS
    for step in range(25):
        directory = root / f"d{rng.randrange(3)}" / f"s{rng.randrange(3)}"
        action = rng.choice(["create", "delete", "rename", "ignore"])
        if action == "create":
            (directory / f"n{step}.{rng.choice(['py', 'log'])}").write_text("x\n")
        elif action == "delete":
            victims = sorted(p for p in directory.iterdir() if p.is_file())
            if victims:
                rng.choice(victims).unlink()
        elif action == "rename":
            victims = sorted(p for p in directory.iterdir() if p.is_file())
            if victims:
                rng.choice(victims).rename(root / f"d{rng.randrange(3)}" / f"r{step}.py")
        else:
            (directory.parent / ".gitignore").write_text(rng.choice(["*.log\n", "!*.log\n", "f0.*\n", ""]))
        for pattern in ("**/*", "**/*.py", "d1/**/f1.*"):
            assert harness.ok("glob", {"pattern": pattern}, conversation=f"c{step}{pattern}") == fresh_glob(
                make, pattern
            ), (step, action, pattern)


class CoarseStat:
    """A stat result whose timestamps have 2-second granularity (FAT-like): edits within one tick
    leave them unchanged, so only the racy rule can tell an edit apart."""

    def __init__(self, real: os.stat_result) -> None:
        self._real = real
        self.st_mtime_ns = real.st_mtime_ns - real.st_mtime_ns % 2_000_000_000
        self.st_ctime_ns = real.st_ctime_ns - real.st_ctime_ns % 2_000_000_000

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


@pytest.fixture
def coarse(monkeypatch):
    real_fstat, real_stat = os.fstat, os.stat
    monkeypatch.setattr(os, "fstat", lambda fd: CoarseStat(real_fstat(fd)))
    monkeypatch.setattr(os, "stat", lambda *a, **k: CoarseStat(real_stat(*a, **k)))


def test_changes_within_one_coarse_timestamp_tick_are_seen_real_clock(fs, root, coarse):
    populate(root, ["pkg/a.py"])
    (root / ".gitignore").write_text("*.log\n")
    assert fs.ok("glob", {"pattern": "**/*"}) == [".gitignore", "pkg/a.py"]
    (root / "pkg" / "b.py").write_text("x\n")
    (root / "pkg" / "c.log").write_text("x\n")
    with open(root / ".gitignore", "r+") as handle:  # same size, same inode
        handle.write("*.py\n")
    assert fs.ok("glob", {"pattern": "**/*"}, conversation="c2") == [".gitignore", "pkg/c.log"]


def test_many_patterns_over_one_listing_keep_the_budget_exact(cached, tree):
    cache = listings(cached)
    for i, pattern in enumerate(
        [f"**/*.{ext}" for ext in ["py", "md", "txt", "log", "a", "b", "c", "d", "e", "f"]]
        + ["**/?.py", "**/[mn].py"] * 2
    ):
        assert cached.ok("glob", {"pattern": pattern}, conversation=f"c{i}") is not None
    held = 0
    for listing in cache.held():
        views = listing.views or {}
        assert len(views) <= 8
        held += len(listing.files) + len(listing.dirs) + 1 + sum(n for _, n in views.values())
        assert listing.weight == len(listing.files) + len(listing.dirs) + 1 + sum(n for _, n in views.values())
    assert cache.names == held


def test_concurrent_globs_on_one_server_agree_while_files_change(cached, make, tree):
    import threading

    import anyio
    import orjson
    from entropic_mcp import CallContext

    expected = cached.ok("glob", {"pattern": "**/*.py"})
    seen: list[object] = []

    def worker(n: int) -> None:
        for _ in range(15):
            result = anyio.run(
                cached.server.execute,
                "glob",
                {"pattern": "**/*.py", "format": "json"},
                CallContext(conversation_id=f"w{n}"),
            )
            seen.append(sorted(set(orjson.loads(result.result)) - {"src/pkg/extra.py"}))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for _ in range(10):  # a file appears and disappears meanwhile: never anything else changes
        (tree / "src" / "pkg" / "extra.py").write_text("x\n")
        (tree / "src" / "pkg" / "extra.py").unlink()
    for thread in threads:
        thread.join()
    assert seen and all(result == expected for result in seen)
    assert cached.ok("glob", {"pattern": "**/*.py"}, conversation="end") == expected == fresh_glob(make, "**/*.py")
