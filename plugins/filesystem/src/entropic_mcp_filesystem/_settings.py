"""The ``[servers.filesystem]`` table, validated into one frozen record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from entropic_mcp import ConfigError
from entropic_mcp.toolkit import settings_from_table
from entropic_mcp.toolkit.paths import PathPolicy

KIB = 1024
#: read_file's and read_files' own result budget (``ToolBase.result_budget_bytes``): above the
#: pipeline's default 16 KiB cap, which cut a source file to 300-400 lines of a 2,000-line page.
READ_RESULT_BYTES = 64 * KIB


@attrs.frozen(kw_only=True)
class Limits:
    """The keys of the table that are plain values (``metadata["min"]``: the smallest accepted)."""

    max_read_bytes: int = attrs.field(default=256 * KIB, metadata={"min": 1 * KIB})
    max_walk_entries: int = attrs.field(default=250_000, metadata={"min": 1})
    max_glob_results: int = attrs.field(default=500, metadata={"min": 1})
    max_grep_matches: int = attrs.field(default=100, metadata={"min": 1})
    #: Lines read_file returns per page (text form).
    read_page_lines: int = attrs.field(default=2000, metadata={"min": 1})
    #: read_file's and read_files' text form numbers each line (``N<TAB>line``) unless a call's
    #: ``line_numbers`` says otherwise; off by default: numbers cost a 2,000-line file 7 % more
    #: tokens than the file's own text (docs/decisions.md).
    read_line_numbers: bool = False
    #: Characters of one line read_file shows before a continuation marker.
    max_line_chars: int = attrs.field(default=2000, metadata={"min": 80})
    #: Largest existing file write_file and edit_file replace (they read it whole to check it), and
    #: largest file an edit may produce (refused before anything is written).
    max_edit_bytes: int = attrs.field(default=10 * 1024 * KIB, metadata={"min": 1 * KIB})
    #: Largest image or PDF read_file returns as MCP content.
    max_media_bytes: int = attrs.field(default=5 * 1024 * KIB, metadata={"min": 1 * KIB})
    #: Longest line grep holds at once; a longer one is searched in pieces of this size.
    max_grep_line_bytes: int = attrs.field(default=1024 * KIB, metadata={"min": 1 * KIB})
    #: A regular file with more than one name may be a hard link to a file outside the root.
    allow_hard_links: bool = False
    #: Keep glob's directory listings and compiled ignore files on disk between servers (in the
    #: user's cache directory, validated by stat on use), so a new server's first glob does not
    #: re-read the whole tree.
    listing_cache: bool = True


@attrs.frozen(kw_only=True)
class Settings(Limits):
    """Everything configurable about the filesystem server: the limits and the outside-root policy."""

    policy: PathPolicy = attrs.field(factory=PathPolicy)


#: The keys that build the core's PathPolicy (it checks the paths; errors name the key here).
POLICY_KEYS = frozenset({"allow_outside_root", "outside_root_allow", "outside_root_deny"})
CONFIG_KEYS = frozenset(field.name for field in attrs.fields(Limits)) | POLICY_KEYS
#: What the server base reads itself.
BASE_KEYS = frozenset({"timeout_seconds", "max_threads"})


def read_settings(server: str, table: Mapping[str, Any]) -> Settings:
    """Validate the keys the server owns; every error names ``[servers.<server>] <key>``.

    The manager adds the file the table came from to a ``ConfigError`` raised here.
    """
    where = f"[servers.{server}]"
    limits = settings_from_table(Limits, table, server=server, extra_keys=POLICY_KEYS | BASE_KEYS)
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
    return Settings(policy=policy, **attrs.asdict(limits, recurse=False))
