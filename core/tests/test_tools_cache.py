"""``entropic-mcp tools`` answers from its listing cache only while nothing the listing depends on changed.

Real processes (the cache is used by the command line, not by CliRunner), a private data directory.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from entropic_mcp.cli import _listing

FAKE_SITE = Path(__file__).parent / "fake_site"
CONFIG = '[entropic_mcp]\nplugins = ["fakegood"]\n[storage]\nbackend = "none"\n'


def _backdate(root: Path, seconds: float = 30.0) -> None:
    past = time.time() - seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past), follow_symlinks=False)


@pytest.fixture
def project(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(FAKE_SITE, site)
    work = tmp_path / "work"
    work.mkdir()
    (work / "entropic-mcp.toml").write_text(CONFIG)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")},
        "ENTROPIC_MCP_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(site),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    _backdate(tmp_path)
    return work, env, tmp_path / "data" / "cache" / "tools"


def tools(work: Path, env: dict[str, str], *args: str) -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-c", "from entropic_mcp.cli import main; main()", "tools", "--json", *args],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _valid(entry: Path) -> bool:
    depends = json.loads(entry.read_bytes())["depends"]
    return all(_listing._signature(p) == (tuple(s) if s else None) for p, s in depends)


def tampered_entry(work: Path, env: dict[str, str], cache: Path) -> Path:
    """Fill the cache, then change what it holds, so a listing read from it is recognisable.

    Another process editing the installed sources (a developer's tree) invalidates an entry:
    filling is retried then.
    """
    for _ in range(5):
        tools(work, env)
        entries = list(cache.glob("*.json"))
        if len(entries) == 1 and _valid(entries[0]):
            entry = json.loads(entries[0].read_bytes())
            entry["listing"]["rows"][0]["description"] = "from the cache"
            entries[0].write_text(json.dumps(entry))
            return entries[0]
        shutil.rmtree(cache, ignore_errors=True)
        time.sleep(2.5)
    pytest.fail(f"no valid cache entry was stored in {cache}")


def test_an_unchanged_setup_is_answered_from_the_cache(project):
    work, env, cache = project
    fresh = tools(work, env)
    assert [t["name"] for t in fresh] == ["good.ping"]
    entry = tampered_entry(work, env, cache)
    assert tools(work, env)[0]["description"] == "from the cache"
    if not _valid(entry):
        pytest.skip("an installed source file changed during the test")


def test_an_edited_config_file_is_listed_afresh(project):
    work, env, cache = project
    tampered_entry(work, env, cache)
    config = work / "entropic-mcp.toml"
    stat = config.stat()
    # Same size and mtime: only the inode change time tells the edit apart.
    config.write_text(CONFIG.replace('"fakegood"', '"fakegooX"'))
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    listing = subprocess.run(
        [sys.executable, "-c", "from entropic_mcp.cli import main; main()", "tools", "--json"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=120,
    )
    assert "from the cache" not in listing.stdout
    assert "fakegooX" in listing.stderr  # the unknown plugin is reported, not served from the cache


def test_a_local_config_file_appearing_is_listed_afresh(project):
    work, env, cache = project
    tampered_entry(work, env, cache)
    (work / "entropic-mcp.local.toml").write_text("[pipeline]\nmax_result_bytes = 20000\n")
    assert tools(work, env)[0]["description"] == "Answer pong."


def test_an_edited_plugin_module_is_listed_afresh(project):
    work, env, cache = project
    tampered_entry(work, env, cache)
    module = work.parent / "site" / "fake_good.py"
    module.write_text(module.read_text() + "\n# edited\n")
    assert tools(work, env)[0]["description"] == "Answer pong."


def test_a_changed_environment_or_the_switch_lists_afresh(project):
    work, env, cache = project
    tampered_entry(work, env, cache)
    assert tools(work, {**env, "SOMETHING_NEW": "1"})[0]["description"] == "Answer pong."
    assert tools(work, {**env, _listing.ENV_SWITCH: "0"})[0]["description"] == "Answer pong."
    assert tools(work, env)[0]["description"] == "from the cache"


def test_a_listing_that_warned_is_not_kept(project):
    work, env, cache = project
    (work / "entropic-mcp.toml").write_text(CONFIG.replace('"fakegood"', '"fakegood", "fakebroken"'))
    _backdate(work)
    tools(work, env)
    tools(work, env)
    assert not list(cache.glob("*.json"))


def test_the_cache_directory_names_the_data_directory_variable_of_userdata():
    from entropic_mcp import _cachedir, _userdata

    assert _cachedir.ENV_DATA_DIR == _userdata.ENV_DATA_DIR


def _raw(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from entropic_mcp.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=120,
    )


def test_a_cached_answer_prints_exactly_what_the_full_path_prints(project):
    work, env, cache = project
    tampered_entry(work, env, cache)
    entry = next(cache.glob("*.json"))
    data = json.loads(entry.read_bytes())
    data["listing"]["rows"][0]["description"] = "Answer pong."  # undo the marker: the same listing
    entry.write_text(json.dumps(data))
    off = {**env, _listing.ENV_SWITCH: "0"}
    for args in (["tools", "--json"], ["tools", "--server", "good", "--json"], ["tools", "--json", "--server=good"]):
        quick, full = _raw(work, env, *args), _raw(work, off, *args)
        assert (quick.returncode, quick.stdout, quick.stderr) == (full.returncode, full.stdout, full.stderr), args


def test_an_unknown_server_is_still_a_usage_error_with_a_cache(project):
    work, env, cache = project
    tampered_entry(work, env, cache)
    result = _raw(work, env, "tools", "--server", "nope", "--json")
    assert result.returncode == 2
    assert "no server 'nope'" in result.stderr


def test_the_quick_answer_takes_only_the_tools_json_command(project):
    work, env, cache = project
    tampered_entry(work, env, cache)
    cache_key = next(cache.glob("*.json")).stem
    assert _listing.answer_quickly(["tools"]) is None  # a table: click's path
    assert _listing.answer_quickly(["tools", "--json", "--debug"]) is None
    assert _listing.answer_quickly(["plugins", "--json"]) is None
    assert _listing.answer_quickly(["tools", "--json", "--", "x"]) is None
    assert cache_key  # the entry the real process wrote (this process's key differs: its sys.path)
