"""The ``[servers.bash]`` table, validated into one frozen record."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from fnmatch import translate
from typing import Any

import attrs
from entropic_mcp import ConfigError, PathPolicy

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

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_env_deny_regex", _deny_regex((*ALWAYS_DENIED, *self.env_deny)))

    @property
    def deny_pattern(self) -> re.Pattern[str] | None:
        """The compiled ``ENTROPIC_MCP_*`` + ``env_deny`` globs."""
        return self._env_deny_regex

    def environment(self) -> dict[str, str]:
        """The child's environment: the server's, minus ``env_deny`` (and ``ENTROPIC_MCP_*``), plus ``env_set``."""
        deny = self._env_deny_regex
        env = {k: v for k, v in os.environ.items() if deny is None or not deny.match(k)}
        env.update({k: v for k, v in self.env_set.items() if not _ALWAYS_DENIED.match(k)})
        return env

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> BashSettings:
        """Validate the server's table (unknown keys were already refused by the base)."""
        values: dict[str, Any] = {}
        if "shell" in table:
            shell = table["shell"]
            if not isinstance(shell, str) or not shell.strip():
                raise ConfigError(f"[servers.bash] shell: expected a path to a shell, got {shell!r}")
            import shutil

            if shutil.which(shell) is None:
                raise ConfigError(f"[servers.bash] shell: {shell!r} is not an executable file or a command on PATH")
            values["shell"] = shell
        for key in ("timeout_seconds", "max_timeout_seconds", "background_timeout_seconds"):
            if key in table:
                values[key] = _positive(key, table[key])
        ceiling = values.get("max_timeout_seconds", DEFAULT_MAX_TIMEOUT)
        if "timeout_seconds" not in values:  # a lowered maximum lowers the default with it
            values["timeout_seconds"] = min(DEFAULT_TIMEOUT, ceiling)
        timeout = values["timeout_seconds"]
        if timeout > ceiling:
            raise ConfigError(
                f"[servers.bash] timeout_seconds ({timeout:g}) is above max_timeout_seconds ({ceiling:g}); "
                "lower it or raise max_timeout_seconds"
            )
        if "max_output_bytes" in table:
            size = table["max_output_bytes"]
            if isinstance(size, bool) or not isinstance(size, int) or size < 256:
                raise ConfigError(f"[servers.bash] max_output_bytes: expected an integer of at least 256, got {size!r}")
            values["max_output_bytes"] = size
        if "max_background_runs" in table:
            runs = table["max_background_runs"]
            if isinstance(runs, bool) or not isinstance(runs, int) or runs < 0:
                raise ConfigError(
                    f"[servers.bash] max_background_runs: expected a whole number of at least 0 (0 turns "
                    f"background runs off), got {runs!r}"
                )
            values["max_background_runs"] = runs
        if "persist_cwd" in table:
            if not isinstance(table["persist_cwd"], bool):
                raise ConfigError(f"[servers.bash] persist_cwd: expected true or false, got {table['persist_cwd']!r}")
            values["persist_cwd"] = table["persist_cwd"]
        if "env_deny" in table:
            deny = table["env_deny"]
            if not isinstance(deny, (list, tuple)) or not all(isinstance(g, str) and g for g in deny):
                raise ConfigError(
                    f'[servers.bash] env_deny: expected a list of variable-name globs such as "*_TOKEN", got {deny!r}'
                )
            values["env_deny"] = tuple(deny)
        if "env_set" in table:
            env = table["env_set"]
            if not isinstance(env, Mapping) or not all(
                isinstance(k, str) and k and "=" not in k and "\x00" not in k and isinstance(v, str) and "\x00" not in v
                for k, v in env.items()
            ):
                raise ConfigError(f'[servers.bash] env_set: expected a table of NAME = "value" strings, got {env!r}')
            values["env_set"] = dict(env)
        policy = {k: table[k] for k in ("allow_outside_root", "outside_root_allow", "outside_root_deny") if k in table}
        if policy:
            for key in ("outside_root_allow", "outside_root_deny"):
                if key in policy and (
                    not isinstance(policy[key], (list, tuple)) or not all(isinstance(p, str) for p in policy[key])
                ):
                    raise ConfigError(
                        f"[servers.bash] {key}: expected a list of absolute directory paths, got {policy[key]!r}"
                    )
            try:
                values["path_policy"] = PathPolicy(**policy)
            except ConfigError as exc:
                raise ConfigError(f"[servers.bash] {exc}") from None
        return cls(**values)


def _positive(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"[servers.bash] {key}: expected a positive number of seconds, got {value!r}")
    return float(value)
