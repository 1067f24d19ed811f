"""The listing store on disk: a new server's glob starts from it and still sees exactly the tree.

As in test_fs_dircache.py, most tests push the caches' clock 10 s ahead and age the tree's
directory and ignore-file mtimes, so that what the first server reads is old enough to be
stored; the reference answer is always a server with ``listing_cache = false`` (a fresh walk).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from entropic_mcp import ConfigError
from entropic_mcp_filesystem import _dirstore
from entropic_mcp_filesystem._dircache import ListingCache
from entropic_mcp_filesystem._ignore import IgnoreCache
from entropic_mcp_filesystem._walk import Walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

AHEAD_NS = 10_000_000_000
OLD_NS = 1_600_000_000_000_000_000


def populate(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def age(root: Path) -> None:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            if name == ".gitignore":
                os.utime(Path(dirpath) / name, ns=(OLD_NS, OLD_NS))
        os.utime(dirpath, ns=(OLD_NS, OLD_NS))


def ahead(harness: Any) -> Any:
    harness.server.ignore_cache.listings.clock = lambda: time.time_ns() + AHEAD_NS
    return harness


@pytest.fixture
def server(make):
    """A new server at ``root`` (the project by default) whose caches' clock runs 10 s ahead."""

    def factory(root: Path, table: dict[str, Any] | None = None) -> Any:
        return ahead(make(table, at=root))

    return factory


@pytest.fixture
def fresh(make):
    """The glob of a server that keeps nothing on disk: what every answer must equal."""

    def factory(root: Path, pattern: str = "**/*") -> list[str]:
        return glob(make({"listing_cache": False}, at=root), pattern)

    return factory


def glob(harness: Any, pattern: str = "**/*") -> list[str]:
    return harness.ok("glob", {"pattern": pattern})


def edit_in_place(path: Path, text: str) -> None:
    """Rewrite ``path`` with ``text`` (same size) and put its mtime back: only ctime tells.

    Repeated until the ctime moved: file times come from a coarse clock (one tick is a few ms),
    and the tests' clock, 10 s ahead, would call an edit in the tick of the last one old enough
    to trust (the real clock's racy rule keeps such files out of the store).
    """
    before = path.stat()
    assert len(text.encode()) == before.st_size
    while True:
        path.write_text(text)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = path.stat()
        if after.st_ctime_ns != before.st_ctime_ns:
            return


@pytest.fixture
def tree(root: Path) -> Path:
    populate(
        root,
        {
            ".gitignore": "*.log\nbuild/\n",
            "a.py": "x",
            "notes.log": "x",
            "src/m.py": "x",
            "src/.gitignore": "*.tmp\n",
            "src/t.tmp": "x",
            "src/pkg/n.py": "x",
            "src/pkg/n.txt": "x",
            "build/gen.py": "x",
            "docs/readme.md": "x",
        },
    )
    age(root)
    return root


def store_of(root: Path) -> _dirstore.ListingStore:
    return _dirstore.ListingStore(root)


