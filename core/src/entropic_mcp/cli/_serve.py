"""``entropic-mcp serve`` and ``entropic-mcp demo``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ._common import Interrupted, build_manager, load, settle

if TYPE_CHECKING:
    from .._config import Config


@click.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default=None,
    help="stdio (default; for hosts that start the server) or Streamable HTTP.",
)
@click.option(
    "--host", default=None, help="HTTP address (default 127.0.0.1; others need ENTROPIC_MCP_TOKEN or [auth])."
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=None, help="HTTP port (default 8765; 0 = any free port)."
)
@click.pass_context
def serve(ctx: click.Context, transport: str | None, host: str | None, port: int | None) -> None:
    """Serve every tool over MCP. Logs go to stderr; on stdio, stdout carries only MCP."""
    from .._serve import ServeApprover, configure_logging
    from .._serve import serve as run

    configure_logging(debug=bool((ctx.find_root().obj or {}).get("debug")))
    config = load(ctx)
    settings = config.serve
    chosen = transport or settings.transport
    if chosen == "http":
        from .._serve._http import check_http_auth

        # Refuse an unprotected address, or an [auth] whose issuer cannot be reached, before loading any plugin.
        check_http_auth(config, host or settings.host)
    from .._tracing import configure_from_env

    configure_from_env()  # OTEL_TRACES_EXPORTER, ENTROPIC_MCP_TRACES_FILE (docs/tracing.md): before the manager
    approver = ServeApprover()
    manager = build_manager(ctx, setup=lambda plugins: plugins.register(approver, "serve-approver"))
    approver.store = lambda: manager.storage  # each person's "always" answers ([auth]) outlive the process
    # Several workers on one store: the project's "always" answers are kept there, not in one worker's local file.
    approver.shared = manager.config.storage.shares_state
    from .._sandbox import install

    # One log line: a warning (always shown) when no sandbox works, else info (shown with
    # --debug); a quiet stdio serve writes nothing to stderr, which clients show as errors.
    install(manager.config, manager.permissions)
    click.echo(startup_line(manager.config), err=True)
    if chosen == "stdio":
        from .._serve import stdio_banner

        banner = stdio_banner()
        if banner is not None:
            click.echo(banner, err=True)
    from .._children import become_subreaper, stop_descendants

    # Processes a tool starts itself (subprocess.Popen in a tool) are serve's to stop: as their
    # subreaper it stays their ancestor even when their own parent exits first.
    become_subreaper()
    terminated = _stop_on_sigterm()
    try:
        try:
            run(manager, transport=chosen, host=host, port=port)
        except KeyboardInterrupt:
            if not terminated:
                raise Interrupted from None
        # Said whether or not the interrupt came out of run(): one that lands as the event loop's
        # main task is finishing is absorbed by the loop's runner, and serve just returns.
        if terminated:
            click.echo("entropic-mcp: stopped (SIGTERM)", err=True)
    finally:
        from .._sandbox import uninstall

        uninstall()
        left = stop_descendants()
        if left:
            click.echo(f"entropic-mcp: stopped {len(left)} process(es) tools had left running", err=True)


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temporary project directory and print its path.")
def demo(keep: bool) -> None:
    """Start `entropic-mcp serve` in a temporary project and drive it with the official MCP client."""
    from .._serve._demo import run_demo

    settle()
    click.get_current_context().exit(run_demo(keep=keep))


def startup_line(config: Config) -> str:
    """One line on stderr: which config files are in force and where an "ask" goes.

    A host that shows serve's stderr (or its log) then answers "why was that refused?" without
    the user having to guess which file, if any, was read.
    """
    files = [str(path) for path in (config.path, config.local_path) if path is not None and path.is_file()]
    if config.mcp_json is not None:
        files.append(f"{config.mcp_json} (mcpServers{'' if config.mcp_json_approved else ', not approved: unused'})")
    permissions = config.permissions
    reads = "read-only tools allowed" if permissions.allow_read else "read-only tools ask"
    if permissions.auto_approve:
        approval = "auto_approve = true: every ask is allowed"
    else:
        approval = "asked of the user through the client (MCP elicitation) when it offers it, else refused"
    where = " + ".join(files) if files else "none: defaults"
    return f"entropic-mcp: config {where}; default {permissions.default!r}, {reads}; approvals: {approval}"


def _stop_on_sigterm() -> list[int]:
    """SIGTERM (what systemd, Docker and Kubernetes send) stops serve the way Ctrl-C does: the
    transports' clean-up, the audit flushed, background runs stopped, descendants reaped; then
    exit status 0. Returns a list that holds the signal once one came."""
    import signal
    import threading

    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        return came

    def handler(signum: int, frame: object) -> None:
        if not came:
            came.append(signum)
            signal.raise_signal(signal.SIGINT)  # the same path as Ctrl-C, counted as a real one

    signal.signal(signal.SIGTERM, handler)
    return came
