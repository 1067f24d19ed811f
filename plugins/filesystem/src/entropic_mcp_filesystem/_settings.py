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
        "allow_hard_links",
        "read_page_lines",
        "max_line_chars",
        "max_edit_bytes",
        "max_media_bytes",
        "max_grep_line_bytes",
    }
)

#: key -> (default, smallest accepted value)
LIMITS = {
    "max_read_bytes": (256 * KIB, 1 * KIB),
    "max_walk_entries": (250_000, 1),
    "max_glob_results": (500, 1),
    "max_grep_matches": (100, 1),
    "read_page_lines": (2000, 1),
    "max_line_chars": (2000, 80),
    "max_edit_bytes": (10 * 1024 * KIB, 1 * KIB),
    "max_media_bytes": (5 * 1024 * KIB, 1 * KIB),
    "max_grep_line_bytes": (1024 * KIB, 1 * KIB),
}


@attrs.frozen(kw_only=True)
class Settings:
    """Everything configurable about the filesystem server."""

    policy: PathPolicy = attrs.field(factory=PathPolicy)
    max_read_bytes: int = LIMITS["max_read_bytes"][0]
    max_walk_entries: int = LIMITS["max_walk_entries"][0]
    max_glob_results: int = LIMITS["max_glob_results"][0]
    max_grep_matches: int = LIMITS["max_grep_matches"][0]
    #: Lines read_file returns per page (text form).
    read_page_lines: int = LIMITS["read_page_lines"][0]
    #: Characters of one line read_file shows before a continuation marker.
    max_line_chars: int = LIMITS["max_line_chars"][0]
    #: Largest existing file write_file and edit_file replace (they read it whole to check it).
    max_edit_bytes: int = LIMITS["max_edit_bytes"][0]
    #: Largest image or PDF read_file returns as MCP content.
    max_media_bytes: int = LIMITS["max_media_bytes"][0]
    #: Longest line grep holds at once; a longer one is searched in pieces of this size.
    max_grep_line_bytes: int = LIMITS["max_grep_line_bytes"][0]
    #: A regular file with more than one name may be a hard link to a file outside the root.
    allow_hard_links: bool = False


def settings_from_table(server: str, table: Mapping[str, Any]) -> Settings:
    """Validate the keys the server owns; every error names ``[servers.<server>] <key>``."""
    where = f"[servers.{server}]"
    values: dict[str, Any] = {}
    for key, (default, minimum) in LIMITS.items():
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{where} {key}: expected an integer >= {minimum}, got {value!r}")
        values[key] = value
    for key in ("allow_hard_links",):
        value = table.get(key, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{where} {key}: expected true or false, got {value!r}")
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