def count_calls(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    calls = [0]
    original = getattr(cls, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


def test_the_store_directory_is_the_host_cache_directory_listings(monkeypatch, tmp_path):
    from entropic_mcp.toolkit.paths import cache_directory

    monkeypatch.setenv("ENTROPIC_MCP_DATA_DIR", str(tmp_path))
    assert _dirstore.default_directory() == tmp_path / "cache" / "listings"
    assert str(_dirstore.default_directory()) == cache_directory("listings")


def test_the_store_lives_in_the_user_cache_directory_outside_the_project(tree, user_data_dir, server):
    glob(server(tree))
    path = store_of(tree).path
    assert path.parent == user_data_dir / "cache" / "listings"
    assert path.is_file() and oct(path.stat().st_mode & 0o777) == "0o600"
    assert not any(p.name.startswith(".") and p.is_file() for p in path.parent.iterdir())  # no temporary left
    snapshot = store_of(tree).read()
    assert snapshot is not None and len(snapshot.listings) == 4  # root, src, src/pkg, docs (build/ pruned)


def test_a_new_server_reads_no_unchanged_directory_and_no_unchanged_ignore_file(tree, monkeypatch, server, fresh):
    expected = glob(server(tree))
    reads = count_calls(monkeypatch, Walk, "_read_listing")
    ignore_reads = count_calls(monkeypatch, IgnoreCache, "_read")
    assert glob(server(tree)) == expected
    assert (reads[0], ignore_reads[0]) == (0, 0)  # ignore files compiled from the stored text, after the same stat
    assert expected == fresh(tree)
    assert reads[0] == 4  # the reference reads every directory


def test_only_changed_directories_are_read_again(tree, monkeypatch, server):
    glob(server(tree))
    (tree / "src" / "pkg" / "new.py").write_text("x")
    reads = count_calls(monkeypatch, Walk, "_read_listing")
    assert "src/pkg/new.py" in glob(server(tree))
    assert reads[0] == 1


def test_gitignore_edited_in_place_with_size_and_mtime_put_back_is_recompiled(tree, server, fresh):
    assert "src/t.tmp" not in glob(server(tree))
    edit_in_place(tree / "src" / ".gitignore", "*.txt\n")
    after = glob(server(tree))
    assert "src/t.tmp" in after and "src/pkg/n.txt" not in after
    assert after == fresh(tree)


def test_a_store_written_by_the_real_clock_holds_nothing_racy(root, make):
    populate(root, {"a.py": "x", "src/b.py": "x", ".gitignore": "*.log\n"})  # everything just written
    glob(make())
    snapshot = store_of(root).read()
    assert snapshot is None or (snapshot.listings == [] and snapshot.ignores == [])


def test_records_racy_against_the_write_time_are_dropped_on_load():
    now = time.time_ns()
    cache = ListingCache(clock=lambda: now)
    dev = os.stat("/").st_dev
    cache.seed(
        [
            (dev, 1, now - 5_000_000_000, now - 5_000_000_000, 1, "a", ""),
            (dev, 2, now - 1_000_000_000, now - 5_000_000_000, 1, "b", ""),  # modified 1 s before the write
            (dev, 3, now - 5_000_000_000, now, 1, "c", ""),  # changed as it was written
            ("x", 4, 0, 0, 1, "d", ""),  # malformed
            (dev, 5, 0, 0),
        ],
        now,
    )
    assert [listing.files for listing in cache.held()] == [["a"]]
    assert not cache.dirty


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: data[:-3] + bytes(3), id="corrupt-payload"),
        pytest.param(lambda data: b"not a store at all", id="foreign-file"),
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(
            lambda data: data[: len(_dirstore.MAGIC)] + (99).to_bytes(2, "big") + data[len(_dirstore.MAGIC) + 2 :],
            id="newer-format-version",
        ),
    ],
)
def test_an_unusable_store_is_ignored_and_the_tree_walked(tree, damage, server, fresh):
    glob(server(tree))
    path = store_of(tree).path
    path.write_bytes(damage(path.read_bytes()))
    (tree / "src" / "fresh.py").write_text("x")
    assert glob(server(tree)) == fresh(tree)
    assert store_of(tree).read() is not None  # written anew by that walk


def test_a_well_formed_store_of_nonsense_is_ignored(tree, server, fresh):
    glob(server(tree))
    store = store_of(tree)
    garbage = _dirstore.Snapshot(
        written_ns=time.time_ns() + AHEAD_NS,
        listings=[("dev", None, 1, 2, 3, 4, 5), (1, 2, 3)],  # type: ignore[list-item]
        texts=["not bytes"],  # type: ignore[list-item]
        ignores=[(1, 2, 3, 4, 5, 99), (1, 2, 9, 4, 5, 0)],
    )
    path = store.path
    path.write_bytes(_dirstore.encode(garbage, store.root))
    assert glob(server(tree)) == fresh(tree)


def test_another_roots_store_is_not_used(tree, tmp_path, server):
    glob(server(tree))
    other = tmp_path / "other"
    other.mkdir()
    data = store_of(tree).path.read_bytes()
    store_of(other).path.write_bytes(data)
    assert store_of(other).read() is None


def test_listing_cache_false_writes_and_reads_nothing(tree, monkeypatch, server):
    glob(server(tree, {"listing_cache": False}))
    assert not store_of(tree).path.exists()
    glob(server(tree))
    seeds = count_calls(monkeypatch, ListingCache, "seed")
    glob(server(tree, {"listing_cache": False}))
    assert seeds[0] == 0


