"""The ``entropic-mcp`` command line. Sub-commands are imported only when they run."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

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


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = LAZY_COMMANDS.get(name)
        if entry is None:
            return None
        module, _, attribute = entry[0].partition(":")
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, LAZY_COMMANDS[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file (default: ./entropic-mcp.toml or $ENTROPIC_MCP_CONFIG).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(package_name="entropic-mcp")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, debug: bool) -> None:
    """Permissioned MCP tool servers for agent hosts."""
    ctx.ensure_object(dict)
    ctx.obj.setdefault("config_path", config_path)
    ctx.obj["debug"] = debug


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
    import gc

    from ._common import run

    # Off while plugins and (for serve) the MCP SDK load; ``_common.settle`` turns it back on.
    gc.disable()
    try:
        args = _hoist_config(list(sys.argv[1:] if argv is None else argv))
        # A real command line (not a test's CliRunner) may answer ``tools`` from its listing cache.
        return run(cli, args, debug="--debug" in args, obj={"listing_cache": True})
    finally:
        gc.enable()
