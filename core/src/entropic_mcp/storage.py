"""The face for storage-backend authors: the protocols a backend implements, its records and errors,
and the argument rules every backend shares; and for plugin authors keeping state in the store,
``update_document`` (load, change, save guarded by the version, re-applied on a conflict).

A backend is offered by a plugin's ``entropic_mcp_storage_backends`` hook as a
``StorageBackendSpec``; the manager opens it from ``[storage] backend`` and wraps it in
``CheckedStorage``, so the backend's methods receive arguments already checked against the rules
below. ``entropic_mcp.testing.StorageContract`` is the conformance suite a backend's tests subclass.
"""

from ._config import StorageConfig
from ._errors import StateConflict, StorageError
from ._storage import (
    DEFAULT_SCOPE,
    HEURISTIC_NAMESPACES,
    MAX_STATE_BYTES,
    AsyncStateStore,
    StateStore,
    StorageBackend,
    StorageBackendSpec,
    ToolCallRecord,
    validate_messages,
    validate_prune,
    validate_state,
)
from ._storage._checked import CheckedStorage
from ._storage._options import check_options
from ._storage._update import UNCHANGED, update_document

__all__ = [
    "DEFAULT_SCOPE",
    "HEURISTIC_NAMESPACES",
    "MAX_STATE_BYTES",
    "UNCHANGED",
    "AsyncStateStore",
    "CheckedStorage",
    "StateConflict",
    "StateStore",
    "StorageBackend",
    "StorageBackendSpec",
    "StorageConfig",
    "StorageError",
    "ToolCallRecord",
    "check_options",
    "update_document",
    "validate_messages",
    "validate_prune",
    "validate_state",
]
