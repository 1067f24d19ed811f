"""Tool names on the wire: ``dotted`` (``filesystem.read_file``) or ``underscored`` (``filesystem__read_file``).

Incoming names are mapped back through a table built from the listing — never by guessing
where to split, since server and tool names may both contain ``_``.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable

import attrs

from .._errors import ConfigError

log = logging.getLogger("entropic_mcp.serve")

#: What several model APIs accept for a tool name; MCP itself is more liberal.
MODEL_NAME_LIMIT = 64


def exposed_name(internal: str, style: str) -> str:
    """``<server>.<tool>`` as the client sees it under ``style``."""
    if style == "underscored":
        server, _, tool = internal.partition(".")
        return f"{server}__{tool}"
    return internal


@attrs.frozen(kw_only=True)
class ToolNames:
    """Both directions of the name table for one listing."""

    style: str
    to_internal: dict[str, str]
    to_exposed: dict[str, str]
    too_long: tuple[str, ...] = ()

    @classmethod
    def build(cls, internal_names: Iterable[str], style: str) -> ToolNames:
        """The table for ``internal_names``; two tools that would share a wire name are an error."""
        if style not in ("dotted", "underscored"):
            raise ConfigError(f"[serve] tool_names: expected 'dotted' or 'underscored', got {style!r}")
        to_internal: dict[str, str] = {}
        to_exposed: dict[str, str] = {}
        clashes: dict[str, list[str]] = {}
        for internal in internal_names:
            name = exposed_name(internal, style)
            if name in to_internal:
                clashes.setdefault(name, [to_internal[name]]).append(internal)
                continue
            to_internal[name] = internal
            to_exposed[internal] = name
        if clashes:
            detail = "; ".join(
                f"{name!r} would name {', '.join(map(repr, owners))}" for name, owners in clashes.items()
            )
            raise ConfigError(
                f"[serve] tool_names = {style!r} gives two tools the same wire name: {detail}. "
                'Use tool_names = "dotted", or rename one of the servers.'
            )
        too_long = tuple(name for name in to_internal if len(name) > MODEL_NAME_LIMIT)
        return cls(style=style, to_internal=to_internal, to_exposed=to_exposed, too_long=too_long)

    def report(self) -> None:
        """Log (to stderr, never stdout) every name too long for model APIs."""
        for name in self.too_long:
            log.warning(
                "tool name %r is %d characters; hosts that forward names to model APIs accept at most %d — "
                "shorten the server or tool name",
                name,
                len(name),
                MODEL_NAME_LIMIT,
            )

    def internal(self, name: str) -> str | None:
        return self.to_internal.get(name)

    def exposed(self, name: str) -> str:
        """``name`` as the client calls it (unknown names unchanged)."""
        return self.to_exposed.get(name, name)

    def rename_mentions(self, text: str) -> str:
        """``text`` with every internal tool name it mentions replaced by its wire name.

        Used on descriptions and error messages under ``underscored``, so the model is never
        told a name it cannot call.
        """
        if self.style == "dotted" or "." not in text:
            return text
        return _mentions(tuple(self.to_exposed)).sub(lambda m: self.to_exposed[m.group(0)], text)


@functools.lru_cache(maxsize=8)
def _mentions(names: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])")
