"""Load only the parts of the MCP SDK that serving needs.

The SDK's package ``__init__`` modules re-export the client, its HTTP stack and ``MCPServer``
(``mcp`` and ``mcp.server``); serve uses none of them, and importing them costs about a fifth of
serve's start-up. ``defer_package_init`` puts the package in ``sys.modules`` without running its
``__init__``, so submodules import directly; the first attribute looked up on the package (``from
mcp import Client``, ``mcp.types``) runs the real ``__init__`` then, so every other user of the SDK
in the process sees the package as usual.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any


def defer_package_init(name: str) -> None:
    """Register package ``name`` with its ``__init__`` deferred to first attribute access."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)

    def __getattr__(attribute: str) -> Any:
        # Remove the hook first: the real __init__ looks names up on its own module.
        module.__dict__.pop("__getattr__", None)
        try:
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except BaseException:
            sys.modules.pop(name, None)
            raise
        try:
            return module.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent and parent in sys.modules:
        setattr(sys.modules[parent], child, module)


def load_serving_sdk() -> ModuleType:
    """Defer ``mcp`` and ``mcp.server``; return the low-level server module."""
    defer_package_init("mcp")
    defer_package_init("mcp.server")
    import mcp.server.lowlevel.server as lowlevel

    return lowlevel
