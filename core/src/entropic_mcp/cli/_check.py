"""``entropic-mcp check-plugin``: the plugin-author kit's conformance checks, as a report."""

from __future__ import annotations

import click

from ._common import CLIError, build_manager, echo_json


@click.command("check-plugin")
@click.argument("name")
@click.option("--examples", default=60, show_default=True, help="Generated calls per tool.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def check_plugin(ctx: click.Context, name: str, examples: int, as_json: bool) -> None:
    """Run the conformance checks against the installed plugin NAME."""
    from ..testing import check_server

    manager = build_manager(ctx)
    info = manager.plugins.infos.get(name)
    if info is None:
        raise click.UsageError(f"no plugin {name!r}; see `entropic-mcp plugins`")
    if info.status != "active":
        raise CLIError(f"plugin {name!r} is {info.status}: {info.error}")
    report = []
    for server_name in info.servers:
        problems = check_server(manager.servers[server_name], examples=examples, raise_on_failure=False)
        report.append({"server": server_name, "ok": not problems, "problems": problems})
    if as_json:
        echo_json(report)
    else:
        for entry in report:
            status = "ok" if entry["ok"] else f"{len(entry['problems'])} problem(s)"
            click.echo(f"{name}: server {entry['server']}: {status}")
            for problem in entry["problems"]:
                click.echo(f"  - {problem}")
    if any(not entry["ok"] for entry in report):
        ctx.exit(1)
