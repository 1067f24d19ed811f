"""State documents in this process's memory: the ``StateStore`` of a process that keeps its
per-conversation state to itself (``[storage] backend = "none"``, or state not shared)."""

from __future__ import annotations

import threading
import time
from typing import Any


class MemoryStates:
    """``load_state``/``save_state``/``prune_states`` over a dict, with the versions a store keeps.

    Values are kept as given (callers hand over documents they no longer change); a save whose
    version is not the stored one raises ``StateConflict``, as every backend's does.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[tuple[str, str], tuple[Any, int, float]] = {}

    def load_state(self, namespace: str, key: str) -> tuple[Any, int]:
        with self._lock:
            value, version, _ = self._records.get((namespace, key), (None, 0, 0.0))
            return value, version

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        from .._errors import StateConflict

        with self._lock:
            stored = self._records.get((namespace, key), (None, 0, 0.0))[1]
            if stored != version:
                raise StateConflict(f"state {namespace}/{key} changed meanwhile (version {stored}, not {version})")
            if value is None:
                self._records.pop((namespace, key), None)
                return 0
            self._records[(namespace, key)] = (value, version + 1, time.monotonic())
            return version + 1

    def prune_states(self, namespace: str, older_than: float) -> int:
        cutoff = time.monotonic() - older_than
        with self._lock:
            old = [key for key, (_, _, saved) in self._records.items() if key[0] == namespace and saved < cutoff]
            for key in old:
                del self._records[key]
            return len(old)
