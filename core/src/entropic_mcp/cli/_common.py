"""Shared CLI plumbing: loading config and the manager, output, one-line errors."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from .._errors import ConfigError, EntropicMCPError, PluginError


class CLIError(click.ClickException):
    """A failed operation: one line, exit status 1."""

    exit_code = 1


class Interrupted(Exception):
    """Ctrl-C (SIGINT) stopped a command: one line on stderr and exit status 130, no traceback.

    Not a KeyboardInterrupt, which click would turn into "Aborted!" with status 1.
    """


class UsageProblem(click.ClickException):
    """A usage or config error: one line, exit status 2."""

    exit_code = 2


def _show_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    click.echo(f"warning: {message}", err=True)


def run(command: click.Command, args: list[str], *, debug: bool, obj: dict[str, Any] | None = None) -> NoReturn:
    import warnings

    if not debug:
        warnings.showwarning = _show_warning
    try:
        code = command.main(args=args, prog_name="entropic-mcp", standalone_mode=False, obj=obj)
    except Interrupted:
        click.echo("entropic-mcp: interrupted", err=True)
        leave(130)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            click.echo("entropic-mcp: interrupted", err=True)
            leave(130)
        click.echo("Aborted.", err=True)
        leave(1)
    except click.exceptions.Exit as exc:
        leave(exc.exit_code)
    except click.UsageError as exc:
        exc.show()
        leave(2)
    except click.ClickException as exc:
        exc.show()
        leave(exc.exit_code)
    except (ConfigError, PluginError) as exc:
        if debug:
            raise
        click.echo(f"Error: {exc}", err=True)
        leave(2)
    except (EntropicMCPError, OSError) as exc:
        if debug:
            raise
        click.echo(f"Error: {exc}", err=True)
        leave(1)
    except KeyboardInterrupt:
        click.echo("entropic-mcp: interrupted", err=True)
        leave(130)
    leave(code if isinstance(code, int) else 0)


def leave(code: int) -> NoReturn:
    """Exit with ``code`` without waiting for threads still running.

    A synchronous tool that never returns keeps its worker thread (Python cannot stop a
    thread), and an interpreter exit joins every non-daemon thread: ``call`` or ``serve`` would
    never end. Exit handlers still run and output is flushed; the threads are abandoned.
    """
    import threading

    main = threading.main_thread()
    if not any(t.is_alive() and not t.daemon and t is not main for t in threading.enumerate()):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def config_path(ctx: click.Context) -> str | None:
    root = ctx.find_root()
    return (root.obj or {}).get("config_path")


def load(ctx: click.Context) -> Any:
    """The effective Config (errors become one line, exit 2)."""
    from .._config import load_config

    return load_config(config_path(ctx))


def build_manager(ctx: click.Context, *, setup: Callable[[Any], None] | None = None) -> Any:
    """Load plugins from entry points and build the ServerManager from the config."""
    from .._manager import ServerManager
    from .._plugins import Plugins

    config = load(ctx)
    plugins = Plugins()
    if setup is not None:
        setup(plugins)
    plugins.load_entry_points(config.plugins)
    manager = ServerManager.from_config(config, plugins=plugins)
    ctx.call_on_close(manager.close)
    settle()
    return manager


def settle() -> None:
    """Start-up is over: turn the cycle collector back on (``main`` turned it off).

    Start-up allocates hundreds of thousands of objects that live as long as the process (the
    MCP SDK's models, plugins, compiled schemas); the collector would walk them again and again
    while they are made, and later on every full collection. They are moved out of its
    generations instead. Nothing happens when the collector is on, as in a test process.
    """
    import gc

    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def echo_json(data: Any) -> None:
    import orjson

    click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())


def table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    view = Table(title=title, show_lines=False)
    for column in columns:
        view.add_column(column, overflow="fold")
    for row in rows:
        view.add_row(*row)
    Console().print(view)
