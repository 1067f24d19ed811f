"""Access keys: which level an identity holds for a tool (exact > ``server.*`` > ``*``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from .._access import AccessLevel
from .._errors import EntropicMCPError


class AccessKeyError(EntropicMCPError, PermissionError):
    """A grant was refused (a granter may only hand out what it holds)."""


class AccessKeys:
    """Key sets per identity. An identity with no key set is not checked; an empty set denies all."""

    def __init__(self, initial: Mapping[str, Mapping[str, AccessLevel]] | None = None) -> None:
        self._sets: dict[str, dict[str, AccessLevel]] = {name: dict(keys) for name, keys in (initial or {}).items()}
        self._lock = threading.Lock()

    def has_keys(self, identity: str | None) -> bool:
        return identity is not None and identity in self._sets

    def level(self, identity: str, tool: str) -> AccessLevel:
        keys = self._sets.get(identity)
        if keys is None:
            return AccessLevel.WRITE
        if tool in keys:
            return keys[tool]
        server = tool.partition(".")[0] + ".*"
        if server in keys:
            return keys[server]
        return keys.get("*", AccessLevel.NONE)

    def keys(self, identity: str) -> dict[str, AccessLevel] | None:
        keys = self._sets.get(identity)
        return None if keys is None else dict(keys)

    def register(self, identity: str, keys: Mapping[str, AccessLevel] | None = None) -> None:
        with self._lock:
            self._sets[identity] = {p: AccessLevel.parse(v) for p, v in (keys or {}).items()}

    def grant(self, identity: str, pattern: str, level: AccessLevel | str) -> None:
        with self._lock:
            self._sets.setdefault(identity, {})[pattern] = AccessLevel.parse(level)

    def revoke(self, identity: str, pattern: str) -> None:
        with self._lock:
            self._sets.get(identity, {}).pop(pattern, None)

    def grant_from(self, granter: str, identity: str, pattern: str, level: AccessLevel | str) -> None:
        """Grant ``level`` on ``pattern`` only if ``granter`` holds at least that level there."""
        level = AccessLevel.parse(level)
        held = self.level(granter, pattern) if self.has_keys(granter) else AccessLevel.WRITE
        if held < level:
            raise AccessKeyError(
                f"{granter!r} holds {held.name} on {pattern!r} and cannot grant {level.name} to {identity!r}"
            )
        self.grant(identity, pattern, level)
