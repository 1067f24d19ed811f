"""ServerResponse (the one envelope every call ends in) and ToolResult (what a tool returns)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import orjson

from ._directives import Directive, coerce_directive, directive_from_dict


def _directives(value: Iterable[object]) -> tuple[Directive, ...]:
    if value == ():
        return ()
    return tuple(coerce_directive(v) for v in value)


def _blocks(value: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(value)


def dumps(data: Any) -> str:
    """Compact JSON text as tools return it (non-ASCII kept). A lone surrogate in a string (a file
    name not UTF-8 on disk, decoded with ``surrogateescape``) shows as U+FFFD, as ``printable``
    renders it, rather than failing the call: JSON cannot carry it."""
    try:
        return orjson.dumps(data).decode()
    except orjson.JSONEncodeError as exc:
        if "surrogates" not in str(exc):
            raise
        return orjson.dumps(_without_surrogates(data)).decode()


_new = object.__new__
_set = object.__setattr__

_SURROGATE = re.compile("[\ud800-\udfff]")


def json_safe_text(text: Any) -> Any:
    """``text`` with each lone surrogate shown as U+FFFD (non-strings unchanged, for the validator)."""
    if not isinstance(text, str) or text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:  # the bytes the surrogates stand for, decoded as ``printable`` shows a name
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte (from a JSON escape)
        return _SURROGATE.sub("\ufffd", text)


def _without_surrogates(data: Any) -> Any:
    if isinstance(data, str):
        return json_safe_text(data)
    if isinstance(data, Mapping):
        return {json_safe_text(key): _without_surrogates(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_without_surrogates(item) for item in data]
    return data


def first_leaf(
    value: Any, test: Callable[[Any], str | None], path: str = "", *, keys: bool = False
) -> tuple[str, str] | None:
    """(argument path, what ``test`` said) of the first leaf of JSON-shaped data ``test`` flags.

    With ``keys``, mapping keys are tested too (at their mapping's path).
    """
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = (first_leaf(key, test, path) if keys else None) or first_leaf(
                item, test, f"{path}.{key}" if path else str(key), keys=keys
            )
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = first_leaf(item, test, f"{path}[{i}]", keys=keys)
            if found:
                return found
        return None
    said = test(value)
    return None if said is None else (path or "(value)", said)


def _non_finite(value: Any) -> str | None:
    if not isinstance(value, float) or math.isfinite(value):
        return None
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def non_finite(value: Any) -> tuple[str, str] | None:
    """(path, "NaN"/"Infinity"/"-Infinity") of the first float JSON cannot carry; None when none.

    orjson writes them as ``null``, silently: a tool's ``ratio: NaN`` reached the model as
    ``ratio: null``.
    """
    return first_leaf(value, _non_finite)


class NonFiniteNumber(ValueError):
    """JSON data holds NaN or Infinity, which JSON cannot carry."""


def structured_object(structured: Mapping[str, Any] | None, text: str) -> dict[str, Any] | None:
    """A result as a JSON object: the tool's own structured value, else its text parsed, else None."""
    if isinstance(structured, Mapping):
        return dict(structured)
    if text[:1] != "{":
        return None
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def error_code_of(text: str) -> str:
    """The code of an error that arrived as text (an external server's result, a ``ToolResult``
    built by hand): its JSON ``error`` field, else ``"error"``.

    Errors made here (``ToolResult.error``, ``ServerResponse.refusal``, ``ToolError``) carry
    their code as a field; only text from elsewhere is read for one.
    """
    if text.startswith("{"):
        try:
            code = orjson.loads(text).get("error")
        except (orjson.JSONDecodeError, AttributeError):
            code = None
        if isinstance(code, str) and code:
            return code
    return "error"


@attrs.frozen(kw_only=True)
class ToolResult:
    """A tool's result: text, directives, an error flag, and optional structured content."""

    #: a lone surrogate (bytes not UTF-8 decoded with ``surrogateescape``) becomes U+FFFD here:
    #: no transport can carry it (see ``json_safe_text``)
    text: str = attrs.field(converter=json_safe_text, validator=attrs.validators.instance_of(str))
    directives: tuple[Directive, ...] = attrs.field(default=(), converter=_directives)
    is_error: bool = False
    structured: Mapping[str, Any] | None = None
    #: Extra MCP content blocks sent after the text (``{"type": "image", "data", "mimeType"}``,
    #: ``{"type": "resource", "resource": {...}}``): a picture or document the model should see.
    content: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=_blocks)
    #: The error code of a failure (``ToolResult.error`` sets it); None on success.
    code: str | None = None

    @classmethod
    def json(cls, data: Any, *, directives: Iterable[object] = ()) -> ToolResult:
        """A successful result whose text is ``data`` as JSON (objects also as structured content).

        Raises:
            NonFiniteNumber: ``data`` holds NaN or Infinity (JSON has neither).
        """
        text = dumps(data)
        if "null" in text:  # NaN and Infinity come out as null: only then is there anything to look for
            found = non_finite(data)
            if found is not None:
                where, what = found
                raise NonFiniteNumber(
                    f"the result holds {what} at '{where}', which JSON cannot carry (it would silently become "
                    "null); return null, a string or a finite number instead"
                )
        return cls(
            text=text,
            directives=directives,
            structured=data if isinstance(data, dict) else None,
        )

    @classmethod
    def error(cls, code: str, message: str, **extra: Any) -> ToolResult:
        """A failure ``{"error": code, "message": message, ...}``; failures carry no directives."""
        return cls(text=dumps({"error": code, "message": message, **extra}), is_error=True, code=code)


