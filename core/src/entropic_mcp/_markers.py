"""The marker plugins put on their hook implementations, in a module of its own: the built-in
plugins use it without importing the plugin loader that loads them."""

from __future__ import annotations

import pluggy

hookimpl = pluggy.HookimplMarker("entropic_mcp")
