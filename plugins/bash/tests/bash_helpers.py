"""Shared helpers of the bash plugin's tests (a module, so tests can import it by name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from entropic_mcp import ServerManager, config_from_dict
from entropic_mcp_bash import BashServer


def make_manager(
    root: Path,
    *,
    permissions: dict[str, Any] | None = None,
    bash: dict[str, Any] | None = None,
    grace: float = 0.3,
    pipeline: dict[str, Any] | None = None,
) -> tuple[ServerManager, BashServer]:
    """A real ServerManager and pipeline around one configured BashServer."""
    server = BashServer(root=root)
    server.configure(bash or {})
    server.grace = grace
    config = config_from_dict(
        {
            "storage": {"backend": "none"},
            "permissions": permissions or {"default": "allow"},
            "pipeline": pipeline or {},
        },
        root=root,
    )
    return ServerManager(config, servers=[server]), server
