"""attrs' generated methods kept between command-line runs (``_codecache``): same classes, no compiling
the second time, and nothing changed where attrs is not the attrs it was written for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from attr import _make
from entropic_mcp import _codecache

# Defines classes the way the core does, prints what they do, and whether this run compiled any
# generated method (``_codecache._new``) or found them all in the cache.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    from entropic_mcp import _codecache
    installed = _codecache.install(sys.argv[1]) if sys.argv[1] != "-" else False
    import attrs

    @attrs.frozen(kw_only=True)
    class Point:
        x: int
        y: int = attrs.field(default=0, converter=int)
        label: str = attrs.field(default="", eq=False)

    @attrs.define
    class Box:
        items: list = attrs.field(factory=list)

    p = Point(x=1, y="2", label="a")
    box = Box()
    box.items.append(p)
    print(json.dumps({
        "installed": installed,
        "compiled": _codecache._new,
        "repr": repr(box),
        "eq": p == Point(x=1, y=2, label="b"),
        "hash": hash(p) == hash(Point(x=1, y=2)),
        # what attrs' own __hash__ computes, with this process's type hash
        "attrs_hash": hash(p) == hash((hash("<attrs generated hash __main__.Point>"), 1, 2)),
        "frozen": type(attrs.exceptions.FrozenInstanceError()).__name__,
        "fields": [f.name for f in attrs.fields(Point)],
    }))
    """
)


def _run(directory: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, directory], capture_output=True, text=True, check=True, env=dict(os.environ)
    )
    return json.loads(done.stdout)


def test_second_run_compiles_nothing_and_the_classes_are_the_same(tmp_path):
    plain = _run("-")
    first = _run(str(tmp_path))
    second = _run(str(tmp_path))
    assert first["installed"] and second["installed"]
    assert first["compiled"] is True
    assert second["compiled"] is False
    assert plain["attrs_hash"] and first["attrs_hash"] and second["attrs_hash"]
    for run in (first, second):
        assert {k: v for k, v in run.items() if k not in ("installed", "compiled")} == {
            k: v for k, v in plain.items() if k not in ("installed", "compiled")
        }
    assert [p.name for p in tmp_path.iterdir()] == [f for f in os.listdir(tmp_path) if f.endswith(".marshal")]


def test_an_unreadable_cache_file_is_compiled_anew_and_rewritten(tmp_path):
    _run(str(tmp_path))
    (cache,) = tmp_path.iterdir()
    cache.write_bytes(b"\x00not marshal")
    again = _run(str(tmp_path))
    assert again["compiled"] is True
    assert _run(str(tmp_path))["compiled"] is False


def test_not_installed_over_an_attrs_whose_function_differs(monkeypatch, tmp_path):
    monkeypatch.setattr(_codecache, "_path", None)

    def other(script, globs, locs=None, filename="", extra=None):  # pragma: no cover - never called
        raise AssertionError

    monkeypatch.setattr(_make, "_compile_and_eval", other)
    assert _codecache.install(str(tmp_path)) is False
    assert _make._compile_and_eval is other
    assert _codecache._path is None


def test_the_command_line_keeps_the_cache_unless_turned_off(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "entropic-mcp.toml").write_text('[entropic_mcp]\nplugins = []\n[storage]\nbackend = "none"\n')
    code = "import sys; from entropic_mcp.cli import main; main(['plugins', '--json'])"
    for switch, data in (("0", tmp_path / "off"), ("1", tmp_path / "on")):
        env = {**os.environ, "ENTROPIC_MCP_DATA_DIR": str(data), "ENTROPIC_MCP_CODE_CACHE": switch}
        subprocess.run([sys.executable, "-c", code], cwd=project, env=env, check=True, capture_output=True)
    assert not (tmp_path / "off" / "cache").exists()
    assert [p.suffix for p in (tmp_path / "on" / "cache").iterdir() if p.is_file()] == [".marshal"]
