"""Config: ``entropic-mcp.toml`` plus ``entropic-mcp.local.toml``, validated into attrs records."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ._access import AccessLevel
from ._errors import ConfigError

CONFIG_NAME = "entropic-mcp.toml"
LOCAL_NAME = "entropic-mcp.local.toml"
ENV_CONFIG = "ENTROPIC_MCP_CONFIG"


@attrs.frozen(kw_only=True)
class PermissionsConfig:
    default: str = "ask"
    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    allow_read: bool = False
    auto_approve: bool = False


@attrs.frozen(kw_only=True)
class PipelineConfig:
    max_result_bytes: int = 16384
    max_tool_calls_per_turn: int = 10
    duplicate_stop_after: int = 3
    identical_failure_limit: int = 2
    same_tool_limit: int = 50
    history_size: int = 200
    tool_timeouts: Mapping[str, float] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class StorageConfig:
    backend: str = "tinydb"
    path: Path = Path(".entropic-mcp/store")
    options: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ServeConfig:
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    tool_names: str = "dotted"
    list_page_size: int = 100
    max_message_bytes: int = 4 * 1024 * 1024
    allowed_origins: tuple[str, ...] = ()
    event_loop: str = "auto"


@attrs.frozen(kw_only=True)
class IdentityConfig:
    keys: Mapping[str, AccessLevel] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Config:
    """The effective configuration. ``sources`` maps ``section.key`` to the file it came from."""

    root: Path
    plugins: tuple[str, ...] | None = None
    storage: StorageConfig = attrs.field(factory=StorageConfig)
    permissions: PermissionsConfig = attrs.field(factory=PermissionsConfig)
    pipeline: PipelineConfig = attrs.field(factory=PipelineConfig)
    serve: ServeConfig = attrs.field(factory=ServeConfig)
    identities: Mapping[str, IdentityConfig] = attrs.field(factory=dict)
    servers: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    path: Path | None = None
    local_path: Path | None = None
    sources: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def storage_path(self) -> Path:
        return self.storage.path if self.storage.path.is_absolute() else self.root / self.storage.path

    def server_table(self, name: str) -> Mapping[str, Any]:
        return self.servers.get(name, {})


@attrs.frozen(kw_only=True)
class PluginConfig:
    """What ``entropic_mcp_servers`` receives: the root, the server tables, the whole config."""

    root: Path
    settings: Config

    def table(self, server: str) -> Mapping[str, Any]:
        return self.settings.server_table(server)


# -- validation --------------------------------------------------------------------------------

Check = Callable[[Any, str], Any]


def _fail(where: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{where}: expected {expected}, got {value!r}")


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, "a string", value)
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, "true or false", value)
    return value


def _int(minimum: int) -> Check:
    def check(value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _fail(where, f"an integer >= {minimum}", value)
        return value

    return check


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, "a list of strings", value)
    return tuple(value)


def _choice(*choices: str) -> Check:
    def check(value: Any, where: str) -> str:
        if value not in choices:
            raise _fail(where, "one of " + ", ".join(repr(c) for c in choices), value)
        return value

    return check


def _timeouts(value: Any, where: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise _fail(where, 'a table of tool name = seconds (e.g. {"git.log" = 60})', value)
    out = {}
    for key, seconds in value.items():
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise _fail(f"{where}.{key}", "a positive number of seconds", seconds)
        out[key] = float(seconds)
    return out


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "a table", value)
    return dict(value)


SECTIONS: dict[str, dict[str, Check]] = {
    "entropic_mcp": {"root": _str, "plugins": _strings},
    "storage": {"backend": _str, "path": _str, "options": _table},
    "permissions": {
        "default": _choice("ask", "allow", "deny"),
        "allow": _strings,
        "ask": _strings,
        "deny": _strings,
        "allow_read": _bool,
        "auto_approve": _bool,
    },
    "pipeline": {
        "max_result_bytes": _int(0),
        "max_tool_calls_per_turn": _int(1),
        "duplicate_stop_after": _int(2),
        "identical_failure_limit": _int(1),
        "same_tool_limit": _int(1),
        "history_size": _int(1),
        "tool_timeouts": _timeouts,
    },
    "serve": {
        "transport": _choice("stdio", "http"),
        "host": _str,
        "port": _int(0),
        "tool_names": _choice("dotted", "underscored"),
        "list_page_size": _int(1),
        "max_message_bytes": _int(1024),
        "allowed_origins": _strings,
        "event_loop": _choice("auto", "uvloop", "asyncio"),
    },
}
#: Lists that accumulate across the project and local file instead of being replaced.
MERGED_LISTS = {("permissions", "allow"), ("permissions", "ask"), ("permissions", "deny")}


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def _validate_file(data: dict[str, Any], path: Path) -> dict[tuple[str, str], Any]:
    """Flatten one file into ``{(section, key): value}``, checking every key and value."""
    flat: dict[tuple[str, str], Any] = {}
    for section, table in data.items():
        where = f"{path}: [{section}]"
        if section in SECTIONS:
            if not isinstance(table, dict):
                raise _fail(where, "a table", table)
            for key, value in table.items():
                check = SECTIONS[section].get(key)
                if check is None:
                    raise ConfigError(f"{where} unknown key {key!r}; expected one of: {', '.join(SECTIONS[section])}")
                flat[(section, key)] = check(value, f"{path}: {section}.{key}")
        elif section == "servers":
            for name, server_table in _table(table, where).items():
                flat[("servers", name)] = _table(server_table, f"{path}: servers.{name}")
        elif section == "identities":
            for name, identity in _table(table, where).items():
                identity = _table(identity, f"{path}: identities.{name}")
                unknown = set(identity) - {"keys"}
                if unknown:
                    raise ConfigError(f"{path}: [identities.{name}] unknown key(s) {sorted(unknown)}; expected: keys")
                keys = _table(identity.get("keys", {}), f"{path}: identities.{name}.keys")
                levels = {}
                for pattern, level in keys.items():
                    try:
                        levels[pattern] = AccessLevel.parse(level)
                    except ValueError:
                        raise _fail(
                            f"{path}: identities.{name}.keys.{pattern}", '"NONE", "READ" or "WRITE"', level
                        ) from None
                flat[("identities", name)] = IdentityConfig(keys=levels)
        elif section == "external":
            raise ConfigError(
                f"{path}: [external.*] (external MCP servers as plugins) is not available in this version "
                "of entropic-mcp; configure that server directly in your MCP client beside entropic-mcp serve"
            )
        else:
            known = [*SECTIONS, "servers", "identities"]
            raise ConfigError(f"{path}: unknown section [{section}]; expected one of: {', '.join(known)}")
    return flat


def find_config(explicit: str | Path | None = None, cwd: Path | None = None) -> Path | None:
    """The config file: ``explicit``, then ``$ENTROPIC_MCP_CONFIG``, then ``./entropic-mcp.toml``."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
        return path.resolve()
    env = os.environ.get(ENV_CONFIG)
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found (from ${ENV_CONFIG})")
        return path.resolve()
    candidate = (cwd or Path.cwd()) / CONFIG_NAME
    return candidate.resolve() if candidate.is_file() else None


