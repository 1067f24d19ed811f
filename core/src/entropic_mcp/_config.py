"""Config: ``entropic-mcp.toml`` plus ``entropic-mcp.local.toml``, validated into attrs records."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ._access import AccessLevel
from ._errors import ConfigError

if TYPE_CHECKING:
    from ._serve._oauth import AuthSettings

CONFIG_NAME = "entropic-mcp.toml"
LOCAL_NAME = "entropic-mcp.local.toml"
ENV_CONFIG = "ENTROPIC_MCP_CONFIG"


@attrs.frozen(kw_only=True)
class PermissionsConfig:
    default: str = "ask"
    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    #: True: read-only tools (inside the root: outside it the server's own policy asks) need no
    #: approval — what ``init`` writes, so a project without a config file works in a headless host.
    allow_read: bool = True
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
    #: How long an idempotency key's outcome is kept after its call started (a retry within it
    #: gets the outcome), and how long a retry waits for a first call still running.
    idempotency_seconds: float = 600.0
    idempotency_wait_seconds: float = 30.0


@attrs.frozen(kw_only=True)
class StorageConfig:
    backend: str = "tinydb"
    #: None: the per-user data directory, keyed by project (``_userdata.default_store_path``).
    path: Path | None = None
    options: Mapping[str, Any] = attrs.field(factory=dict)
    #: Where per-conversation state lives (guard state, paused approvals, "always" answers, the
    #: plugins' own: bash's runs, the filesystem's read tracker): ``"auto"`` (the store when
    #: the backend is one several processes share, this process's memory for tinydb and none),
    #: ``"store"`` or ``"memory"`` (one worker, or a balancer that pins each conversation to one).
    conversation_state: str = "auto"

    @property
    def shares_state(self) -> bool:
        """Does per-conversation state go through the store, for other workers to see?"""
        if self.conversation_state == "auto":
            return self.backend not in ("none", "tinydb")
        return self.conversation_state == "store"


@attrs.frozen(kw_only=True)
class ServeConfig:
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    #: ``"portable"``: ``filesystem_read_file`` (what every model API accepts); ``"underscored"``:
    #: ``filesystem__read_file``; ``"dotted"``: ``filesystem.read_file``. Every spelling is accepted.
    tool_names: str = "portable"
    list_page_size: int = 100
    max_message_bytes: int = 4 * 1024 * 1024
    allowed_origins: tuple[str, ...] = ()
    event_loop: str = "auto"
    #: ``"declared"``: ``structuredContent`` only for tools declaring an ``outputSchema``;
    #: ``"json"``: also for every other result that is a JSON object.
    structured_content: str = "declared"
    #: HTTP, before authentication: a request head must be complete this long after the
    #: connection (or the request's first byte), its body this long after the head.
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 30.0
    #: Connections still waiting for a request head, per client address and in all; past
    #: either, the oldest is closed.
    max_pending_per_client: int = 16
    max_pending_connections: int = 256
    #: Signs 2026-07-28 request states; the same on every worker of a deployment ("": the
    #: ENTROPIC_MCP_STATE_KEY environment variable, else a key kept in a shared store).
    state_key: str = attrs.field(default="", repr=False)
    #: A ``tools/call`` of a client declaring the tasks extension still running this long
    #: becomes a task (answered with a handle to poll); a quicker one answers as usual.
    task_after_seconds: float = 1.0


@attrs.frozen(kw_only=True)
class IdentityConfig:
    keys: Mapping[str, AccessLevel] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ExternalServerConfig:
    """One ``[external.<name>]`` server (or an imported ``.mcp.json`` entry): how to reach it, its limits."""

    name: str
    transport: str  # "stdio" | "http"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: Path | None = None
    url: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    plan: str = "shared"
    access: Mapping[str, AccessLevel] = attrs.field(factory=dict)
    call_timeout_seconds: float = 60.0
    connect_timeout_seconds: float = 30.0
    max_operations: int = 8
    idle_seconds: float = 900.0
    max_clients: int = 64
    list_ttl_seconds: float | None = None
    backoff_initial_seconds: float = 0.5
    backoff_max_seconds: float = 30.0
    #: While the server is down its tools stay listed this long (calls answer a tool error naming
    #: the server and the next reconnection attempt), then are withdrawn until it is back; 0: at once.
    withdraw_after_seconds: float = 60.0
    #: Whether the server's own annotations (``readOnlyHint``) decide a tool's access level.
    #: MCP calls hints from an untrusted server untrusted: by default every tool not named in
    #: ``access`` or ``read_only_tools`` is a WRITE tool, whatever it says of itself.
    trust_annotations: bool = False
    #: Run the stdio server's process in the OS sandbox (docs/sandbox.md).
    sandbox: bool = False
    source: str = ""


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
    #: ``[auth]``: OAuth resource-server mode for ``serve --transport http`` (None: not configured).
    auth: AuthSettings | None = None
    servers: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    external: Mapping[str, ExternalServerConfig] = attrs.field(factory=dict)
    sandbox: SandboxConfig = attrs.field(factory=lambda: SandboxConfig())
    path: Path | None = None
    local_path: Path | None = None
    sources: Mapping[str, str] = attrs.field(factory=dict)
    #: The ``.mcp.json`` file import_mcp_json reads (None: not importing), and whether the user
    #: approved its current contents (unapproved: none of its servers run).
    mcp_json: Path | None = None
    mcp_json_approved: bool = True

    @property
    def storage_path(self) -> Path:
        path = self.storage.path
        if path is None:
            from ._userdata import default_store_path

            return default_store_path(self.root)
        return path if path.is_absolute() else self.root / path

    @property
    def policy_files(self) -> tuple[Path, ...]:
        """The files that decide what tools may do, whatever their names: every config file
        loaded (``--config`` included), the local file beside it, the ``.mcp.json`` file and the
        root's ``.entropicignore``. No tool may change them (only an allow rule naming one opens it)."""
        files = [Path(p) for text in self.sources.values() for p in text.split(" + ") if not p.startswith("<")]
        files += [p for p in (self.path, self.local_path, self.mcp_json) if p is not None]
        files += [self.root / ".mcp.json", self.root / ".entropicignore"]
        return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in files))

    @property
    def private_dirs(self) -> tuple[Path, ...]:
        """Directories no tool may read or write: the store's and the per-user data directory
        (approvals, every project's default store)."""
        from ._userdata import data_dir

        dirs = [data_dir()]
        if self.storage.backend != "none":
            dirs.append(self.storage_path)
        return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in dirs))

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


