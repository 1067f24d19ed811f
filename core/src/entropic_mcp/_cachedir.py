"""The per-user cache directory, found without importing pathlib or platformdirs on Linux.

Public as ``entropic_mcp.toolkit.paths.cache_directory``. It lives in a module of its own because
``entropic-mcp tools`` answers from its cache (``cli/_listing``) before anything heavier than
``os`` is imported; the toolkit package imports the permission rules.
"""

from __future__ import annotations

import os
import sys

#: ``entropic_mcp._userdata.ENV_DATA_DIR``, spelled out so that finding the directory imports no pathlib.
ENV_DATA_DIR = "ENTROPIC_MCP_DATA_DIR"


def cache_directory(name: str) -> str:
    """Where entropic-mcp keeps the cache called ``name`` for this user (not created here).

    ``$ENTROPIC_MCP_DATA_DIR/cache/<name>`` when that is set, else ``<user cache dir>/entropic-mcp/<name>``:
    ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, platformdirs' cache directory elsewhere. Outside every
    project, so no tool of a project can write what a later server trusts. ``name`` is one path component.
    """
    if not name or name in (".", "..") or "/" in name or os.sep in name or "\0" in name:
        raise ValueError(f"a cache name is one path component, not {name!r}")
    explicit = os.environ.get(ENV_DATA_DIR)
    if explicit:
        return os.path.join(os.path.realpath(os.path.expanduser(explicit)), "cache", name)
    if sys.platform == "linux":
        base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.expanduser("~/.cache")
        return os.path.join(base, "entropic-mcp", name)
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("entropic-mcp", appauthor=False), name)
