"""``entropic-mcp serve``: the ServerManager's tools over MCP (stdio or Streamable HTTP).

Imported only by the serve path: the MCP SDK is heavy, and commands that don't serve never
load it.
"""

from __future__ import annotations

import contextlib
import logging
import sys

import anyio

from .._isolation import watch_interrupts
from .._manager import ServerManager
from .._stdout import guard_stdout
from ._sdk import load_serving_sdk

load_serving_sdk()

from ._app import ServeApp, cancel_suspended  # noqa: E402  (after the SDK is loaded lean)
from ._approval import ServeApprover  # noqa: E402
from ._names import ToolNames, exposed_name  # noqa: E402
from ._results import CONVERSATION_KEY, DIRECTIVES_KEY, KIND_KEY, call_result  # noqa: E402
from ._watchdog import LoopWatchdog  # noqa: E402

__all__ = [
    "CONVERSATION_KEY",
    "DIRECTIVES_KEY",
    "KIND_KEY",
    "ServeApp",
    "ServeApprover",
    "ToolNames",
    "build_app",
    "call_result",
    "configure_logging",
    "exposed_name",
    "run_http",
    "run_http_async",
    "run_stdio",
    "run_stdio_async",
    "serve",
    "stdio_banner",
]


def configure_logging(debug: bool = False) -> None:
    """Logs go to stderr — never stdout, which is the stdio wire."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("entropic-mcp: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)


#: Seconds calls still running when the client closes stdin get to finish before serve stops.
EOF_GRACE_SECONDS = 2.0


def build_app(manager: ServerManager, *, transport: str = "stdio") -> ServeApp:
    """The MCP server for ``manager``'s tools, as ``entropic-mcp serve`` builds it.

    ``app.server`` is the SDK's low-level ``Server`` (run it on any pair of streams with
    ``app.initialization_options()``), or use ``run_stdio`` / ``run_http``. Calls go through the
    manager's whole pipeline.
    """
    return ServeApp(manager, manager.config.serve, transport=transport)


async def run_stdio_async(manager: ServerManager, *, app: ServeApp | None = None) -> None:
    """Serve over this process's stdin/stdout until the client closes stdin.

    Calls still running then get ``EOF_GRACE_SECONDS`` to finish and are cancelled after; a
    synchronous tool that never returns is left behind in its thread, not waited for.
    """
    from ._stdio import stdio_streams

    app = app or build_app(manager, transport="stdio")
    eof = anyio.Event()
    try:
        async with (
            stdio_streams(manager.config.serve.max_message_bytes, eof) as (read, write),
            anyio.create_task_group() as tg,
        ):

            async def stop_after_eof() -> None:
                await eof.wait()
                await anyio.sleep(EOF_GRACE_SECONDS)
                tg.cancel_scope.cancel()

            tg.start_soon(stop_after_eof)
            await app.server.run(read, write, app.initialization_options())
            tg.cancel_scope.cancel()
    finally:
        await cancel_suspended(app)
        # Nobody can name this process's own conversation again: release what it kept, in the
        # store too (a todo list), rather than leave it there for good.
        manager.end_conversation(app.process_conversation)


async def run_http_async(
    manager: ServerManager, *, host: str | None = None, port: int | None = None, app: ServeApp | None = None
) -> None:
    """Serve over Streamable HTTP until cancelled (``[serve]`` host and port unless given)."""
    from ._http import serve_http

    settings = manager.config.serve
    app = app or build_app(manager, transport="http")
    try:
        await serve_http(app, host=host or settings.host, port=settings.port if port is None else port)
    finally:
        await cancel_suspended(app)


async def serve_async(manager: ServerManager, *, transport: str, host: str, port: int) -> None:
    # A KeyboardInterrupt a tool raises is its own fault; one after a real Ctrl-C stops serve.
    watch_interrupts()
    watchdog = LoopWatchdog()
    watchdog.start()
    try:
        await _serve_transport(manager, transport=transport, host=host, port=port)
    finally:
        watchdog.stop()


async def _serve_transport(manager: ServerManager, *, transport: str, host: str, port: int) -> None:
    # External servers' pools adopt this loop (no thread hop per call) and close before it ends.
    external = bool(manager.config.external)
    if external:
        from .._external import start_external_servers

        await start_external_servers(manager)
    try:
        if transport == "http":
            await run_http_async(manager, host=host, port=port)
        else:
            await run_stdio_async(manager)
    finally:
        if external:
            from .._external import close_external_servers

            await close_external_servers(manager)


def use_uvloop(choice: str) -> bool:
    """``[serve] event_loop``: uvloop where installed ("auto"; Linux and macOS), or as asked.

    uvloop spends markedly less CPU per HTTP request and pipe message than the standard loop
    (bench/bench_serve.py, P12), so "auto" takes it when it is there.
    """
    import importlib.util

    if choice == "asyncio":
        return False
    found = importlib.util.find_spec("uvloop") is not None
    if choice == "uvloop" and not found:
        from .._errors import ConfigError

        raise ConfigError(
            '[serve] event_loop = "uvloop" but uvloop is not installed (pip install uvloop; it runs on Linux '
            'and macOS), or set event_loop = "auto"'
        )
    return found


def serve(
    manager: ServerManager, *, transport: str | None = None, host: str | None = None, port: int | None = None
) -> None:
    """Serve ``manager`` until the client goes away (stdio) or the process is stopped (HTTP).

    Runs its own event loop (uvloop where ``[serve] event_loop`` allows). Ctrl-C raises
    ``KeyboardInterrupt`` out of it, for the caller to exit on (the CLI exits with 130).
    """
    settings = manager.config.serve
    chosen = transport or settings.transport
    if chosen not in ("stdio", "http"):
        from .._errors import ConfigError

        raise ConfigError(f"unknown transport {chosen!r}; expected 'stdio' or 'http'")
    # On stdio, stdout is the wire: whatever plugin code prints goes to stderr, named.
    with guard_stdout() if chosen == "stdio" else contextlib.nullcontext():
        anyio.run(
            lambda: serve_async(
                manager, transport=chosen, host=host or settings.host, port=settings.port if port is None else port
            ),
            backend_options={"use_uvloop": use_uvloop(settings.event_loop)},
        )


def run_stdio(manager: ServerManager) -> None:
    """``serve(manager, transport="stdio")``: until the client closes stdin."""
    serve(manager, transport="stdio")


def run_http(manager: ServerManager, *, host: str | None = None, port: int | None = None) -> None:
    """``serve(manager, transport="http")``: until the process is stopped."""
    serve(manager, transport="http", host=host, port=port)


def stdio_banner() -> str | None:
    """What a person who started ``serve`` in a terminal should read; None when a client started it."""
    if not (sys.stdin.isatty() or sys.stdout.isatty()):
        return None
    return (
        "entropic-mcp serve speaks MCP over stdin/stdout: it is meant to be started by an MCP client, "
        "not typed at.\n"
        '  Connect a client by adding a server to its config: {"command": "entropic-mcp", "args": ["serve"]}\n'
        "  (with the project directory as its working directory, or add --config PATH), or run\n"
        "  `entropic-mcp serve --transport http` and point the client at http://127.0.0.1:8765/mcp.\n"
        "  Try it: `entropic-mcp demo`. Stop: Ctrl-C."
    )
