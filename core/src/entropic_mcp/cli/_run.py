"""``entropic-mcp run``: one task through the reference host with real models per tier."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import click

from .._errors import ConfigError
from .._isolation import watch_interrupts
from .._stdout import guard_stdout
from ._call import TerminalApprover
from ._common import Interrupted, build_manager, echo_json


def models_table(models_file: str | None, overrides: dict[str, Any], tiers: tuple[str, ...]) -> dict[str, Any]:
    """The ``models_from_config`` table: the file's, the flags laid over its ``[default]``."""
    table: dict[str, Any] = {}
    if models_file is not None:
        path = Path(models_file)
        try:
            table = tomllib.loads(path.read_text())
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    default = {**table.get("default", {}), **{k: v for k, v in overrides.items() if v is not None}}
    named = dict(table.get("tiers", {}))
    for entry in tiers:
        tier, sep, model = entry.partition("=")
        if not sep or not tier or not model:
            raise click.UsageError(f"--tier takes TIER=MODEL (e.g. researcher=qwen2.5-coder:1.5b), got {entry!r}")
        named[tier] = {**named.get(tier, {}), "model": model}
    out = {k: v for k, v in table.items() if k not in ("default", "tiers")}  # unknown keys are reported
    if default:
        out["default"] = default
    if named:
        out["tiers"] = named
    return out


@click.command()
@click.argument("task")
@click.option("--models", "models_file", type=click.Path(dir_okay=False), help="TOML: [default] and [tiers.<tier>].")
@click.option("--api", type=click.Choice(["openai", "anthropic"]), help="Wire format of the default model.")
@click.option("--base-url", help="Endpoint of the default model, e.g. http://127.0.0.1:8080/v1.")
@click.option("--model", "model_name", help="The default model's name at the endpoint.")
@click.option("--api-key-env", help="Environment variable holding the API key.")
@click.option("--max-tokens", type=click.IntRange(1), help="Answer limit per model turn.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds per model request.")
@click.option("--tier", "tiers", multiple=True, metavar="TIER=MODEL", help="Another model name for one tier.")
@click.option("--identity", default="lead", show_default=True, help="The tier that gets the task.")
@click.option("--max-turns", type=click.IntRange(1), default=20, show_default=True, help="Turns per conversation.")
@click.option("--yes", "assume_yes", is_flag=True, help="Allow 'ask' decisions once without prompting.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def run(
    ctx: click.Context,
    task: str,
    models_file: str | None,
    api: str | None,
    base_url: str | None,
    model_name: str | None,
    api_key_env: str | None,
    max_tokens: int | None,
    timeout: float | None,
    tiers: tuple[str, ...],
    identity: str,
    max_turns: int,
    assume_yes: bool,
    as_json: bool,
) -> None:
    """Run TASK as IDENTITY through the reference host, each tier on its model; print the summary."""
    import anyio

    from .._sandbox import install, uninstall
    from ..host import Host, models_from_config

    overrides = {
        "api": api,
        "base_url": base_url,
        "model": model_name,
        "api_key_env": api_key_env,
        "max_tokens": max_tokens,
        "timeout": timeout,
    }
    models = models_from_config(models_table(models_file, overrides, tiers), where=models_file or "models")
    approver = TerminalApprover(assume_yes=assume_yes)
    manager = build_manager(ctx, setup=lambda plugins: plugins.register(approver, "cli-approver"))
    host = Host(manager, models, max_turns=max_turns)

    async def main() -> Any:
        watch_interrupts()
        return await host.run(task, identity=identity)

    install(manager.config, manager.permissions)
    try:
        with guard_stdout():  # what tools print goes to stderr: stdout carries the result alone
            result = anyio.run(main)
    except KeyboardInterrupt:
        raise Interrupted from None
    finally:
        uninstall()
    delegations = [
        {"delegation_id": d.delegation_id, "target": d.target, "status": d.status, "summary": d.summary}
        for d in result.delegations
    ]
    if as_json:
        echo_json(
            {
                "conversation_id": result.conversation_id,
                "status": result.status,
                "summary": result.summary,
                "turns": result.turns,
                "delegations": delegations,
                "errors": list(result.errors),
            }
        )
    else:
        for d in delegations:
            click.echo(f"delegation {d['delegation_id']} to {d['target']}: {d['status']}", err=True)
        click.echo(f"{result.status} after {result.turns} turn(s) (conversation {result.conversation_id})", err=True)
        click.echo(result.summary)
    if not result.ok:
        ctx.exit(1)
