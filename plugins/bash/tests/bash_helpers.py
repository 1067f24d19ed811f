"""Shared helpers of the bash plugin's tests (a module, so tests can import it by name)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
from entropic_mcp import ServerManager, config_from_dict
from entropic_mcp_bash import BashServer


def make_manager(
    root: Path,
    *,
    permissions: dict[str, Any] | None = None,
    bash: dict[str, Any] | None = None,
    grace: float = 0.3,
    pipeline: dict[str, Any] | None = None,
    storage: dict[str, Any] | None = None,
    store: Any = None,
) -> tuple[ServerManager, BashServer]:
    """A real ServerManager and pipeline around one configured BashServer (``storage``: the
    ``[storage]`` table, none by default; ``store``: an open backend instead)."""
    server = BashServer(root=root)
    server.configure(bash or {})
    server.grace = grace
    config = config_from_dict(
        {
            "storage": storage or {"backend": "none"},
            "permissions": permissions or {"default": "allow"},
            "pipeline": pipeline or {},
        },
        root=root,
    )
    return ServerManager(config, servers=[server], storage=store), server


def gone(pid: int) -> bool:
    """Not running: no such process, or a zombie waiting for init (not our child)."""
    try:
        process = psutil.Process(pid)
        return process.status() == psutil.STATUS_ZOMBIE and process.ppid() != os.getpid()
    except psutil.NoSuchProcess:
        return True


def live_group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (zombies do not)."""
    members = []
    for process in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return members