# Not slotted: ``_make`` fills a response with one dict, where a slotted frozen class sets each
# field through ``object.__setattr__`` (P1: one or two responses per call).
@attrs.frozen(kw_only=True, slots=False)
class ServerResponse:
    """``{"result": str, "directives": [...], "is_error": bool}`` — failures carry no directives.

    ``code`` is a failure's error code (``"invalid_args"``, ``"timeout"``, ``"error"`` for one
    without a code of its own), None on success: guards and outcomes read it, never the text.
    """

    result: str = attrs.field(validator=attrs.validators.instance_of(str))
    directives: tuple[Directive, ...] = attrs.field(default=(), converter=_directives)
    is_error: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    structured: Mapping[str, Any] | None = attrs.field(default=None, eq=False, repr=False)
    #: Extra MCP content blocks (images, embedded resources) from the tool's ``ToolResult``.
    content: tuple[Mapping[str, Any], ...] = attrs.field(default=(), eq=False, repr=False, converter=_blocks)
    code: str | None = attrs.field(default=None, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.is_error:
            if self.directives:
                object.__setattr__(self, "directives", ())
            if self.code is None:
                object.__setattr__(self, "code", error_code_of(self.result))
        elif self.code is not None:
            object.__setattr__(self, "code", None)

    @classmethod
    def _make(
        cls,
        result: str,
        directives: tuple[Directive, ...] = (),
        is_error: bool = False,
        structured: Mapping[str, Any] | None = None,
        content: tuple[Mapping[str, Any], ...] = (),
        code: str | None = None,
    ) -> ServerResponse:
        """Build from values that are already checked (the per-call hot path skips validation).

        A failure without ``code`` gets the one its text states (``error_code_of``).
        """
        response = _new(cls)
        _set(
            response,
            "__dict__",
            {
                "result": result,
                "directives": () if is_error else directives,
                "is_error": is_error,
                "structured": structured,
                "content": content,
                "code": (code or error_code_of(result)) if is_error else None,
            },
        )
        return response

    @classmethod
    def failure(cls, text: str) -> ServerResponse:
        """A failure told in plain text (a tool that raised): its code is ``"error"``."""
        return cls(result=text, is_error=True, code="error")

    @classmethod
    def refusal(cls, code: str, message: str, **extra: Any) -> ServerResponse:
        """A failure ``{"error": code, "message": message, ...}`` carrying ``code``."""
        return cls(result=dumps({"error": code, "message": message, **extra}), is_error=True, code=code)

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "directives": [d.to_dict() for d in self.directives],
            "is_error": self.is_error,
        }

    def to_json(self) -> str:
        return dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerResponse:
        if not isinstance(data, Mapping) or not isinstance(data.get("result"), str):
            raise ValueError("an envelope is an object with a string 'result'")
        directives = data.get("directives") or []
        if not isinstance(directives, list):
            raise ValueError("'directives' must be a list")
        return cls(
            result=data["result"],
            directives=[directive_from_dict(d) for d in directives],
            is_error=bool(data.get("is_error", False)),
        )
