"""Fixtures: ServerManagers with one real external server (``fault_server.py`` over real stdio)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from entropic_mcp import ServerManager

sys.path.insert(0, str(Path(__file__).parent))

from external_helpers import build, external


@pytest.fixture
def managers(tmp_path: Path) -> Iterator[Callable[..., ServerManager]]:
    """``managers(*fault_server_args, **settings)`` → a manager with server ``f``; all closed after the test."""
    made: list[ServerManager] = []

    def make(*args: str, **settings: Any) -> ServerManager:
        manager = build(tmp_path, {"f": external(*args, **settings)})
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()
