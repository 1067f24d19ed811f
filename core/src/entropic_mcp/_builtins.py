"""The core's defaults, registered as plugins through the same hooks as everyone else's."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from ._markers import hookimpl


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


EXTERNAL_PLUGIN = "builtin-external"


def drop_taken_external(found: dict[str, list[tuple[str, Any]]]) -> None:
    """Drop (and close) each ``[external.<name>]`` server whose name another plugin's server has.

    One such entry used to fail the whole built-in plugin, taking every external server with
    it; now that entry alone is left out, with a message naming it and the remedy.
    """
    log = logging.getLogger("entropic_mcp")
    for name, entries in found.items():
        others = [plugin for plugin, _ in entries if plugin != EXTERNAL_PLUGIN]
        if not others or len(others) == len(entries):
            continue
        for plugin, server in entries:
            if plugin != EXTERNAL_PLUGIN:
                continue
            server.close()
            source = getattr(getattr(server, "config", None), "source", "") or "the config"
            log.error(
                "[external.%s] in %s is not started: the server name %r is taken by plugin %s; rename the entry "
                "(its tools are called <name>.<tool>)",
                name,
                source,
                name,
                ", ".join(repr(p) for p in others),
            )
        found[name] = [(plugin, server) for plugin, server in entries if plugin != EXTERNAL_PLUGIN]


def builtin_plugins() -> Iterator[tuple[str, object]]:
    yield "builtin-tinydb", TinyDBStorage()
    yield "builtin-delegation", DelegationHandlers()
    yield EXTERNAL_PLUGIN, ExternalServers()
