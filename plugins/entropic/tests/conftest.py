"""The ``make`` fixture: managers built from the real plugin module (storage off, or tinydb in tmp_path)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from entropic_mcp import ServerManager
from entropic_support import build


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., ServerManager]]:
    made: list[ServerManager] = []

    def factory(**kwargs: Any) -> ServerManager:
        manager = build(tmp_path, **kwargs)
        made.append(manager)
        return manager

    yield factory
    for manager in made:
        manager.close()
