"""Paths for a server that works under a root: confinement, path policies, the permission
parts and rules a path-taking tool is judged by, and the per-user cache directory."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from .._cachedir import cache_directory
from .._paths import PathPolicy, ResolvedPath, confine, is_within, printable, relative_display, shown_entry
from .._pipeline._rules import (
    POLICY_FILES,
    READ_PATH_TOOLS,
    WRITE_PATH_TOOLS,
    PermissionPart,
    PreparedParts,
    escape_glob,
    path_part,
)

if TYPE_CHECKING:
    from .._context import CallContext

__all__ = [
    "POLICY_FILES",
    "READ_PATH_TOOLS",
    "WRITE_PATH_TOOLS",
    "PathPolicy",
    "PermissionPart",
    "PreparedParts",
    "ResolvedPath",
    "cache_directory",
    "confine",
    "escape_glob",
    "is_within",
    "path_part",
    "path_refused",
    "printable",
    "relative_display",
    "shown_entry",
]


def path_refused(
    ctx: CallContext, access: Literal["read", "write"], path: str, *, also: Iterable[str] = ()
) -> str | None:
    """For walking tools: the deny or ask rule that matches one file or directory, so the tool
    skips it; None when nothing refuses it or the context has no manager (a server used bare).
    Never asks anyone."""
    return ctx.services.path_refused(access, path, also=also)
