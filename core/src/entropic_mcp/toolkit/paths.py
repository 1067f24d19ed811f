"""Paths for a server that works under a root: confinement, path policies, and the permission
parts and rules a path-taking tool is judged by."""

from .._paths import PathPolicy, ResolvedPath, confine, is_within
from .._pipeline._rules import (
    POLICY_FILES,
    READ_PATH_TOOLS,
    WRITE_PATH_TOOLS,
    PermissionPart,
    escape_glob,
    path_part,
    path_refused,
)

__all__ = [
    "POLICY_FILES",
    "READ_PATH_TOOLS",
    "WRITE_PATH_TOOLS",
    "PathPolicy",
    "PermissionPart",
    "ResolvedPath",
    "confine",
    "escape_glob",
    "is_within",
    "path_part",
    "path_refused",
]
