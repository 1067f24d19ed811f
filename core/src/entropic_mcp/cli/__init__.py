"""The ``entropic-mcp`` command line. Sub-commands are imported only when they run."""

from __future__ import annotations

import sys
from typing import Any

#: name -> (module:attribute, one-line help shown by --help without importing the module)
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "plugins": ("entropic_mcp.cli._inspect:plugins", "List plugins, their status, hooks and servers."),
    "tools": ("entropic_mcp.cli._inspect:tools", "List every tool with its access level and annotations."),
    "call": ("entropic_mcp.cli._call:call", "Call one tool through the whole pipeline."),
    "run": ("entropic_mcp.cli._run:run", "Run a task through the reference host, each tier on a real model."),
    "init": ("entropic_mcp.cli._config:init", "Write a commented starter entropic-mcp.toml."),
    "config": ("entropic_mcp.cli._config:config", "Print the effective configuration and its sources."),
    "check-rule": (
        "entropic_mcp.cli._rule:check_rule",
        "What the rules decide for one call, and what the OS sandbox lets it touch.",
    ),
    "check-plugin": ("entropic_mcp.cli._check:check_plugin", "Run the conformance checks against a plugin."),
    "new-plugin": ("entropic_mcp.cli._scaffold:new_plugin", "Create a working, tested plugin to build on."),
    "storage": (
        "entropic_mcp.cli._storage:storage",
        "Look into the store: conversations, delegations, search; prune old plugin state.",
    ),
    "external": (
        "entropic_mcp.cli._external:external",
        "External MCP servers: approve a project's .mcp.json, list what runs.",
    ),
    "serve": ("entropic_mcp.cli._serve:serve", "Serve every tool over MCP (stdio or Streamable HTTP)."),
    "demo": ("entropic_mcp.cli._serve:demo", "Start serve and drive it with a real MCP client."),
}


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
