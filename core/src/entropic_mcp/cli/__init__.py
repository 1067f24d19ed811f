"""The ``entropic-mcp`` command line. Sub-commands are imported only when they run."""

from __future__ import annotations

import os
import sys
from typing import Any

from ._commands import LAZY_COMMANDS as LAZY_COMMANDS

#: ``0`` turns off the cache of attrs' generated methods (``entropic_mcp._codecache``).
CODE_CACHE_SWITCH = "ENTROPIC_MCP_CODE_CACHE"


def __getattr__(name: str) -> Any:
    # The click group is built on first use: ``tools --json`` answered from the listing cache
    # never imports click (most of what a cached listing would otherwise cost).
    if name in ("cli", "LazyGroup"):
        from . import _group

        return getattr(_group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _hoist_config(argv: list[str]) -> list[str]:
    """``--config PATH`` works before or after the command name: move it to the front."""
    out: list[str] = []
    hoisted: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out.extend(argv[i:])
            break
        if arg == "--config" and i + 1 < len(argv):
            hoisted = [arg, argv[i + 1]]
            i += 2
            continue
        if arg.startswith("--config="):
            hoisted = [arg]
        elif arg == "--debug":
            hoisted.append(arg)
        else:
            out.append(arg)
        i += 1
    return hoisted + out


def main(argv: list[str] | None = None) -> Any:
    args = list(sys.argv[1:] if argv is None else argv)
    from ._listing import answer_quickly

    quick = answer_quickly(_hoist_config(args))
    if quick is not None:
        sys.stdout.write(quick)
        sys.stdout.flush()
        return 0
    import gc

    if os.environ.get(CODE_CACHE_SWITCH, "1") not in ("0", "false", "no", "off"):
        from .. import _codecache
        from .._userdata import data_dir

        # Before the core is imported: its attrs classes' methods come compiled from the last run.
        # Kept in the per-user data directory, which no tool may write (``Config.private_dirs``):
        # what is loaded from there runs in this process, outside any sandbox.
        _codecache.install(os.path.join(data_dir(), "cache"))

    from ._common import run
    from ._group import cli

    # Off while plugins and (for serve) the MCP SDK load; ``_common.settle`` turns it back on.
    gc.disable()
    try:
        args = _hoist_config(args)
        # A real command line (not a test's CliRunner) may answer ``tools`` from its listing cache.
        return run(cli, args, debug="--debug" in args, obj={"listing_cache": True})
    finally:
        gc.enable()
