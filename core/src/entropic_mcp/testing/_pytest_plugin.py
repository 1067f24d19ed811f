"""The pytest plugin of the kit (entry point ``pytest11``): fixtures for plugin authors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .._manager import ServerManager
from .._pipeline import CallOutcome
from .._plugins import Plugins
from ._fixtures import call, fresh_plugins, make_manager


@pytest.fixture
def entropic_plugins() -> Plugins:
    """A fresh plugin manager: built-ins only, no entry points, strict."""
    return fresh_plugins()


@pytest.fixture
def entropic_manager_factory(tmp_path: Path) -> Iterator[Callable[..., ServerManager]]:
    """``factory(config=..., plugins=[...], servers=[...], root=...)`` → a ServerManager, closed after the test."""
    made: list[ServerManager] = []

    def factory(*, root: Path | None = None, **kwargs: Any) -> ServerManager:
        manager = make_manager(root or tmp_path, **kwargs)
        made.append(manager)
        return manager

    yield factory
    for manager in made:
        manager.close()


@pytest.fixture
def entropic_call() -> Callable[..., CallOutcome]:
    """``entropic_call(manager, "server.tool", {...}, conversation=..., identity=...)`` → CallOutcome."""
    return call