def test_listing_cache_must_be_a_boolean(make):
    with pytest.raises(ConfigError, match="listing_cache"):
        make({"listing_cache": "yes"})


def test_at_most_max_store_files_roots_are_kept(tmp_path, monkeypatch, server):
    monkeypatch.setattr(_dirstore, "MAX_STORE_FILES", 2)
    roots = []
    for n in range(4):
        project = tmp_path / f"p{n}"
        populate(project, {"a.py": "x"})
        age(project)
        glob(server(project))
        roots.append(project)
        os.utime(store_of(project).path, ns=(OLD_NS + n, OLD_NS + n))  # the order of writing, unambiguous
    left = sorted(p.name for p in store_of(roots[0]).directory.iterdir())
    kept = [store_of(r) for r in roots[2:]]
    assert left == sorted([s.path.name for s in kept] + [s.answers_path.name for s in kept])  # answers go with them


def test_set_working_dir_uses_the_new_roots_store(tree, tmp_path, server):
    other = tmp_path / "other"
    populate(other, {"o.py": "x"})
    age(other)
    harness = server(tree)
    harness.ok("glob", {"pattern": "**/*.py"})
    assert harness.server.set_working_dir(other)
    ahead(harness)
    assert harness.ok("glob", {"pattern": "**/*.py"}, conversation="c2") == ["o.py"]
    harness.manager.close()
    assert store_of(other).read() is not None and store_of(tree).read() is not None


# -- any change between two servers -----------------------------------------------------------

DIRS = ["", "d", "d/e", "f"]
NAMES = ["a.py", "b.log", "c.tmp", "g"]
IGNORES = ["*.log\n", "*.tmp\n", "*.py\n\n", "e/\n\n\n\n", "!b.log"]  # six bytes each: edits keep the size

mutation = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(DIRS), st.sampled_from(NAMES)),
    st.tuples(st.just("remove"), st.sampled_from(DIRS), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.sampled_from(DIRS), st.sampled_from(NAMES), st.sampled_from(DIRS)),
    st.tuples(st.just("mkdir"), st.sampled_from(DIRS), st.sampled_from(NAMES)),
    st.tuples(st.just("rmtree"), st.sampled_from(DIRS[1:])),
    st.tuples(st.just("move_dir"), st.sampled_from(DIRS[1:]), st.sampled_from(["h", "d/h", "f/h"])),
    st.tuples(st.just("file_to_dir"), st.sampled_from(DIRS), st.sampled_from(NAMES)),
    st.tuples(st.just("dir_to_file"), st.sampled_from(DIRS[1:])),
    st.tuples(st.just("edit_ignore"), st.sampled_from(DIRS), st.sampled_from(IGNORES)),
    st.tuples(st.just("add_ignore"), st.sampled_from(DIRS), st.sampled_from(IGNORES)),
)


def apply(root: Path, step: tuple[Any, ...]) -> None:
    import shutil

    kind, where = step[0], root / step[1]
    if not where.is_dir():
        return
    if kind == "add":
        if not (where / step[2]).is_dir():
            (where / step[2]).write_text("x")
    elif kind == "remove":
        if (where / step[2]).is_file():
            (where / step[2]).unlink()
    elif kind == "rename":
        source, target = where / step[2], root / step[3] / ("r" + step[2])
        if source.is_file() and target.parent.is_dir() and not target.exists():
            source.rename(target)
    elif kind == "mkdir":
        if not (where / step[2]).exists():
            (where / step[2]).mkdir()
            (where / step[2] / "in.py").write_text("x")
    elif kind == "rmtree":
        shutil.rmtree(where)
    elif kind == "move_dir":
        target = root / step[2]
        if target.parent.is_dir() and not target.exists() and not target.is_relative_to(where):
            where.rename(target)
    elif kind == "file_to_dir":
        if (where / step[2]).is_file():
            (where / step[2]).unlink()
            (where / step[2]).mkdir()
            (where / step[2] / "x.py").write_text("x")
    elif kind == "dir_to_file":
        shutil.rmtree(where)
        where.write_text("now a file")
    elif kind == "edit_ignore":
        if (where / ".gitignore").is_file():
            edit_in_place(where / ".gitignore", step[2])
    elif kind == "add_ignore":
        (where / ".gitignore").write_text(step[2])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=st.lists(st.tuples(st.sampled_from(DIRS), st.sampled_from(NAMES)), min_size=1, max_size=10),
    ignores=st.lists(st.tuples(st.sampled_from(DIRS), st.sampled_from(IGNORES)), max_size=3),
    steps=st.lists(mutation, min_size=1, max_size=6),
    pattern=st.sampled_from(["**/*", "**/*.py", "d/**/*"]),
)
def test_after_any_change_a_new_servers_glob_equals_a_fresh_walk(start, ignores, steps, pattern, server, fresh):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp)) / "root"
        root.mkdir()
        for directory in DIRS:
            (root / directory).mkdir(parents=True, exist_ok=True)
        populate(root, {f"{d}/{n}".lstrip("/"): "x" for d, n in start})
        populate(root, {f"{d}/.gitignore".lstrip("/"): text for d, text in ignores})
        age(root)
        before = glob(server(root), pattern)
        assert before == fresh(root, pattern)
        for step in steps:
            apply(root, step)
        assert glob(server(root), pattern) == fresh(root, pattern)


