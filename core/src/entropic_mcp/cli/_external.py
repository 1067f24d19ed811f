"""``entropic-mcp external``: approve a project's ``.mcp.json`` and see what external servers run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._common import CLIError, echo_json, load


@click.group()
def external() -> None:
    """External MCP servers: approve a project's .mcp.json, list what runs."""


def _mcp_json_of(ctx: click.Context, given: str | None) -> Path:
    if given is not None:
        return Path(given).resolve()
    config = load(ctx)
    if config.mcp_json is None:
        raise CLIError("import_mcp_json is not set in the config; name the file: entropic-mcp external approve FILE")
    return config.mcp_json


def _describe(entry: Any) -> str:
    if entry.transport == "http":
        return f"{entry.name}: {entry.url}"
    return f"{entry.name}: {' '.join([entry.command, *entry.args])}"


@external.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.pass_context
def approve(ctx: click.Context, file: str | None) -> None:
    """Approve FILE's servers (default: the config's import_mcp_json file) as they are now.

    The approval is the file's sha256, kept in your per-user data directory (not in the
    project); any later change to the file needs a new approval before its servers run.
    """
    from .._config import import_mcp_json, read_mcp_json
    from .._userdata import approve as record

    path = _mcp_json_of(ctx, file)
    content = read_mcp_json(path)
    servers = import_mcp_json(path, {}, content=content)  # refuses a file that would not load
    digest = record(path, content)
    click.echo(f"approved {path} (sha256 {digest[:16]}…); its servers run from the next start:")
    for entry in servers.values():
        click.echo(f"  {_describe(entry)}")


@external.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_servers(ctx: click.Context, as_json: bool) -> None:
    """The external servers the config starts, and whether its .mcp.json is approved."""
    config = load(ctx)
    rows = [
        {"name": e.name, "source": e.source, "transport": e.transport, "runs": _describe(e)}
        for e in config.external.values()
    ]
    mcp_json = None
    if config.mcp_json is not None:
        mcp_json = {"file": str(config.mcp_json), "approved": config.mcp_json_approved}
    if as_json:
        echo_json({"servers": rows, "mcp_json": mcp_json})
        return
    if mcp_json is not None:
        state = "approved" if config.mcp_json_approved else "NOT approved (none of its servers run)"
        click.echo(f"{config.mcp_json}: {state}")
    for row in rows:
        click.echo(f"{row['runs']}  ({row['source']})")
    if not rows:
        click.echo("no external servers")