def _bool_or_path(value: Any, where: str) -> bool | str:
    if not isinstance(value, (bool, str)) or value == "":
        raise _fail(where, 'true, false, or the path of a .mcp.json file (e.g. ".mcp.json")', value)
    return value


# -- external servers ([external.<name>], import_mcp_json) ----------------------------------

#: Environment variables an external server's ``env`` may not set: the dynamic loader's controls
#: (code injected into the child) and entropic-mcp's own settings (tokens, config, plugin policy).
REFUSED_ENV_PREFIXES = ("LD_", "DYLD_", "ENTROPIC_MCP_")
PLANS = ("shared", "per_conversation")
_EXTERNAL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def refused_env(name: str) -> bool:
    """Whether ``name`` may never be passed to an external server's process (case-insensitively)."""
    upper = name.upper()
    return upper.startswith(REFUSED_ENV_PREFIXES)


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _fail(where, "a positive number", value)
    return float(value)


def _non_negative(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise _fail(where, "a number, 0 or more", value)
    return float(value)


def _string_table(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _fail(where, "a table of strings", value)
    return dict(value)


def _env(value: Any, where: str) -> dict[str, str]:
    env = _string_table(value, where)
    for key, text in env.items():
        if not key or "=" in key or "\x00" in key or "\x00" in text:
            raise _fail(
                f"{where}.{key}", "an environment variable name without '=' or NUL, and a value without NUL", key
            )
        if refused_env(key):
            raise ConfigError(
                f"{where}.{key}: this variable is never passed to an external server (refused: "
                f"{', '.join(p + '*' for p in REFUSED_ENV_PREFIXES)}); remove it"
            )
    return env


def _access(value: Any, where: str) -> dict[str, AccessLevel]:
    table = _table(value, where)
    levels = {}
    for tool, level in table.items():
        try:
            levels[tool] = AccessLevel.parse(level)
        except ValueError:
            raise _fail(f"{where}.{tool}", '"NONE", "READ" or "WRITE"', level) from None
    return levels


_EXTERNAL_NUMBERS: dict[str, Check] = {
    "call_timeout_seconds": _positive,
    "connect_timeout_seconds": _positive,
    "idle_seconds": _positive,
    "list_ttl_seconds": _positive,
    "backoff_initial_seconds": _positive,
    "backoff_max_seconds": _positive,
    "withdraw_after_seconds": _non_negative,
    "max_operations": _int(1),
    "max_clients": _int(1),
}
EXTERNAL_KEYS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "plan",
    "access",
    "read_only_tools",
    "trust_annotations",
    "sandbox",
    *_EXTERNAL_NUMBERS,
)


def external_server(name: str, table: Any, path: Path | str, *, section: str = "external") -> ExternalServerConfig:
    """Validate one ``[external.<name>]`` table; errors name the file and the key."""
    where = f"{path}: {section}.{name}"
    if not _EXTERNAL_NAME.match(name):
        raise ConfigError(f"{path}: [{section}.{name}]: server names use letters, digits, '_' or '-' (at most 64)")
    table = _table(table, where)
    unknown = sorted(set(table) - set(EXTERNAL_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: [{section}.{name}] unknown key(s) {unknown}; expected one of: {', '.join(EXTERNAL_KEYS)}"
        )
    has_command, has_url = "command" in table, "url" in table
    if has_command == has_url:
        raise ConfigError(
            f"{path}: [{section}.{name}] needs exactly one of 'command' (a stdio server) or 'url' "
            "(a Streamable HTTP server)"
        )
    fields: dict[str, Any] = {"name": name, "source": str(path)}
    if has_command:
        fields["transport"] = "stdio"
        command = _str(table["command"], f"{where}.command")
        if not command.strip() or "\x00" in command:
            raise _fail(f"{where}.command", "a program name or path", command)
        fields["command"] = command
        fields["args"] = _strings(table.get("args", []), f"{where}.args")
        fields["env"] = _env(table.get("env", {}), f"{where}.env")
        if "cwd" in table:
            fields["cwd"] = Path(_str(table["cwd"], f"{where}.cwd")).expanduser()
        for key in ("headers",):
            if key in table:
                raise ConfigError(f"{where}.{key}: only a Streamable HTTP server ('url') takes {key}")
    else:
        fields["transport"] = "http"
        url = _str(table["url"], f"{where}.url")
        if not url.startswith(("http://", "https://")):
            raise _fail(f"{where}.url", "an http:// or https:// URL", url)
        fields["url"] = url
        fields["headers"] = _string_table(table.get("headers", {}), f"{where}.headers")
        for key in ("args", "env", "cwd"):
            if key in table:
                raise ConfigError(f"{where}.{key}: only a stdio server ('command') takes {key}")
    if "plan" in table:
        fields["plan"] = _choice(*PLANS)(table["plan"], f"{where}.plan")
    access = _access(table.get("access", {}), f"{where}.access")
    for tool in _strings(table.get("read_only_tools", []), f"{where}.read_only_tools"):
        access.setdefault(tool, AccessLevel.READ)
    fields["access"] = access
    if "trust_annotations" in table:
        fields["trust_annotations"] = _bool(table["trust_annotations"], f"{where}.trust_annotations")
    if "sandbox" in table:
        fields["sandbox"] = _bool(table["sandbox"], f"{where}.sandbox")
    for key, check in _EXTERNAL_NUMBERS.items():
        if key in table:
            fields[key] = check(table[key], f"{where}.{key}")
    return ExternalServerConfig(**fields)


def read_mcp_json(path: Path) -> bytes:
    """The bytes of an import_mcp_json file (what is approved is exactly what is parsed)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: import_mcp_json: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: import_mcp_json: cannot read: {exc}") from None


def import_mcp_json(
    path: Path, configured: Mapping[str, ExternalServerConfig], *, content: bytes | None = None
) -> dict[str, ExternalServerConfig]:
    """The ``mcpServers`` of a Claude / Cursor ``.mcp.json`` as external servers.

    Entries that would shadow a configured name, that use a transport entropic-mcp does not
    speak (SSE) or whose name is not a valid server name are skipped with a warning; keys
    other tools define (``disabled``, ``autoApprove``, ...) are ignored. ``content``: the file's
    bytes, already read (read here when None). Approval is the caller's business.
    """
    import json
    import logging

    log = logging.getLogger("entropic_mcp")
    if content is None:
        content = read_mcp_json(path)
    try:
        data = json.loads(content.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: import_mcp_json: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f'{path}: expected an object with "mcpServers": {{"<name>": {{...}}}}')
    found: dict[str, ExternalServerConfig] = {}
    for name, entry in servers.items():
        if name in configured:
            log.warning("%s: mcpServers.%s skipped: [external.%s] is configured in entropic-mcp.toml", path, name, name)
            continue
        if not isinstance(name, str) or not _EXTERNAL_NAME.match(name):
            log.warning("%s: mcpServers.%s skipped: not a valid server name (letters, digits, '_', '-')", path, name)
            continue
        if not isinstance(entry, dict):
            raise _fail(f"{path}: mcpServers.{name}", "an object", entry)
        kind = entry.get("type")
        if kind in ("sse",):
            log.warning(
                "%s: mcpServers.%s skipped: the SSE transport is not supported (use Streamable HTTP)", path, name
            )
            continue
        if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
            raise _fail(f"{path}: mcpServers.{name}.type", '"stdio" or "http"', kind)
        table = {key: entry[key] for key in ("command", "args", "env", "cwd", "url", "headers") if key in entry}
        found[name] = external_server(name, table, path, section="mcpServers")
    return found


# -- [sandbox]: the OS sandbox of the programs tools start (entropic_mcp._sandbox) --------------


@attrs.frozen(kw_only=True)
class SandboxOverride:
    """``[sandbox.servers.<name>]``: one server's changes to ``[sandbox]`` (None: as there)."""

    mode: str | None = None
    network: bool | None = None
    writable: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class SandboxConfig:
    mode: str = "auto"
    network: bool = False
    writable: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    servers: Mapping[str, SandboxOverride] = attrs.field(factory=dict)


SANDBOX_MODES = ("auto", "required", "off")


def _sandbox_servers(value: Any, where: str) -> dict[str, SandboxOverride]:
    checks: dict[str, Check] = {
        "mode": _choice(*SANDBOX_MODES),
        "network": _bool,
        "writable": _strings,
        "deny_read": _strings,
    }
    found = {}
    for name, table in _table(value, where).items():
        table = _table(table, f"{where}.{name}")
        unknown = sorted(set(table) - set(checks))
        if unknown:
            raise ConfigError(f"{where}.{name}: unknown key(s) {unknown}; expected one of: {', '.join(checks)}")
        found[name] = SandboxOverride(**{key: checks[key](v, f"{where}.{name}.{key}") for key, v in table.items()})
    return found


SECTIONS: dict[str, dict[str, Check]] = {
    "entropic_mcp": {"root": _str, "plugins": _strings, "import_mcp_json": _bool_or_path},
    "storage": {
        "backend": _str,
        "path": _str,
        "options": _table,
        "conversation_state": _choice("auto", "store", "memory"),
    },
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
        "idempotency_seconds": _positive,
        "idempotency_wait_seconds": _positive,
    },
    "serve": {
        "transport": _choice("stdio", "http"),
        "host": _str,
        "port": _int(0),
        "tool_names": _choice("portable", "underscored", "dotted"),
        "list_page_size": _int(1),
        "max_message_bytes": _int(1024),
        "allowed_origins": _strings,
        "event_loop": _choice("auto", "uvloop", "asyncio"),
        "structured_content": _choice("declared", "json"),
        "header_timeout_seconds": _positive,
        "body_timeout_seconds": _positive,
        "max_pending_per_client": _int(1),
        "max_pending_connections": _int(1),
        "state_key": _str,
        "task_after_seconds": _positive,
    },
    "sandbox": {
        "mode": _choice(*SANDBOX_MODES),
        "network": _bool,
        "writable": _strings,
        "deny_read": _strings,
        "servers": _sandbox_servers,
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
        elif section == "auth":  # validated whole in build_config: the local file may add client_secret
            for key, value in _table(table, where).items():
                flat[("auth", key)] = value
        elif section == "external":
            for name, server_table in _table(table, where).items():
                flat[("external", name)] = external_server(name, server_table, path)
        elif section == "import_mcp_json":  # also accepted at the top level of the file
            flat[("entropic_mcp", "import_mcp_json")] = _bool_or_path(table, f"{path}: import_mcp_json")
        else:
            known = [*SECTIONS, "servers", "identities", "external", "auth"]
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
    external: dict[str, ExternalServerConfig] = section("external")
    wanted = flat.get(("entropic_mcp", "import_mcp_json"), False)
    mcp_json: Path | None = None
    approved = True
    if wanted:
        mcp_json = (root / ".mcp.json" if wanted is True else (base_dir / Path(str(wanted)).expanduser())).resolve()
        approved = _import_approved(mcp_json, external)
    auth_table = section("auth")
    auth = None
    if auth_table:
        from ._serve._oauth import AuthSettings

        try:
            auth = AuthSettings.from_table(auth_table)
        except ConfigError as exc:
            raise ConfigError(f"{sources.get('auth.' + next(iter(auth_table)), 'config')}: {exc}") from None
    return Config(
        root=root,
        plugins=plugins,
        storage=StorageConfig(**storage),
        permissions=PermissionsConfig(**section("permissions")),
        pipeline=PipelineConfig(**section("pipeline")),
        serve=ServeConfig(**section("serve")),
        identities=section("identities"),
        auth=auth,
        servers=section("servers"),
        external=external,
        sandbox=SandboxConfig(**section("sandbox")),
        path=path,
        local_path=local_path,
        sources=sources,
        mcp_json=mcp_json,
        mcp_json_approved=approved,
    )


#: The command that approves a .mcp.json file (named in the warning an unapproved file gets).
APPROVE_COMMAND = "entropic-mcp external approve"


def _import_approved(path: Path, external: dict[str, ExternalServerConfig]) -> bool:
    """Add the servers of the .mcp.json at ``path`` to ``external`` if the user approved exactly
    its contents; otherwise add none and say so in one line. Returns whether it was approved.

    An agent that can write files could otherwise write a .mcp.json whose command the next
    ``serve`` runs; like Claude Code's project servers, a project's file runs only once the user
    has approved its contents, recorded outside the project.
    """
    import logging

    from ._userdata import is_approved

    content = read_mcp_json(path)
    if not is_approved(path, content):
        logging.getLogger("entropic_mcp").warning(
            "%s is not approved (new, or changed since it was approved), so none of its servers run; "
            "review it, then run: %s %s",
            path,
            APPROVE_COMMAND,
            path,
        )
        return False
    external.update(import_mcp_json(path, external, content=content))
    return True
