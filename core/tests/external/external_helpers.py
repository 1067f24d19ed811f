"""Helpers of the external-server tests: configs that run ``fault_server.py`` over real stdio."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from entropic_mcp import ServerManager
from entropic_mcp._config import config_from_dict

FAULT_SERVER = Path(__file__).with_name("fault_server.py")


def external(*args: str, **settings: Any) -> dict[str, Any]:
    """An ``[external.<name>]`` table that runs the fault server with ``args``."""
    table: dict[str, Any] = {
        "command": sys.executable,
        "args": [str(FAULT_SERVER), *args],
        "call_timeout_seconds": 10,
        "backoff_initial_seconds": 0.05,
        "backoff_max_seconds": 0.2,
    }
    table.update(settings)
    return table


def build(root: Path, servers: dict[str, dict[str, Any]], **extra: Any) -> ServerManager:
    data: dict[str, Any] = {
        "entropic_mcp": {"plugins": []},
        "storage": {"backend": "none"},
        "permissions": {"default": "allow"},
        "external": servers,
        **extra,
    }
    return ServerManager.from_config(config_from_dict(data, root=root), load_entry_points=False)


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


async def async_wait_until(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    import anyio

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await anyio.sleep(0.05)
