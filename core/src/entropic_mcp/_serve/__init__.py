"""``entropic-mcp serve``: the ServerManager's tools over MCP (stdio or Streamable HTTP).

Imported only by the serve path: the MCP SDK is heavy, and commands that don't serve never
load it.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from .._manager import ServerManager
from ._sdk import load_serving_sdk

load_serving_sdk()

from ._app import ServeApp, cancel_suspended  # noqa: E402  (after the SDK is loaded lean)
from ._approval import ServeApprover  # noqa: E402
from ._names import ToolNames, exposed_name  # noqa: E402
from ._results import CONVERSATION_KEY, DIRECTIVES_KEY, KIND_KEY, call_result  # noqa: E402

__all__ = [
    "CONVERSATION_KEY",
    "DIRECTIVES_KEY",
    "KIND_KEY",
    "ServeApp",
    "ServeApprover",
    "ToolNames",
    "call_result",
    "exposed_name",
    "serve",
]


def configure_logging(debug: bool = False) -> None:
    """Logs go to stderr — never stdout, which is the stdio wire."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("entropic-mcp: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)


async def serve_async(manager: ServerManager, *, transport: str, host: str, port: int) -> None:
    # External servers' pools adopt this loop (no thread hop per call) and close before it ends.
    external = bool(manager.config.external)
    if external:
        from .._external import start_external_servers

        await start_external_servers(manager)
    try:
        settings = manager.config.serve
        app = ServeApp(manager, settings, transport=transport)
        try:
            if transport == "http":
                from ._http import serve_http

                await serve_http(app, host=host, port=port)
            else:
                from ._stdio import stdio_streams

                async with stdio_streams(settings.max_message_bytes) as (read, write):
                    await app.server.run(read, write, app.initialization_options())
        finally:
            await cancel_suspended(app)
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
) -> Any:
    """Serve ``manager`` until the client goes away (stdio) or the process is stopped (HTTP)."""
    import anyio

    settings = manager.config.serve
    chosen = transport or settings.transport
    if chosen not in ("stdio", "http"):
        from .._errors import ConfigError

        raise ConfigError(f"unknown transport {chosen!r}; expected 'stdio' or 'http'")
    try:
        anyio.run(
            lambda: serve_async(
                manager, transport=chosen, host=host or settings.host, port=settings.port if port is None else port
            ),
            backend_options={"use_uvloop": use_uvloop(settings.event_loop)},
        )
    except KeyboardInterrupt:
        pass
