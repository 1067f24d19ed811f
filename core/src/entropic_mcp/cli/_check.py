"""``entropic-mcp check-plugin``: ``entropic_mcp.testing.check_plugin`` on an installed plugin, with progress."""

from __future__ import annotations

from typing import Any

import click

from ._common import CLIError, echo_json, load


@click.command("check-plugin")
@click.argument("name")
@click.option("--examples", default=50, show_default=True, help="Generated argument sets per tool.")
@click.option(
    "--timeout",
    "call_timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds one tool call may take before it is cancelled and reported.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@click.pass_context
def check_plugin(ctx: click.Context, name: str, examples: int, call_timeout: float, as_json: bool, quiet: bool) -> None:
    """Run the plugin-author kit's checks against the installed plugin NAME.

    Imports the plugin, calls every hook it implements, and calls every tool of every server
    with generated schema-valid arguments and with junk. Progress goes to stderr, the report
    to stdout; exit status 1 when there is any problem.
    """
    try:
        from ..testing import NoSuchPlugin
        from ..testing import check_plugin as run_checks
        from ..testing._plugin_checks import installed_server_names
        from ..testing._strategies import require_hypothesis

        require_hypothesis()
    except ImportError as exc:
        raise CLIError(str(exc)) from None

    config = load(ctx)

    def progress(line: str) -> None:
        if not quiet:
            click.echo(f"{name}: {line}", err=True)

    progress("finding the server names other installed plugins register")
    taken = installed_server_names(exclude=name, config=config)
    details: dict[str, Any] = {}
    try:
        problems = run_checks(
            name,
            config=config,
            examples=examples,
            call_timeout=call_timeout,
            raise_on_failure=False,
            progress=progress,
            taken=taken,
            details=details,
        )
    except NoSuchPlugin as exc:
        raise click.UsageError(f"{exc}; see `entropic-mcp plugins`") from None
    servers = details.get("servers", [])
    hooks = details.get("hooks", [])
    if as_json:
        echo_json({"plugin": name, "ok": not problems, "servers": servers, "hooks": hooks, "problems": problems})
    else:
        what = f"servers {', '.join(servers)}" if servers else f"no servers; hooks {', '.join(hooks) or 'none'}"
        click.echo(f"{name}: {'ok' if not problems else f'{len(problems)} problem(s)'} ({what})")
        for problem in problems:
            click.echo(f"  - {problem}")
    if problems:
        ctx.exit(1)
