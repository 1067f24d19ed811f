"""Helpers of the entropic plugin's tests (a uniquely named module, so test trees can be collected together)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import entropic_mcp_entropic
from entropic_mcp import CallOutcome, ServerManager, config_from_dict, testing
from entropic_mcp.storage import StorageBackend
from entropic_mcp.testing import fresh_plugins

TIERS = {"tiers": ["lead", "researcher", "coder"], "requires_context": ["coder"], "max_turns_limit": 30}


def build(
    root: Path,
    *,
    storage: bool = False,
    store: StorageBackend | None = None,
    entropic: dict[str, Any] | None = None,
    plugins: tuple[object, ...] = (),
) -> ServerManager:
    """A manager with the entropic server; ``storage``: tinydb in ``root/store``; ``store``: this backend."""
    data: dict[str, Any] = {
        "storage": {"backend": "tinydb", "path": str(root / "store")} if storage else {"backend": "none"},
        "permissions": {"default": "allow"},
        "servers": {"entropic": TIERS if entropic is None else entropic},
    }
    manager = ServerManager(
        config_from_dict(data, root=root), plugins=fresh_plugins(entropic_mcp_entropic, *plugins), storage=store
    )
    manager.build_servers()
    return manager


def call(
    manager: ServerManager, name: str, args: object = None, *, conversation: str = "c1", identity: str | None = None
) -> CallOutcome:
    """``entropic_mcp.testing.call`` in conversation ``c1`` unless told otherwise."""
    return testing.call(manager, name, args, conversation=conversation, identity=identity)


def directive_types(outcome: CallOutcome) -> list[str]:
    return [d.to_dict()["type"] for d in outcome.response.directives]
