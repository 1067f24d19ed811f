"""The argument rules every backend shares (``validate_*``, the JSON checks under them), in a leaf
under the package: the checked wrapper and the state tables apply them without importing the
package that imports them. Re-exported by ``entropic_mcp._storage`` and ``entropic_mcp.storage``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .._errors import StorageError

#: The largest state document, as compact JSON: state is a plugin's working memory, not a file store.
MAX_STATE_BYTES = 1 << 20


def dumps(value: Any, what: str) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError as exc:
        raise StorageError(
            f"{what} is not JSON-serialisable ({exc}); pass plain dicts, lists, strings and numbers"
        ) from None


def checked_copy(value: Any, what: str) -> Any:
    return orjson.loads(dumps(value, what))


def validate_messages(messages: Any, what: str) -> list[Any]:
    """The rule every backend applies to ``save_messages``/``save_snapshot``: a list of objects,
    each with a non-empty ``role`` string, storable as JSON. Returns a JSON-clean copy; anything
    else is a StorageError naming ``what`` and the message at fault. For backend authors."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise StorageError(f"{what}: messages must be a list of message objects, got {type(messages).__name__}")
    out = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise StorageError(
                f"{what}: message {index} is a {type(message).__name__}, expected an object with a 'role'"
            )
        if not isinstance(message.get("role"), str) or not message["role"]:
            raise StorageError(f"{what}: message {index} has no 'role' string")
        out.append(dict(message))
    return checked_copy(out, what + ": messages")


def validate_state(namespace: Any, key: Any, value: Any = None, version: Any = 0) -> str | None:
    """The rule every backend applies to ``load_state``/``save_state``: namespace and key non-empty
    strings (at most 1,024 characters, no NUL), ``version`` an integer >= 0, ``value`` JSON that
    comes back unchanged (no NaN, no non-string keys, no tuples or sets) and at most
    ``MAX_STATE_BYTES`` as compact JSON. Returns that JSON text (None for a None value: a delete);
    anything else is a StorageError saying what to change. For backend authors."""
    for what, name in (("namespace", namespace), ("key", key)):
        if not isinstance(name, str) or not name.strip():
            raise StorageError(f"state {what} must be a non-empty string, got {name!r}")
        if len(name) > 1024 or "\x00" in name:
            raise StorageError(f"state {what} must be at most 1,024 characters without NUL, got {name[:40]!r}…")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise StorageError(
            f"state version must be an integer >= 0 (the version load_state returned; 0 for none), got {version!r}"
        )
    if value is None:
        return None
    try:
        data = orjson.dumps(value)
    except TypeError as exc:
        raise StorageError(
            f"state {namespace}/{key}: the value is not JSON ({exc}); use dicts with string keys, lists, strings "
            "and numbers"
        ) from None
    if orjson.loads(data) != value:
        raise StorageError(
            f"state {namespace}/{key}: the value would not come back unchanged from JSON (NaN or infinity, "
            "tuples); use lists and finite numbers"
        )
    text = data.decode()
    if len(data) > MAX_STATE_BYTES:
        raise StorageError(
            f"state {namespace}/{key}: {len(data):,} bytes of JSON, over the {MAX_STATE_BYTES:,}-byte limit "
            "for a state document; keep working state small"
        )
    return text


def validate_prune(namespace: Any, older_than: Any) -> float:
    """The rule every backend applies to ``prune_states``: the namespace as for ``validate_state``,
    ``older_than`` a finite number of seconds >= 0. Returns it as a float. For backend authors."""
    import math

    validate_state(namespace, "prune")
    if (
        isinstance(older_than, bool)
        or not isinstance(older_than, (int, float))
        or not math.isfinite(older_than)
        or older_than < 0
    ):
        raise StorageError(f"prune_states: older_than must be a number of seconds >= 0, got {older_than!r}")
    return float(older_than)
