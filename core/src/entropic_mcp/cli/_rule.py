"""``entropic-mcp check-rule``: what the rules decide for one call, and what it could touch if it ran."""

from __future__ import annotations

from typing import Any

import click

from ._common import build_manager, echo_json


def explain(manager: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The rules' decision for ``tool(args)`` and its server's sandbox, as plain data."""
    from .._pipeline._permission import read_only
    from .._sandbox import HostSandbox

    resolved = manager.resolve(tool)
    if resolved is None:
        raise click.UsageError(f"no tool {tool!r}; `entropic-mcp tools` lists them")
    server, _ = resolved
    name = tool.partition(".")[2]
    parts, pattern = manager.permission.parts(server, name, args)
    verdict = manager.permissions.judge(parts, read_only=read_only(server, name))
    sandbox = HostSandbox(manager.config, manager.permissions).for_server(server.name)
    if server.name == "git":
        sandbox = sandbox.allowing(git_config=True)
    layout = sandbox.layout() if sandbox.active else None
    return {
        "tool": tool,
        "pattern": pattern,
        "decision": verdict.decision,
        "parts": [
            {"names": list(v.part.names[:2]), "decision": v.decision, "rule": v.rule, "kind": v.kind}
            for v in verdict.verdicts
        ],
        "sandbox": {
            "mode": sandbox.mode,
            "mechanism": sandbox.mechanism,
            "network": sandbox.network if layout is not None else True,
            "writable": [str(p) for p in layout.writable] + ["/tmp (private)"]
            if layout is not None
            else ["everything"],
            "read_only": sorted({str(p) for p in layout.read_only} | {str(path) for path, _ in layout.missing})
            if layout is not None
            else [],
            "unreadable": [str(p) for p in (*layout.hidden_files, *layout.hidden_dirs)] if layout is not None else [],
        },
    }


@click.command("check-rule")
@click.argument("tool")
@click.argument("args_json", default="{}")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def check_rule(ctx: click.Context, tool: str, args_json: str, as_json: bool) -> None:
    """What the rules decide for TOOL called with ARGS_JSON, and what it may touch if it runs.

    Example: entropic-mcp check-rule bash.execute '{"command": "python -c pass"}'
    """
    import orjson

    try:
        args = orjson.loads(args_json)
    except orjson.JSONDecodeError as exc:
        raise click.UsageError(f"ARGS_JSON is not valid JSON ({exc})") from None
    if not isinstance(args, dict):
        raise click.UsageError('ARGS_JSON must be a JSON object, e.g. \'{"command": "ls"}\'')
    data = explain(build_manager(ctx), tool, args)
    if as_json:
        echo_json(data)
        return
    click.echo(f"{tool}: {data['decision']} (pattern {data['pattern']})")
    for part in data["parts"]:
        rule = f" by {part['rule']}" if part["rule"] else ""
        click.echo(f"  {part['names'][0]}: {part['decision']} ({part['kind']}){rule}")
    box = data["sandbox"]
    click.echo(f"sandbox: {box['mode']}, {box['mechanism']}; network {'on' if box['network'] else 'off'}")
    click.echo("  may write: " + ", ".join(box["writable"]))
    if box["read_only"]:
        click.echo("  read-only inside: " + ", ".join(box["read_only"]))
    if box["unreadable"]:
        click.echo("  unreadable: " + ", ".join(box["unreadable"]))
