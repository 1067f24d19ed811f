"""The core's defaults, registered as plugins through the same hooks as everyone else's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._plugins import hookimpl


class TinyDBStorage:
    """The embedded default store (nothing to run)."""

    @hookimpl
    def entropic_mcp_storage_backends(self) -> Any:
        from ._storage import StorageBackendSpec

        def factory(config: Any) -> Any:
            from ._storage._tinydb import TinyDBBackend

            return TinyDBBackend.from_config(config)

        return StorageBackendSpec(name="tinydb", factory=factory)


class DelegationHandlers:
    """Host-side handlers that record delegations (``entropic_mcp._delegation``, loaded when asked)."""

    # tryfirst: the built-ins register first, so a host's own handler for a type replaces them.
    @hookimpl(tryfirst=True)
    def entropic_mcp_directive_handlers(self) -> Any:
        from ._delegation import default_handlers

        return default_handlers()


class ExternalServers:
    """One server per ``[external.<name>]`` table (and imported ``.mcp.json`` entry), reached through the
    client pool; with none configured the SDK client is never imported."""

    @hookimpl
    def entropic_mcp_servers(self, config: Any) -> Any:
        external = config.settings.external
        if not external:
            return None
        from ._external._server import ExternalServer

        servers = [ExternalServer(entry, root=config.root) for entry in external.values()]
        for server in servers:
            server.siblings = servers  # started together: one slow server does not delay the others
        return servers


def builtin_plugins() -> Iterator[tuple[str, object]]:
    yield "builtin-tinydb", TinyDBStorage()
    yield "builtin-delegation", DelegationHandlers()
    yield "builtin-external", ExternalServers()
