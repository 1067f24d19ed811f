"""Assembly: plugins turned into configured servers, and the config checked against what is there.

``ServerManager.from_config`` asks every plugin for its servers (``build_servers``), configures
each and compiles its tools' schemas; a plugin that fails is recorded as failed and skipped, and
the others keep working. ``check_config`` then refuses config that names nothing real. The
manager adds the servers to its registry; nothing here holds one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ._builtins import drop_taken_external
from ._config import Config, PluginConfig
from ._errors import ConfigError
from ._isolation import describe, reraise_host_stop
from ._pipeline._hooks import as_list
from ._plugins import Plugins
from ._server import MCPServerBase
from ._stdout import guard_stdout
from ._tools import TOOL_NAME

log = logging.getLogger("entropic_mcp")


class Assembly:
    """Builds a host's servers from its plugins and checks its config.

    Args:
        config: the host's configuration.
        plugins: the loaded plugins.
    """

    def __init__(self, config: Config, plugins: Plugins) -> None:
        self.config = config
        self.plugins = plugins
        #: Servers of plugins that failed: their ``[servers.<name>]`` tables are not typos.
        self.failed_servers: set[str] = set()

    def check_config(self, servers: Mapping[str, object], *, storage_given: bool = False) -> None:
        """Raise ConfigError for server tables no server reads and an unknown storage backend
        (not checked when the host gave the store itself)."""
        self._check_server_tables(servers)
        if not storage_given:
            self._check_storage_backend()

    def build_servers(self) -> list[tuple[str, MCPServerBase]]:
        """Ask every plugin for its servers; a plugin that fails is recorded as failed and skipped.

        A plugin fails when its ``entropic_mcp_servers`` hook raises (``ConfigError``,
        ``SystemExit`` and any other ``BaseException`` but a real stop of the host included) or
        returns something other than servers, when a server's ``configure`` raises (a
        ``ConfigError`` is shown with the config file it refused), when a tool's
        ``inputSchema`` is not a valid JSON Schema, or when it registers a server name another
        plugin also registers. Other plugins keep working; under strict mode
        (``ENTROPIC_MCP_STRICT_PLUGINS=1``) the first failure is an error.

        Returns (providing plugin, server) for each server to add, in the order to add them.
        """
        plugin_config = PluginConfig(root=self.config.root, settings=self.config)
        found: dict[str, list[tuple[str, MCPServerBase]]] = {}
        hook = "entropic_mcp_servers"
        for plugin_name, function in self.plugins.implementations(hook):
            try:
                with guard_stdout():
                    results = as_list(function(config=plugin_config))
            except BaseException as exc:
                reraise_host_stop(exc)
                if isinstance(exc, ConfigError) and self._builtin(plugin_name):
                    raise  # the host's own servers (external ones): the user's config is at fault
                self.plugins.fail(
                    plugin_name, f"{hook} raised {describe(exc)}", config_error=isinstance(exc, ConfigError)
                )
                continue
            bad = [r for r in results if not isinstance(r, MCPServerBase)]
            if bad:
                self.plugins.fail(
                    plugin_name, f"{hook} returned {type(bad[0]).__name__}, expected MCPServerBase instances"
                )
                continue
            problem, config_error = self._check_servers(results, builtin=self._builtin(plugin_name))
            if problem is not None:
                self.failed_servers.update(server.name for server in results)
                self.plugins.fail(plugin_name, problem, config_error=config_error)
                continue
            for server in results:
                found.setdefault(server.name, []).append((plugin_name, server))
        drop_taken_external(found)
        failed: set[str] = set()
        for name, entries in sorted(found.items()):
            if len(entries) < 2:
                continue
            owners = [p for p, _ in entries if p == name]
            providers = ", ".join(f"{p} ({self._distribution(p)})" for p, _ in entries)
            for plugin_name, _ in entries:
                if plugin_name in owners:
                    continue
                failed.add(plugin_name)
                self.plugins.fail(
                    plugin_name,
                    f"server name {name!r} is registered by more than one plugin: {providers}. "
                    + (
                        f"It stays with plugin {name!r}; rename this plugin's server"
                        if owners
                        else "None of them is used; uninstall all but one, or block the others with "
                        "ENTROPIC_MCP_DISABLED_PLUGINS or [entropic_mcp] plugins"
                    ),
                )
        order = {name: i for i, name in enumerate(self.config.plugins or ())}
        built: list[tuple[str, MCPServerBase]] = []
        for name in sorted(found, key=lambda n: (order.get(n, len(order)), n)):
            entries = [(p, s) for p, s in found[name] if p not in failed]
            if len(entries) != 1:
                continue
            built.append(entries[0])
        return built

    def _distribution(self, plugin_name: str) -> str:
        info = self.plugins.infos.get(plugin_name)
        return (info.distribution if info is not None else None) or "in-process"

    def _builtin(self, plugin_name: str) -> bool:
        info = self.plugins.infos.get(plugin_name)
        return info is not None and info.builtin

    def _check_servers(self, servers: Sequence[MCPServerBase], *, builtin: bool = False) -> tuple[str | None, bool]:
        """Configure each server and compile each tool's schema: the first problem (or None), and
        whether it is a ``ConfigError``.

        A ``ConfigError`` from a built-in's server (the host's own, e.g. an external server's) is
        raised: there only the user's config can be at fault.
        """
        for server in servers:
            table = self.config.server_table(server.name)
            try:
                with guard_stdout():
                    server.configure(table)
            except ConfigError as exc:
                # The plugin alone fails (strict mode makes it fatal): one plugin's refusal — a
                # setting it requires, a server named like another plugin's — never stops the host.
                source = str(self.config.path or "entropic-mcp.toml")
                where = "" if source in str(exc) else f"{source}: "
                if builtin:
                    raise ConfigError(f"{where}{exc}") from None
                return f"server {server.name!r} refused its config: {where}{exc}", True
            except BaseException as exc:
                reraise_host_stop(exc)
                return (
                    f"server {server.name!r}: configure() raised {describe(exc)} (a configure() that "
                    "rejects the user's [servers.<name>] table should raise ConfigError)"
                ), False
            if not server.tools_at_start:
                continue
            bad = [name for name in server.tools if not isinstance(name, str) or not TOOL_NAME.match(name)]
            if bad:
                return (
                    f"server {server.name!r}: invalid tool name {bad[0]!r}: names match ^[A-Za-z0-9_-]{{1,64}}$",
                    False,
                )
            for tool in server.tools.values():
                try:
                    tool.validator  # noqa: B018  # compiled now, so a bad schema fails the plugin at load
                except Exception as exc:
                    source = getattr(tool.definition, "source", None) or f"tools/{tool.name}.json"
                    return f"tool {server.name}.{tool.name} ({source}): invalid inputSchema: {exc}", False
        return None, False

    def _check_server_tables(self, found: Mapping[str, object]) -> None:
        """``[servers.<name>]`` tables must name a server some plugin provides (typos do not pass)."""
        from ._plugins import FIRST_PARTY

        tables = getattr(self.config, "servers", None) or {}
        known = set(found)
        unknown = []
        for name in sorted(tables):
            if name in known or self._disabled(name) or name in self.failed_servers:
                continue
            if name in FIRST_PARTY:  # a first-party server that is simply not installed here
                log.warning("[servers.%s] is ignored: pip install entropic-mcp-%s to use it", name, name)
                continue
            unknown.append(name)
        if not unknown:
            return
        import difflib

        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hints.append(f"[servers.{name}]" + (f" (did you mean [servers.{close[0]}]?)" if close else ""))
        source = getattr(self.config, "path", None) or "entropic-mcp.toml"
        raise ConfigError(
            f"{source}: {', '.join(hints)} configures no installed server. Servers: {', '.join(sorted(known)) or 'none'}."
        )

    def _check_storage_backend(self) -> None:
        name = self.config.storage.backend
        if name == "none":
            return
        offered: dict[str, list[str]] = {}
        for plugin_name, function in self.plugins.implementations("entropic_mcp_storage_backends"):
            try:
                value = function()
            except BaseException as exc:
                reraise_host_stop(exc)
                continue  # reported when the store is opened
            for spec in as_list(value):
                spec_name = getattr(spec, "name", None)
                if isinstance(spec_name, str):
                    offered.setdefault(spec_name, []).append(plugin_name)
        source = self.config.sources.get("storage.backend") or "entropic-mcp.toml"
        if name not in offered:
            import difflib

            close = difflib.get_close_matches(name, sorted(offered), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            if name == "postgres":
                hint = " (pip install entropic-mcp-postgres)"
            raise ConfigError(
                f"{source}: [storage] backend = {name!r} is not offered by any plugin{hint}; available: "
                f'{", ".join(sorted(offered)) or "none"}, or "none"'
            )
        if len(offered[name]) > 1:
            providers = ", ".join(f"{p} ({self._distribution(p)})" for p in offered[name])
            raise ConfigError(
                f"{source}: [storage] backend {name!r} is offered by more than one plugin: {providers}. Uninstall "
                "one, or block it with ENTROPIC_MCP_DISABLED_PLUGINS."
            )

    def _disabled(self, name: str) -> bool:
        info = self.plugins.infos.get(name)
        return info is not None and info.status in ("disabled", "failed")
