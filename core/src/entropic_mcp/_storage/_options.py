"""A backend's ``[storage] options`` checked against the table of the options it takes."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from .._errors import ConfigError

#: key -> (type: str, int or float; default; what it means, for the error message)
OptionTable = Mapping[str, tuple[type, Any, str]]


def check_options(
    options: Mapping[str, Any], table: OptionTable, backend: str, *, zero_allowed: Collection[str] = ()
) -> dict[str, Any]:
    """The options given, checked against ``table``: every key one the backend takes, a ``str``
    a non-empty string, an ``int`` an integer and a ``float`` any number (never a boolean), both
    above 0 (at least 0 for the keys in ``zero_allowed``). Defaults stay the backend's own.

    Args:
        options: ``config.storage.options``.
        table: the backend's options: key -> ``(type, default, meaning)``.
        backend: the backend's name, for the messages.
        zero_allowed: numeric keys for which 0 is allowed.

    Raises:
        ConfigError: naming ``[storage] options.<key>``, what it expects and what it got.
    """
    checked: dict[str, Any] = {}
    for key, value in options.items():
        if key not in table:
            raise ConfigError(
                f"[storage] options.{key}: unknown option for the {backend} backend; expected one of: "
                + ", ".join(table)
            )
        kind, _, meaning = table[key]
        if kind is str:
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"[storage] options.{key}: expected a non-empty string ({meaning}), got {value!r}")
        elif (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (value < 0 if key in zero_allowed else value <= 0)
            or (kind is int and not isinstance(value, int))
        ):
            least = "an int >= 0" if key in zero_allowed and kind is int else f"a positive {kind.__name__}"
            raise ConfigError(f"[storage] options.{key}: expected {least} ({meaning}), got {value!r}")
        checked[key] = value
    return checked
