"""The backend's errors: each a ``StorageError`` whose message says how to recover."""

from __future__ import annotations

from entropic_mcp.storage import StorageError


class PostgresUnavailable(StorageError):
    """The server could not be reached (not running, wrong host or port, network down)."""


class PostgresAuthError(StorageError):
    """The server refused the credentials, the role or the database named in the DSN."""


class PostgresSchemaTooNew(StorageError):
    """The store's schema was migrated by a newer entropic-mcp-postgres than this one."""
