"""What entropic-mcp keeps per user, outside every project: default stores and approved ``.mcp.json`` files.

A project's tools can read and write the project; nothing that decides what they may do, or
that records what they did, may live where they reach. The data directory is
``$ENTROPIC_MCP_DATA_DIR`` if set, else the platform's per-user data directory
(``$XDG_DATA_HOME/entropic-mcp``, by default ``~/.local/share/entropic-mcp`` on Linux).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

ENV_DATA_DIR = "ENTROPIC_MCP_DATA_DIR"
APPROVALS_NAME = "approved-mcp-json.json"


def data_dir() -> Path:
    """The per-user data directory (not created here)."""
    explicit = os.environ.get(ENV_DATA_DIR)
    if explicit:
        return Path(os.path.realpath(Path(explicit).expanduser()))
    import platformdirs

    return Path(os.path.realpath(platformdirs.user_data_path("entropic-mcp", appauthor=False)))


def project_key(root: Path) -> str:
    """A stable, file-name-safe key for a project root (its canonical path, hashed)."""
    return hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:24]


def default_store_path(root: Path) -> Path:
    """Where the tinydb store of the project at ``root`` lives unless ``[storage] path`` says otherwise."""
    return data_dir() / "projects" / project_key(root) / "store"


# -- .mcp.json approvals ------------------------------------------------------------------------


def digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _approvals_file() -> Path:
    return data_dir() / APPROVALS_NAME


def approvals() -> dict[str, str]:
    """Approved ``.mcp.json`` files: canonical path -> sha256 of the approved contents."""
    try:
        data = json.loads(_approvals_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def is_approved(path: Path, content: bytes) -> bool:
    """Whether the user approved exactly these contents of the file at ``path``."""
    return approvals().get(os.path.realpath(path)) == digest(content)


def approve(path: Path, content: bytes) -> str:
    """Record ``content`` as the approved contents of ``path``; returns its sha256.

    The record is replaced atomically under a file lock, so two approvals never lose one another.
    """
    import filelock

    target = _approvals_file()
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = digest(content)
    with filelock.FileLock(str(target) + ".lock", timeout=30):
        current = approvals()
        current[os.path.realpath(path)] = value
        import tempfile  # only when writing: ``entropic-mcp tools`` reads the data directory

        fd, tmp = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(current, fh, indent=2, sort_keys=True)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return value
