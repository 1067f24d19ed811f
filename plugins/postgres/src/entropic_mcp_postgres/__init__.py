"""entropic-mcp-postgres: the ``postgres`` storage backend — one PostgreSQL store shared by every
host process and ``entropic-mcp serve`` worker that points at it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from entropic_mcp import hookimpl
from entropic_mcp.storage import StorageBackendSpec

from ._errors import PostgresAuthError, PostgresSchemaTooNew, PostgresUnavailable

if TYPE_CHECKING:
    from ._backend import PostgresBackend

__all__ = [
    "PostgresAuthError",
    "PostgresBackend",
    "PostgresSchemaTooNew",
    "PostgresUnavailable",
    "entropic_mcp_storage_backends",
]


@hookimpl
def entropic_mcp_storage_backends() -> StorageBackendSpec:
    """Offer ``[storage] backend = "postgres"``."""

    def factory(config: Any) -> Any:
        from ._backend import PostgresBackend  # psycopg loads only when the backend is used

        return PostgresBackend.from_config(config)

    return StorageBackendSpec(name="postgres", factory=factory)


def __getattr__(name: str) -> object:
    if name == "PostgresBackend":
        from ._backend import PostgresBackend

        return PostgresBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
