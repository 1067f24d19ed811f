"""Serving a ``ServerManager`` over MCP from your own program (what ``entropic-mcp serve`` does).

Example::

    from entropic_mcp import ServerManager, load_config
    from entropic_mcp.serve import run_stdio

    manager = ServerManager.from_config(load_config())
    try:
        run_stdio(manager)          # until the client closes stdin
    finally:
        manager.close()

``build_app(manager)`` gives the MCP server itself (``app.server``, the SDK's low-level
``Server``) to run on streams of your own; ``run_stdio_async`` / ``run_http_async`` run inside
an event loop you already have. Importing this module loads the MCP SDK (the heavy part of
serving), which commands that do not serve never pay for.

Embedding relies on the MCP SDK's 2.x internals; entropic-mcp pins ``mcp<3`` for that reason.
"""

from __future__ import annotations

from ._serve import (
    EOF_GRACE_SECONDS,
    ServeApp,
    ServeApprover,
    build_app,
    configure_logging,
    run_http,
    run_http_async,
    run_stdio,
    run_stdio_async,
    serve,
    stdio_banner,
)

__all__ = [
    "EOF_GRACE_SECONDS",
    "ServeApp",
    "ServeApprover",
    "build_app",
    "configure_logging",
    "run_http",
    "run_http_async",
    "run_stdio",
    "run_stdio_async",
    "serve",
    "stdio_banner",
]
