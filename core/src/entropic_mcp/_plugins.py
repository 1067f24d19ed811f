"""The plugin manager: load entry points one at a time, isolate failures, list what loaded."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterable
from typing import Any

import attrs
import pluggy

from . import hookspecs
from ._entrypoints import FoundEntryPoint, entry_points
from ._errors import ConfigError, PluginError
from ._isolation import describe, note_plugin_module, reraise_host_stop, watching_interrupts
from ._markers import hookimpl as hookimpl
from ._stdout import guard_stdout
from .hookspecs import ENTRY_POINT_GROUP

log = logging.getLogger("entropic_mcp")

ENV_STRICT = "ENTROPIC_MCP_STRICT_PLUGINS"
ENV_DISABLED = "ENTROPIC_MCP_DISABLED_PLUGINS"
FIRST_PARTY = ("filesystem", "bash", "git", "entropic")


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, counting changes so per-call hook lookups can be cached safely."""

    generation = 0

    def register(self, plugin: object, name: str | None = None) -> str | None:
        try:
            return super().register(plugin, name)
        finally:
            self.generation += 1

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        try:
            return super().unregister(plugin, name)
        finally:
            self.generation += 1

    def add_hookspecs(self, module_or_class: Any) -> None:
        try:
            super().add_hookspecs(module_or_class)
        finally:
            self.generation += 1


class PluginConfigError(PluginError, ConfigError):
    """Strict mode: a plugin refused its config (``ConfigError``), which fails the host."""


class PluginLoadWarning(UserWarning):
    """A plugin failed to load and was skipped (an error under ENTROPIC_MCP_STRICT_PLUGINS=1)."""


@attrs.frozen(kw_only=True)
class PluginInfo:
    """One plugin as ``entropic-mcp plugins`` shows it."""

    name: str
    distribution: str | None = None
    version: str | None = None
    status: str = "active"  # active | disabled | failed
    builtin: bool = False
    hooks: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
            "builtin": self.builtin,
            "hooks": list(self.hooks),
            "servers": list(self.servers),
            "error": self.error,
        }


def _distribution(ep: Any) -> tuple[str | None, str | None]:
    """(name, version) of an entry point's distribution.

    Read from the ``<name>-<version>.dist-info`` directory name when there is one: parsing the
    METADATA file (what ``dist.name`` does) costs more than the rest of start-up together.
    """
    if isinstance(ep, FoundEntryPoint):
        folder = os.path.basename(ep.folder)
        dist = None
    else:
        dist = getattr(ep, "dist", None)
        if dist is None:
            return None, None
        folder = getattr(getattr(dist, "_path", None), "name", "")
    stem = folder.removesuffix(".dist-info")
    if stem != folder and stem.count("-") == 1:
        name, version = stem.split("-")
        return name.replace("_", "-").lower(), version  # the normalised project name
    if dist is None:  # read from the path, in a folder not named ``<name>-<version>.dist-info``
        import pathlib

        import importlib_metadata

        dist = importlib_metadata.PathDistribution(pathlib.Path(ep.folder))
    return dist.name, dist.version


def misspelled_optional_hooks(pm: pluggy.PluginManager, plugin: object) -> list[tuple[str, str]]:
    """(hook, likely meant) for ``optionalhook`` implementations no spec declares that are one
    typo away from an entropic-mcp hook (``entropic_mcp_permision_pattern``)."""
    found: list[tuple[str, str]] = []
    for caller in pm.get_hookcallers(plugin) or ():
        if caller.has_spec() or not caller.name.startswith("entropic_mcp_"):
            continue
        import difflib  # here: every plugin is checked at start-up, few have such a hook

        known = sorted(n for n in dir(hookspecs) if n.startswith("entropic_mcp_"))
        close = difflib.get_close_matches(caller.name, known, n=1, cutoff=0.8)
        if close:
            found.append((caller.name, close[0]))
    return found


def strict_from_env() -> bool:
    return os.environ.get(ENV_STRICT, "").strip().lower() in ("1", "true", "yes", "on")


def disabled_from_env() -> frozenset[str]:
    return frozenset(n.strip() for n in os.environ.get(ENV_DISABLED, "").split(",") if n.strip())


