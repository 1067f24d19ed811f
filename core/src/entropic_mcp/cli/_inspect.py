"""``entropic-mcp plugins`` and ``entropic-mcp tools``."""

from __future__ import annotations

import warnings

import click

from ._common import build_manager, echo_json, table


@click.command()
@click.option("--all", "include_builtins", is_flag=True, help="Include the core's built-in plugins.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def plugins(ctx: click.Context, include_builtins: bool, as_json: bool) -> None:
    """List plugins: distribution, version, hooks, servers, status and load error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        manager = build_manager(ctx)
    listing = manager.plugins.listing(include_builtins=include_builtins)
    if as_json:
        echo_json([info.to_dict() for info in listing])
        return
    table(
        "entropic-mcp plugins",
        ["name", "distribution", "version", "status", "servers", "hooks", "error"],
        [
            [
                i.name,
                i.distribution or "",
                i.version or "",
                i.status,
                ", ".join(i.servers),
                ", ".join(h.removeprefix("entropic_mcp_") for h in i.hooks),
                i.error or "",
            ]
            for i in listing
        ],
    )


@click.command()
@click.option("--server", "server_name", default=None, help="Only this server's tools.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (MCP tool objects plus access and server).")
@click.pass_context
def tools(ctx: click.Context, server_name: str | None, as_json: bool) -> None:
    """List every tool with its access level and annotations."""
    manager = build_manager(ctx)
    if server_name is not None and server_name not in manager.servers:
        raise click.UsageError(f"no server {server_name!r}; servers: {', '.join(manager.servers) or 'none'}")
    rows = []
    for tool in manager.list_tools():
        server = tool["name"].partition(".")[0]
        if server_name is not None and server != server_name:
            continue
        rows.append({**tool, "server": server, "access": manager.access_level(tool["name"]).name})
    notes = {
        f"{name}.{tool}": reason
        for name, server in manager.servers.items()
        if server_name in (None, name)
        for tool, reason in (getattr(server, "unavailable_tools", dict)() or {}).items()
    }
    if as_json:
        echo_json(rows)
        return
    table(
        "entropic-mcp tools",
        ["tool", "access", "hints", "description"],
        [
            [
                r["name"],
                r["access"],
                ", ".join(k.removesuffix("Hint") for k, v in r.get("annotations", {}).items() if v is True),
                (r.get("description") or "").split("\n")[0][:80],
            ]
            for r in rows
        ],
    )
    for name, reason in sorted(notes.items()):
        click.echo(f"not available: {name} — {reason}")