def load_config(explicit: str | Path | None = None, *, cwd: Path | None = None) -> Config:
    """Find, read, validate and merge the project file and the local file beside it."""
    cwd = (cwd or Path.cwd()).resolve()
    path = find_config(explicit, cwd)
    base_dir = path.parent if path is not None else cwd
    local = base_dir / LOCAL_NAME
    merged: dict[tuple[str, str], Any] = {}
    sources: dict[str, str] = {}
    for source in (path, local if local.is_file() else None):
        if source is None:
            continue
        for key, value in _validate_file(_read(source), source).items():
            if key in MERGED_LISTS and key in merged:
                value = tuple(dict.fromkeys((*merged[key], *value)))
                sources[".".join(key)] = f"{sources['.'.join(key)]} + {source}"
            else:
                sources[".".join(key)] = str(source)
            merged[key] = value
    return build_config(merged, base_dir=base_dir, path=path, local_path=local, sources=sources)


def config_from_dict(data: Mapping[str, Any], *, root: str | Path) -> Config:
    """Build a Config from a TOML-shaped mapping (tests and in-process hosts)."""
    root = Path(root).resolve()
    flat = _validate_file(dict(data), Path("<dict>"))
    return build_config(flat, base_dir=root, path=None, local_path=None, sources={})


def build_config(
    flat: Mapping[tuple[str, str], Any],
    *,
    base_dir: Path,
    path: Path | None,
    local_path: Path | None,
    sources: Mapping[str, str],
) -> Config:
    def section(name: str) -> dict[str, Any]:
        return {key: value for (sec, key), value in flat.items() if sec == name}

    root_text = flat.get(("entropic_mcp", "root"), ".")
    root = (base_dir / Path(root_text).expanduser()).resolve()
    if not root.is_dir():
        where = sources.get("entropic_mcp.root", "config")
        raise ConfigError(f"{where}: entropic_mcp.root: {root} is not a directory")
    storage = section("storage")
    if "path" in storage:
        storage["path"] = Path(storage["path"]).expanduser()
    plugins = flat.get(("entropic_mcp", "plugins"))
    return Config(
        root=root,
        plugins=plugins,
        storage=StorageConfig(**storage),
        permissions=PermissionsConfig(**section("permissions")),
        pipeline=PipelineConfig(**section("pipeline")),
        serve=ServeConfig(**section("serve")),
        identities=section("identities"),
        servers=section("servers"),
        path=path,
        local_path=local_path,
        sources=sources,
    )
