"""The click group of the ``entropic-mcp`` command line (sub-commands are imported when they run)."""

from __future__ import annotations

import importlib

import click

from ._commands import LAZY_COMMANDS


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