class Plugins:
    """Wraps a pluggy PluginManager; callers use typed methods on ServerManager, not ``hook``.

    Args:
        strict: raise instead of skipping a broken plugin (default: ``$ENTROPIC_MCP_STRICT_PLUGINS``).
        builtins: register the core's built-in plugins.
    """

    def __init__(self, *, strict: bool | None = None, builtins: bool = True) -> None:
        self.strict = strict_from_env() if strict is None else strict
        self.pm = _PluginManager("entropic_mcp")
        self.pm.add_hookspecs(hookspecs)
        # Historic: every plugin registered from now on gets to add its own specs as it registers.
        self.pm.hook.entropic_mcp_add_hookspecs.call_historic(kwargs={"plugin_manager": self.pm})
        self.infos: dict[str, PluginInfo] = {}
        if builtins:
            from . import _builtins

            for name, plugin in _builtins.builtin_plugins():
                self.pm.register(plugin, name=name)
                self.infos[name] = PluginInfo(
                    name=name, distribution="entropic-mcp", builtin=True, hooks=self._hooks_of(plugin)
                )

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def _hooks_of(self, plugin: object) -> tuple[str, ...]:
        return tuple(sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or ()))

    def fail(self, name: str, error: str, *, config_error: bool = False, **fields: Any) -> None:
        """Record a plugin as failed; fatal in strict mode (``PluginConfigError`` for a ``config_error``)."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin, name=name)
        previous = self.infos.get(name)
        info = (
            attrs.evolve(previous, status="failed", error=error)
            if previous
            else PluginInfo(name=name, status="failed", error=error, **fields)
        )
        self.infos[name] = info
        message = f"plugin {name!r} ({info.distribution or 'unknown distribution'}) failed: {error}"
        if self.strict:
            raise (PluginConfigError if config_error else PluginError)(message)
        warnings.warn(message + "; skipped", PluginLoadWarning, stacklevel=3)

    def register(
        self, plugin: object, name: str, *, distribution: str | None = None, version: str | None = None
    ) -> bool:
        """Register one plugin object; False (and recorded) when it fails."""
        try:
            self.pm.register(plugin, name=name)
        except BaseException as exc:
            reraise_host_stop(exc)
            self.fail(name, describe(exc), distribution=distribution, version=version)
            return False
        self.infos[name] = PluginInfo(
            name=name, distribution=distribution, version=version, hooks=self._hooks_of(plugin)
        )
        wrapped = self._wrappers_of(plugin)
        if wrapped:
            self.fail(
                name,
                f"implements {', '.join(wrapped)} as a hook wrapper (wrapper=True or hookwrapper=True), which "
                "entropic-mcp never runs: its hooks are called one implementation at a time, so that one "
                "plugin's fault is its own. Implement the hook plainly (tryfirst/trylast order it), "
                "or wrap the tool's behaviour in a before/after hook pair",
                distribution=distribution,
                version=version,
            )
            return False
        return True

    def _wrappers_of(self, plugin: object) -> list[str]:
        """The entropic-mcp hooks ``plugin`` implements as wrappers, which would be listed yet never run."""
        return sorted(
            caller.name
            for caller in self.pm.get_hookcallers(plugin) or ()
            if caller.name.startswith("entropic_mcp_")
            and any(impl.plugin is plugin and (impl.wrapper or impl.hookwrapper) for impl in caller.get_hookimpls())
        )

    def load_entry_points(self, enabled: Iterable[str] | None = None) -> None:
        """Load installed plugins one at a time; ``enabled`` (config) limits which."""
        disabled = disabled_from_env()
        wanted = None if enabled is None else list(enabled)
        found: dict[str, Any] = {}
        for ep in entry_points(ENTRY_POINT_GROUP):
            found.setdefault(ep.name, ep)
        if wanted is not None:
            missing = [name for name in wanted if name not in found and name not in disabled]
            if missing:
                hints = "; ".join(
                    f"pip install entropic-mcp-{n}"
                    if n in FIRST_PARTY
                    else f"install the distribution that provides entry point {n!r} in group {ENTRY_POINT_GROUP!r}"
                    for n in missing
                )
                raise ConfigError(
                    f"plugin(s) {', '.join(map(repr, missing))} enabled in config but not installed: {hints}"
                )
        for name in sorted(found):
            ep = found[name]
            fields: dict[str, Any] = dict(zip(("distribution", "version"), _distribution(ep), strict=True))
            if name in disabled or (wanted is not None and name not in wanted):
                why = f"blocked by ${ENV_DISABLED}" if name in disabled else "not in config plugins"
                self.infos[name] = PluginInfo(name=name, status="disabled", error=why, **fields)
                continue
            module = getattr(ep, "module", None) or ep.value.partition(":")[0]
            note_plugin_module(module, name)
            try:
                # SystemExit or KeyboardInterrupt at import (argparse, a stray sys.exit) fails this
                # plugin alone; what it prints goes to stderr, never into --json output or MCP.
                with watching_interrupts(), guard_stdout():
                    plugin = ep.load()
            except BaseException as exc:
                reraise_host_stop(exc)
                self.fail(name, f"import failed: {describe(exc)}", **fields)
                continue
            self.register(plugin, name, **fields)
        self.check_unknown_hooks()

    def check_unknown_hooks(self) -> None:
        """Fail plugins that implement hooks no spec declares (typos must not pass silently)."""
        for name, plugin in list(self.pm.list_name_plugin()):
            unknown = [
                caller.name
                for caller in self.pm.get_hookcallers(plugin) or ()
                if not caller.has_spec()
                and not any(impl.plugin is plugin and impl.optionalhook for impl in caller.get_hookimpls())
            ]
            if unknown:
                self.fail(name, f"implements unknown hook(s) {', '.join(sorted(unknown))}")
            for hook, guess in misspelled_optional_hooks(self.pm, plugin):
                log.warning(
                    "plugin %r: optional hook %s is declared by no plugin and is never called (did you mean %s?)",
                    name,
                    hook,
                    guess,
                )

    def implementations(self, hook_name: str) -> list[tuple[str, Any]]:
        """(plugin name, function) for each implementation of a hook, in call order."""
        caller = getattr(self.pm.hook, hook_name)
        return [(impl.plugin_name, impl.function) for impl in reversed(caller.get_hookimpls())]

    def note_servers(self, name: str, servers: Iterable[str]) -> None:
        info = self.infos.get(name)
        if info is not None:
            self.infos[name] = attrs.evolve(info, servers=(*info.servers, *servers))

    def listing(self, *, include_builtins: bool = False) -> list[PluginInfo]:
        return [info for _, info in sorted(self.infos.items()) if include_builtins or not info.builtin]
