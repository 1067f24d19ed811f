"""One state document changed optimistically: load, change, save guarded by its version, and on a
conflict the change applied again to what is stored now."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .._errors import StateConflict

if TYPE_CHECKING:
    from . import StateStore


class _Unchanged:
    __slots__ = ()

    def __repr__(self) -> str:
        return "entropic_mcp.storage.UNCHANGED"


#: What a ``change`` returns to save nothing (the document stays as it is stored).
UNCHANGED: Final[Any] = _Unchanged()
#: Rounds ``update_document`` tries by default before giving up.
DEFAULT_ATTEMPTS = 8


def update_document(
    store: StateStore,
    namespace: str,
    key: str,
    change: Callable[[Any], Any],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    loaded: tuple[Any, int] | None = None,
    backoff: float = 0.05,
) -> tuple[Any, int]:
    """Change the document under ``(namespace, key)``, again from what is stored whenever another
    save came first.

    Each round loads ``(value, version)``, calls ``change(value)`` (``value`` is None when
    nothing is stored) and saves what it returns with that version. ``change`` may mutate
    ``value`` and return it; it returns ``None`` to delete the document and ``UNCHANGED`` to save
    nothing. It may run several times, each time on a fresh load, so it must not keep what it
    did in an earlier round. Between rounds lost to ``StateConflict`` the caller sleeps a random
    pause (at most ``backoff`` seconds) so writers that lost together do not race again in step.

    Args:
        store: the backend's ``StateStore``.
        namespace: the plugin's namespace (``"myplugin.notes"``).
        key: the document's key (usually the conversation key).
        change: the new value from the stored one.
        attempts: rounds before giving up (>= 1).
        loaded: ``(value, version)`` already loaded by the caller: the first round starts from it
            instead of loading.
        backoff: the longest pause between rounds, in seconds (0: none).

    Returns:
        ``(value, version)`` as stored after the change: ``(value, 0)`` for a delete, the stored
        ones when ``change`` returned ``UNCHANGED`` (or deleted what was not stored).

    Raises:
        StateConflict: ``attempts`` rounds each found the document changed meanwhile; nothing
            was saved.
        StorageError: the store failed (anything ``change`` raises propagates as it is).
    """
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"attempts must be an integer >= 1, got {attempts!r}")
    for attempt in range(1, attempts + 1):
        value, version = store.load_state(namespace, key) if loaded is None else loaded
        loaded = None
        new = change(value)
        if new is UNCHANGED or (new is None and version == 0):
            return value, version
        try:
            return new, store.save_state(namespace, key, new, version)
        except StateConflict:
            if attempt < attempts and backoff > 0:
                time.sleep(random.uniform(0, min(backoff, 0.001 * 2**attempt)))
    raise StateConflict(
        f"state document {namespace!r}/{key!r} was changed by another save in each of {attempts} "
        "attempts; nothing was saved (try again later)"
    )
