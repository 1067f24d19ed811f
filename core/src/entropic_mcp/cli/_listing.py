"""A cache of ``entropic-mcp tools``'s listing, so listing the tools does not load every plugin again.

Building the listing imports the core, every plugin and their tools (some 260 modules and a
hundred attrs classes) and configures every server: most of a second on a busy machine. What it
produces depends only on files and on the process's surroundings, so the command keeps what it
printed together with everything it depended on, and answers from that while none of it changed:

- the surroundings: the interpreter and ``sys.path``, the working directory, the command's
  arguments and **the whole environment** (any variable set, changed or removed is a miss, but
  for a few a shell changes on every command, such as ``$_`` and ``$SHLVL``);
- every file the build opened (found with an audit hook: config files, policy files, tool
  definitions, distribution metadata, approvals), every directory it listed (an installed or
  removed distribution changes its ``site-packages``'s listing), and the source file of every
  module loaded (an edited plugin or core module, editable installs included), each by
  ``(device, inode, size, mtime, ctime)``;
- the files a build only looks for (the project and local config files beside the working
  directory, ``$ENTROPIC_MCP_CONFIG``), by presence.

A listing is stored only when every file it depends on is at least two seconds old (as git's
index treats "racily clean" entries), so an edit in the same clock tick as the build cannot
hide behind an unchanged mtime; and only when the build raised no warning and configured no
external server (those are listed by asking running processes). Entries live in
``$ENTROPIC_MCP_DATA_DIR/cache/tools/`` when that is set, else in the user's cache directory
(``~/.cache/entropic-mcp/tools/`` on Linux), one small JSON file per key;
``ENTROPIC_MCP_TOOLS_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from .._cachedir import cache_directory

ENV_SWITCH = "ENTROPIC_MCP_TOOLS_CACHE"
VERSION = 1
#: How old a dependency must be before a listing that depends on it is stored.
SETTLED_SECONDS = 2.0
#: Entries kept; the oldest are removed past this.
MAX_ENTRIES = 32
#: Variables a shell or a benchmark runner changes on every command, and nothing reads.
VOLATILE_ENV = frozenset({"_", "OLDPWD", "SHLVL", "HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET"})

Signature = tuple[int, int, int, int, int] | None

_recording: set[str] | None = None
_hooked = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recording is None:
        return
    if event == "open" or event == "os.listdir" or event == "os.scandir":
        path = args[0] if args else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if isinstance(path, str) and path:
            _recording.add(os.path.abspath(path))


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") not in ("0", "false", "no", "off")


def key(args: Iterable[str]) -> str:
    material = {
        "version": VERSION,
        "python": [sys.executable, sys.version, list(sys.path)],
        "cwd": os.getcwd(),
        "args": list(args),
        "env": sorted(item for item in os.environ.items() if item[0] not in VOLATILE_ENV),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _signature(path: str) -> Signature:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _looked_for() -> list[str]:
    """Files a build only checks for: their appearing or vanishing changes the listing."""
    from .._config import CONFIG_NAME, ENV_CONFIG, LOCAL_NAME

    cwd = os.getcwd()
    paths = [os.path.join(cwd, CONFIG_NAME), os.path.join(cwd, LOCAL_NAME)]
    explicit = os.environ.get(ENV_CONFIG)
    if explicit:
        paths.append(os.path.abspath(explicit))
        paths.append(os.path.join(os.path.dirname(os.path.abspath(explicit)), LOCAL_NAME))
    return paths


def _directory() -> str:
    """``<data dir>/cache/tools`` with ``$ENTROPIC_MCP_DATA_DIR``, else the user's cache directory's ``tools``."""
    return cache_directory("tools")


def load(cache_key: str) -> Any | None:
    """The stored listing for ``cache_key`` if nothing it depends on changed, else None."""
    try:
        with open(os.path.join(_directory(), cache_key + ".json"), "rb") as fh:
            entry = json.loads(fh.read())
        if entry.get("version") != VERSION:
            return None
        for path, signature in entry["depends"]:
            if _signature(path) != (tuple(signature) if signature is not None else None):
                return None
        return entry["listing"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def answer_quickly(args: list[str]) -> str | None:
    """What ``tools --json [--server S]`` prints, from the cache, before click is even imported.

    ``args`` as the command line gives them (``--config`` hoisted to the front). None whenever
    this is not that command or the cache has no current answer: the usual path then runs, and
    gives the same output (or the error, e.g. for an unknown server).
    """
    if not enabled():
        return None
    config = ""
    rest = list(args)
    if rest[:1] == ["--config"] and len(rest) > 1:
        config, rest = rest[1], rest[2:]
    elif rest and rest[0].startswith("--config="):
        config, rest = rest[0].partition("=")[2], rest[1:]
    if rest[:1] != ["tools"]:
        return None
    server: str | None = None
    as_json = False
    i = 1
    while i < len(rest):
        arg = rest[i]
        if arg == "--json":
            as_json = True
        elif arg == "--server" and i + 1 < len(rest):
            server = rest[i + 1]
            i += 1
        elif arg.startswith("--server="):
            server = arg.partition("=")[2]
        else:
            return None  # --help, a table, anything else: click's path
        i += 1
    if not as_json:
        return None
    listing = load(key(["tools", config]))
    try:
        if listing is None or (server is not None and server not in listing["servers"]):
            return None
        rows = [row for row in listing["rows"] if server in (None, row["server"])]
    except (KeyError, TypeError):
        return None
    import orjson

    return orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n"


def build(cache_key: str, produce: Callable[[], tuple[Any, bool]]) -> Any:
    """Run ``produce`` (which returns the listing and whether it may be kept), recording what it reads."""
    global _recording, _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    import warnings

    seen: set[str] = set()
    shown = warnings.showwarning
    warned = []

    def note_warning(*args: Any, **kwargs: Any) -> None:
        warned.append(True)
        shown(*args, **kwargs)

    _recording = seen
    warnings.showwarning = note_warning
    try:
        listing, keep = produce()
    finally:
        _recording = None
        if warnings.showwarning is note_warning:
            warnings.showwarning = shown
    if keep and not warned:
        _store(cache_key, listing, seen)
    return listing


def _store(cache_key: str, listing: Any, seen: set[str]) -> None:
    paths = set(seen)
    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if isinstance(source, str):
            paths.add(os.path.abspath(source))
    paths.update(_looked_for())
    directory = _directory()
    settled = time.time() - SETTLED_SECONDS
    depends: list[tuple[str, Signature]] = []
    for path in sorted(paths):
        if path.startswith(("/dev/", "/proc/", "/sys/")) or path.startswith(directory):
            continue
        if path.endswith(".pyc"):  # derived from a source file that is itself a dependency
            continue
        signature = _signature(path)
        if signature is not None and max(signature[3], signature[4]) / 1e9 > settled:
            return  # changed just now: an edit in the same tick would go unseen
        depends.append((path, signature))
    entry = {"version": VERSION, "depends": depends, "listing": listing}
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        target = os.path.join(directory, cache_key + ".json")
        partial = f"{target}.{os.getpid()}.tmp"
        with open(partial, "w", encoding="utf-8") as fh:
            json.dump(entry, fh)
        os.replace(partial, target)
        _prune(directory)
    except OSError:
        pass  # a cache that cannot be written only costs the next run its time


def _prune(directory: str) -> None:
    entries = []
    with os.scandir(directory) as it:
        for item in it:
            if item.name.endswith(".json"):
                try:
                    entries.append((item.stat().st_mtime, item.path))
                except OSError:
                    continue
    for _, path in sorted(entries)[:-MAX_ENTRIES]:
        try:
            os.unlink(path)
        except OSError:
            pass
