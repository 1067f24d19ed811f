"""The ``[servers.filesystem]`` table, validated into one frozen record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from entropic_mcp import ConfigError, PathPolicy

KIB = 1024

CONFIG_KEYS = frozenset(
    {
        "allow_outside_root",
        "outside_root_allow",
        "outside_root_deny",
        "max_read_bytes",
        "max_walk_entries",
        "max_glob_results",
        "max_grep_matches",
    }
)

#: key -> (default, smallest accepted value)
LIMITS = {
    "max_read_bytes": (256 * KIB, 1 * KIB),
    "max_walk_entries": (250_000, 1),
    "max_glob_results": (500, 1),
    "max_grep_matches": (100, 1),
}


@attrs.frozen(kw_only=True)
class Settings:
    """Everything configurable about the filesystem server."""

    policy: PathPolicy = attrs.field(factory=PathPolicy)
    max_read_bytes: int = LIMITS["max_read_bytes"][0]
    max_walk_entries: int = LIMITS["max_walk_entries"][0]
    max_glob_results: int = LIMITS["max_glob_results"][0]
    max_grep_matches: int = LIMITS["max_grep_matches"][0]


def settings_from_table(server: str, table: Mapping[str, Any]) -> Settings:
    """Validate the keys the server owns; every error names ``[servers.<server>] <key>``."""
    where = f"[servers.{server}]"
    values: dict[str, Any] = {}
    for key, (default, minimum) in LIMITS.items():
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{where} {key}: expected an integer >= {minimum}, got {value!r}")
        values[key] = value
    policy_args: dict[str, Any] = {}
    if "allow_outside_root" in table:
        value = table["allow_outside_root"]
        if value not in (True, False, "optional") or (isinstance(value, int) and not isinstance(value, bool)):
            raise ConfigError(f'{where} allow_outside_root: expected false, true or "optional", got {value!r}')
        policy_args["allow_outside_root"] = value
    for key in ("outside_root_allow", "outside_root_deny"):
        if key not in table:
            continue
        value = table[key]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where} {key}: expected a list of absolute paths, got {value!r}")
        policy_args[key] = value
    try:
        policy = PathPolicy(**policy_args)
    except ConfigError as exc:
        key = next((k for k in ("outside_root_allow", "outside_root_deny") if k in policy_args), "allow_outside_root")
        if len([k for k in ("outside_root_allow", "outside_root_deny") if k in policy_args]) > 1:
            key = "outside_root_allow / outside_root_deny"
        raise ConfigError(f"{where} {key}: {exc}") from None
    return Settings(policy=policy, **values)
