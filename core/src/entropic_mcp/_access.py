"""Access levels: NONE < READ < WRITE; WRITE implies READ."""

from __future__ import annotations

import enum


class AccessLevel(enum.IntEnum):
    NONE = 0
    READ = 1
    WRITE = 2

    @classmethod
    def parse(cls, value: object) -> AccessLevel:
        """Accept an AccessLevel, its name in any case, or its number."""
        if isinstance(value, AccessLevel):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1, 2):
            return cls(value)
        raise ValueError(f"invalid access level {value!r}; expected one of NONE, READ, WRITE")
