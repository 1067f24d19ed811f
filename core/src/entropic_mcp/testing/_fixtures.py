"""Helpers behind the pytest fixtures, usable without pytest too."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio

from .._config import config_from_dict
from .._context import CallContext
from .._manager import ServerManager
from .._pipeline import CallOutcome
from .._plugins import Plugins
from .._server import MCPServerBase


def fresh_plugins(*plugins: object, strict: bool = True) -> Plugins:
    """A plugin manager with the built-ins and the given plugin objects, no entry points loaded."""
    manager = Plugins(strict=strict)
    for index, plugin in enumerate(plugins):
        manager.register(plugin, getattr(plugin, "__name__", f"test-plugin-{index}"))
    manager.check_unknown_hooks()
    return manager


def make_manager(
    root: str | Path,
    *,
    config: Mapping[str, Any] | None = None,
    plugins: Iterable[object] = (),
    servers: Iterable[MCPServerBase] = (),
) -> ServerManager:
    """A ServerManager rooted at ``root``: servers from ``plugins`` (via their hooks) plus ``servers``.

    ``config`` is TOML-shaped; storage defaults to ``"none"`` unless the config names a backend.
    """
    data = {"storage": {"backend": "none"}, **dict(config or {})}
    settings = config_from_dict(data, root=root)
    manager = ServerManager(settings, plugins=fresh_plugins(*plugins))
    manager.build_servers()
    for server in servers:
        server.configure(settings.server_table(server.name))
        manager.add_server(server)
    return manager


def call(
    manager: ServerManager, name: str, args: object = None, *, conversation: str = "test", identity: str | None = None
) -> CallOutcome:
    """One call through the full pipeline, from synchronous test code."""
    ctx = CallContext(conversation_id=conversation, identity=identity)
    return anyio.run(manager.call, name, args, ctx)
