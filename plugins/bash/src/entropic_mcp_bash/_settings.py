"""The ``[servers.bash]`` table, validated into one frozen record."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from fnmatch import translate
from typing import Any, Literal

import attrs
from entropic_mcp import ConfigError
from entropic_mcp.toolkit import settings_from_table
from entropic_mcp.toolkit.paths import PathPolicy

DEFAULT_SHELL = "/bin/bash"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_TIMEOUT = 600.0
DEFAULT_MAX_OUTPUT = 64 * 1024
DEFAULT_BACKGROUND_TIMEOUT = 3600.0
DEFAULT_MAX_BACKGROUND_RUNS = 4
#: Always removed from a command's environment, whatever ``env_deny`` says: entropic-mcp's own
#: variables, among them the serve token (``ENTROPIC_MCP_TOKEN``).
ALWAYS_DENIED = ("ENTROPIC_MCP_*",)
_ALWAYS_DENIED = re.compile("|".join(translate(g) for g in ALWAYS_DENIED))
#: Seconds between TERM and KILL when a process group is stopped.
KILL_GRACE = 2.0

KEYS = frozenset(
    {
        "shell",
        "max_timeout_seconds",
        "max_output_bytes",
        "env_deny",
        "env_set",
        "allow_outside_root",
        "outside_root_allow",
        "outside_root_deny",
        "background_timeout_seconds",
        "max_background_runs",
        "persist_cwd",
    }
)


def _deny_regex(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(translate(g) for g in globs)) if globs else None


@attrs.frozen(kw_only=True)
class BashSettings:
    """What the server runs commands with; built by ``from_table`` from config."""

    shell: str = DEFAULT_SHELL
    timeout_seconds: float = DEFAULT_TIMEOUT
    max_timeout_seconds: float = DEFAULT_MAX_TIMEOUT
    max_output_bytes: int = DEFAULT_MAX_OUTPUT
    env_deny: tuple[str, ...] = ()
    env_set: Mapping[str, str] = attrs.field(factory=dict)
    path_policy: PathPolicy = attrs.field(factory=PathPolicy)
    background_timeout_seconds: float = DEFAULT_BACKGROUND_TIMEOUT
    max_background_runs: int = DEFAULT_MAX_BACKGROUND_RUNS
    persist_cwd: bool = True
    _env_deny_regex: re.Pattern[str] | None = attrs.field(init=False, eq=False, repr=False)
    _env_cache: tuple[dict[Any, Any], dict[str, str]] | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_env_deny_regex", _deny_regex((*ALWAYS_DENIED, *self.env_deny)))

    @property
    def deny_pattern(self) -> re.Pattern[str] | None:
        """The compiled ``ENTROPIC_MCP_*`` + ``env_deny`` globs."""
        return self._env_deny_regex

    def environment(self) -> Mapping[str, str]:
        """The child's environment: the server's, minus ``env_deny`` (and ``ENTROPIC_MCP_*``), plus ``env_set``.

        Kept until ``os.environ`` changes: a call's permission check and its run share one
        (callers must not change it). The check is a comparison of the process's raw
        environment with a copy of it (C dict and bytes compares, a few microseconds), so a
        variable set or removed since is seen by the next call.
        """
        raw: dict[Any, Any] | None = getattr(os.environ, "_data", None)
        kept = self._env_cache
        if kept is not None and raw is not None and kept[0] == raw:
            return kept[1]
        deny = self._env_deny_regex
        env = {k: v for k, v in os.environ.items() if deny is None or not deny.match(k)}
        env.update({k: v for k, v in self.env_set.items() if not _ALWAYS_DENIED.match(k)})
        if raw is not None:
            object.__setattr__(self, "_env_cache", (dict(raw), env))
        return env

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> BashSettings:
        """Validate the server's table; every error names ``[servers.bash] <key>``.

        The toolkit checks each key's type and bounds (and refuses unknown keys); what spans
        keys or needs the system (the shell on PATH, timeout within the maximum, the path
        policy) is checked here. The manager adds the file the table came from to the error.
        """
        raw = _read_table(table)
        values: dict[str, Any] = {}
        if raw.shell is not None:
            if not raw.shell.strip():
                raise ConfigError(f"[servers.bash] shell: expected {_HINTS['shell']}, got {raw.shell!r}")
            import shutil

            if shutil.which(raw.shell) is None:
                raise ConfigError(f"[servers.bash] shell: {raw.shell!r} is not an executable file or a command on PATH")
            values["shell"] = raw.shell
        for key in ("timeout_seconds", "max_timeout_seconds", "background_timeout_seconds"):
            seconds = getattr(raw, key)
            if seconds is not None:
                if not seconds > 0:  # the toolkit's bounds are inclusive; zero is no timeout at all
                    raise ConfigError(f"[servers.bash] {key}: expected {_HINTS[key]}, got {seconds!r}")
                values[key] = seconds
        ceiling = values.get("max_timeout_seconds", DEFAULT_MAX_TIMEOUT)
        if "timeout_seconds" not in values:  # a lowered maximum lowers the default with it
            values["timeout_seconds"] = min(DEFAULT_TIMEOUT, ceiling)
        timeout = values["timeout_seconds"]
        if timeout > ceiling:
            raise ConfigError(
                f"[servers.bash] timeout_seconds ({timeout:g}) is above max_timeout_seconds ({ceiling:g}); "
                "lower it or raise max_timeout_seconds"
            )
        for key in ("max_output_bytes", "max_background_runs", "persist_cwd"):
            if getattr(raw, key) is not None:
                values[key] = getattr(raw, key)
        if raw.env_deny is not None:
            if not all(raw.env_deny):
                raise ConfigError(f"[servers.bash] env_deny: expected {_HINTS['env_deny']}, got {list(raw.env_deny)!r}")
            values["env_deny"] = raw.env_deny
        if raw.env_set is not None:
            env = raw.env_set
            if not isinstance(env, Mapping) or not all(
                isinstance(k, str) and k and "=" not in k and "\x00" not in k and isinstance(v, str) and "\x00" not in v
                for k, v in env.items()
            ):
                raise ConfigError(f"[servers.bash] env_set: expected {_HINTS['env_set']}, got {env!r}")
            values["env_set"] = dict(env)
        policy = {k: getattr(raw, k) for k in POLICY_KEYS if getattr(raw, k) is not None}
        if policy:
            try:
                values["path_policy"] = PathPolicy(**policy)
            except ConfigError as exc:
                # The policy checks the paths of both lists at once; name the list(s) given.
                keys = " / ".join(k for k in POLICY_KEYS[1:] if k in policy) or POLICY_KEYS[0]
                raise ConfigError(f"[servers.bash] {keys}: {exc}") from None
        return cls(**values)


#: What the server base reads itself (``timeout_seconds`` is read here too, as the default).
BASE_KEYS = frozenset({"max_threads"})
POLICY_KEYS = ("allow_outside_root", "outside_root_allow", "outside_root_deny")


@attrs.frozen(kw_only=True)
class _Table:
    """The table as written, each key typed (None: not set); ``metadata["min"]``: the smallest accepted."""

    shell: str | None = None
    timeout_seconds: float | None = None
    max_timeout_seconds: float | None = None
    background_timeout_seconds: float | None = None
    max_output_bytes: int | None = attrs.field(default=None, metadata={"min": 256})
    max_background_runs: int | None = attrs.field(default=None, metadata={"min": 0})
    persist_cwd: bool | None = None
    env_deny: tuple[str, ...] | None = None
    # Checked here, not by the toolkit: it has no rule for a table of strings.
    env_set: Mapping[str, Any] | None = None
    allow_outside_root: Literal[True, False, "optional"] | None = None
    outside_root_allow: tuple[str, ...] | None = None
    outside_root_deny: tuple[str, ...] | None = None


#: What each key is: said after the toolkit's "expected ..." so the fix is plain.
_HINTS = {
    "shell": "a path to a shell",
    "timeout_seconds": "a positive number of seconds",
    "max_timeout_seconds": "a positive number of seconds",
    "background_timeout_seconds": "a positive number of seconds",
    "max_output_bytes": "an integer of at least 256",
    "max_background_runs": "a whole number of at least 0 (0 turns background runs off)",
    "persist_cwd": "true or false",
    "env_deny": 'a list of variable-name globs such as "*_TOKEN"',
    "env_set": 'a table of NAME = "value" strings',
    "allow_outside_root": 'true, false or "optional"',
    "outside_root_allow": "a list of absolute directory paths",
    "outside_root_deny": "a list of absolute directory paths",
}


def _read_table(table: Mapping[str, Any]) -> _Table:
    try:
        return settings_from_table(_Table, table, server="bash", extra_keys=BASE_KEYS)
    except ConfigError as exc:
        message = str(exc)
        # The toolkit names the key as "[servers.bash] <key>" (or "<key>[i]" inside an array).
        key = next((k for k in _HINTS if f"[servers.bash] {k}:" in message or f"[servers.bash] {k}[" in message), None)
        if key is None:
            raise
        raise ConfigError(f"{message}; {key} is {_HINTS[key]}") from None
