"""An in-memory MCP client connected to a served ServerManager (the official SDK on both sides)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from .._manager import ServerManager


@contextlib.asynccontextmanager
async def served_client(manager: ServerManager, **client_options: Any) -> AsyncIterator[Any]:
    """Serve ``manager`` as ``entropic-mcp serve`` would and yield an ``mcp.Client`` talking to it.

    No process and no transport: the SDK's in-memory streams. Calls go through the whole pipeline
    and come back as MCP results (``isError``, the text, ``_meta`` directives and kind; ``structuredContent``
    for tools declaring an ``outputSchema``, or every object with ``[serve] structured_content = "json"``).
    """
    from mcp import Client

    from .._serve._app import ServeApp

    app = ServeApp(manager, manager.config.serve)
    async with Client(app.server, **client_options) as client:
        yield client