def test_names_that_are_not_utf8_survive_the_store(tmp_path):
    # (glob's JSON answer cannot carry such a name today; the store itself keeps it exactly)
    now = time.time_ns()
    dev = os.stat("/").st_dev
    name = b"caf\xe9.py".decode("utf-8", "surrogateescape")
    cache = ListingCache(clock=lambda: now)
    cache.seed([(dev, 7, now - AHEAD_NS, now - AHEAD_NS, 2, f"{name}\0b", "sub")], now)
    store = _dirstore.ListingStore(tmp_path, tmp_path / "store")
    store.write(_dirstore.Snapshot(written_ns=now, listings=cache.records(), texts=[], ignores=[]))
    snapshot = store.read()
    assert snapshot is not None
    again = ListingCache(clock=lambda: now)
    again.seed(snapshot.listings, snapshot.written_ns)
    (listing,) = again.held()
    assert (listing.files, listing.dirs, listing.count) == ([name, "b"], ["sub"], 2)


# -- file names kept as the store's text -------------------------------------------------------

file_name = st.text(st.characters(blacklist_characters="\0/", blacklist_categories=("Cs",)), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(st.one_of(file_name, st.sampled_from([".py", "a.py", "py", ".gitignore"])), max_size=12),
    suffix=st.one_of(st.sampled_from(["", ".py", "py", "y", ".gitignore"]), file_name),
)
def test_names_ending_with_a_suffix_are_found_in_the_joined_text_as_in_the_list(names, suffix):
    from entropic_mcp_filesystem._glob import ending_with

    assert ending_with("\0".join(names), suffix) == [n for n in names if n.endswith(suffix)]


@pytest.mark.parametrize(
    ("text", "has"),
    [
        (".gitignore", True),
        (".gitignore\0a", True),
        ("a\0.gitignore", True),
        ("a\0.gitignore\0b", True),
        ("", False),
        ("x.gitignore", False),
        (".gitignore2\0a", False),
        ("a\0x.gitignore\0.gitignorex", False),
    ],
)
def test_a_listing_from_the_store_knows_its_gitignore_and_weight_without_splitting(text, has):
    from entropic_mcp_filesystem._dircache import Listing

    listing = Listing(mtime=1, ctime=1, count=3, text=text, dirs=["d"])
    assert listing.has_gitignore is has
    names = text.split("\0") if text else []
    assert listing.weight == len(names) + 2 and listing.has_files is bool(names)
    assert listing._files is None and listing.text == text  # nothing split yet
    assert listing.files == names and listing.text == text and listing._text is None  # one copy kept


def test_a_first_glob_by_suffix_from_the_store_splits_no_listing(tree, server, fresh):
    glob(server(tree), "**/*.md")  # writes the store
    harness = server(tree)
    # below the root (a walk from the root keeps every file's name for its whole answer)
    assert harness.ok("glob", {"pattern": "**/*.py", "path": "src"}) == ["src/m.py", "src/pkg/n.py"]
    listings = list(harness.server.ignore_cache.listings.held())
    assert listings and all(listing._files is None for listing in listings)
    assert glob(harness, "**/*") == fresh(tree, "**/*")  # names split where a pattern needs them
