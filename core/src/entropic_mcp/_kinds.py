"""Result kinds: how a call ended, as stable strings hosts can match on."""

from __future__ import annotations

from enum import StrEnum


class ResultKind(StrEnum):
    """How one call ended (a ``str``: ``outcome.kind == "ok"`` holds)."""

    OK = "ok"
    OK_EMPTY = "ok_empty"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    REJECTED_HOOK = "rejected_hook"
    REJECTED_LOOP = "rejected_loop"
    REJECTED_SCHEMA = "rejected_schema"
    REJECTED_ACCESS = "rejected_access"
    #: Kept so hosts matching on it keep working: repeats are flagged now, never refused.
    REJECTED_DUPLICATE = "rejected_duplicate"
    REJECTED_PERMISSION = "rejected_permission"


KINDS: tuple[str, ...] = tuple(kind.value for kind in ResultKind)

__all__ = ["KINDS", "ResultKind"]
