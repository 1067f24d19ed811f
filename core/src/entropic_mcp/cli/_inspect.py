"""``entropic-mcp plugins`` and ``entropic-mcp tools``."""

from __future__ import annotations

import warnings
from typing import Any, cast

import click

from . import _listing as _cache
from ._common import build_manager, config_path, echo_json, table


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
    listing = _listing(ctx)
    if server_name is not None and server_name not in listing["servers"]:
        servers = ", ".join(listing["servers"]) or "none"
        raise click.UsageError(f"no server {server_name!r}; servers: {servers}")
    rows = [r for r in listing["rows"] if server_name in (None, r["server"])]
    notes = {
        f"{name}.{tool}": reason
        for name, reasons in listing["notes"].items()
        if server_name in (None, name)
        for tool, reason in reasons.items()
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


def _listing(ctx: click.Context) -> dict[str, Any]:
    """Every tool of every server, from the listing cache when nothing it depends on changed."""

    def produce() -> tuple[dict[str, Any], bool]:
        manager = build_manager(ctx)
        rows = [
            {**tool, "server": tool["name"].partition(".")[0], "access": manager.access_level(tool["name"]).name}
            for tool in manager.list_tools()
        ]
        notes = {
            name: dict(getattr(server, "unavailable_tools", dict)() or {}) for name, server in manager.servers.items()
        }
        listing = {"servers": list(manager.servers), "rows": rows, "notes": notes}
        # External servers are listed by asking their processes: nothing on disk says when that changes.
        return listing, not manager.config.external and manager.config.mcp_json is None

    if not (ctx.find_root().obj or {}).get("listing_cache") or not _cache.enabled():
        return produce()[0]
    key = _cache.key(["tools", config_path(ctx) or ""])
    cached = _cache.load(key)
    if cached is not None:
        return cast(dict[str, Any], cached)
    return cast(dict[str, Any], _cache.build(key, produce))
