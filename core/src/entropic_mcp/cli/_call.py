"""``entropic-mcp call``: one call through the whole pipeline."""

from __future__ import annotations

import sys
from typing import Any

import click

from .._isolation import watch_interrupts
from .._plugins import hookimpl
from .._stdout import guard_stdout
from ._common import Interrupted, build_manager, echo_json


class TerminalApprover:
    """Answers "ask" decisions on a terminal; ``--yes`` allows once without asking."""

    CHOICES = {"y": "allow_once", "n": "deny_once", "a": "always_allow", "d": "always_deny"}

    def __init__(self, *, assume_yes: bool) -> None:
        self.assume_yes = assume_yes

    @hookimpl
    def entropic_mcp_approve_tool_call(self, request: Any) -> str | None:
        if self.assume_yes:
            return "allow_once"
        if not sys.stdin.isatty():
            return None
        click.echo(f"{request.tool} needs approval ({request.reason}); pattern: {request.pattern}", err=True)
        offered = self.CHOICES if getattr(request, "always", True) else {"y": "allow_once", "n": "deny_once"}
        answer = click.prompt(
            "allow once [y], deny [n], always allow [a], always deny [d]"
            if len(offered) == 4
            else "allow once [y], deny [n] ('always' would not take effect: a rule asks for this call)",
            type=click.Choice(list(offered)),
            default="n",
            err=True,
        )
        return self.CHOICES[answer]

    @hookimpl
    def entropic_mcp_approve_outside_root(self, request: Any) -> bool | None:
        if self.assume_yes:
            return None  # --yes approves tool calls, never paths outside the root
        if not sys.stdin.isatty():
            return None
        return click.confirm(
            f"{request.tool} wants to {request.access} {request.path}, outside {request.root}. Allow once?",
            default=False,
            err=True,
        )


@click.command()
@click.argument("tool")
@click.argument("args_json", required=False, default="{}")
@click.option("--conversation", default="cli", show_default=True, help="Conversation id (per-conversation state).")
@click.option("--identity", default=None, help="Identity (tier) whose access keys apply.")
@click.option("--yes", "assume_yes", is_flag=True, help="Allow 'ask' decisions once without prompting.")
@click.pass_context
def call(
    ctx: click.Context, tool: str, args_json: str, conversation: str, identity: str | None, assume_yes: bool
) -> None:
    """Call TOOL (<server>.<tool>) with ARGS_JSON through the pipeline; print the envelope."""
    import anyio
    import orjson

    from .._context import CallContext

    try:
        args = orjson.loads(args_json)
    except orjson.JSONDecodeError as exc:
        raise click.UsageError(f'ARGS_JSON is not valid JSON ({exc}); example: \'{{"path": "README.md"}}\'') from None
    if not isinstance(args, dict):
        raise click.UsageError('ARGS_JSON must be a JSON object, e.g. \'{"path": "README.md"}\'')
    approver = TerminalApprover(assume_yes=assume_yes)
    manager = build_manager(ctx, setup=lambda plugins: plugins.register(approver, "cli-approver"))
    from .._sandbox import install, uninstall

    context = CallContext(conversation_id=conversation, identity=identity)

    async def run() -> Any:
        watch_interrupts()  # a KeyboardInterrupt the tool raises is its error; a real Ctrl-C stops
        return await manager.call(tool, args, context)

    install(manager.config, manager.permissions)  # a warning on stderr when none is available
    try:
        # What the tool prints goes to stderr: stdout carries the envelope alone.
        with guard_stdout():
            outcome = anyio.run(run)
    except KeyboardInterrupt:
        raise Interrupted from None
    finally:
        # The sandbox is the process's: a host that runs this command in-process (a test, a
        # script through click's runner) must not find its own programs confined afterwards.
        uninstall()
    echo_json({**outcome.response.to_dict(), "kind": outcome.kind})
    if outcome.response.is_error:
        ctx.exit(1)
