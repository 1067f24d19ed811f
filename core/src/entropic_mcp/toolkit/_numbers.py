"""One rule for whole numbers, shared by the argument readers and the settings."""

from __future__ import annotations


def as_integer(value: object) -> int | None:
    """``value`` as an int under the one rule (3 and 3.0 yes; 3.5, True, "3" no)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
