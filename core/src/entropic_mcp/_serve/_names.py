"""Tool names on the wire.

``portable`` (the default, ``filesystem_read_file``): what every model API accepts
(``^[a-zA-Z0-9_-]{1,64}$``; OpenAI-style APIs answer HTTP 400 to a dot); ``underscored``
(``filesystem__read_file``); ``dotted`` (``filesystem.read_file``, the canonical name rules,
audit rows and docs use).

Incoming names are mapped back through a table built from the listing — never by guessing
where to split, since server and tool names may both contain ``_``. Every spelling of a tool is
accepted on ``tools/call`` (a model told one name in a doc and another in the listing still
reaches it), unless two tools would share that spelling.
"""

from __future__ import annotations

import difflib
import functools
import logging
import re
from collections.abc import Iterable

import attrs

from .._errors import ConfigError

log = logging.getLogger("entropic_mcp.serve")

#: What several model APIs accept for a tool name; MCP itself is more liberal.
MODEL_NAME_LIMIT = 64
STYLES = ("portable", "underscored", "dotted")
_SEPARATORS = {"portable": "_", "underscored": "__", "dotted": "."}


def exposed_name(internal: str, style: str) -> str:
    """``<server>.<tool>`` as the client sees it under ``style``."""
    server, _, tool = internal.partition(".")
    return f"{server}{_SEPARATORS.get(style, '.')}{tool}"


@attrs.frozen(kw_only=True)
class ToolNames:
    """Both directions of the name table for one listing."""

    style: str
    to_internal: dict[str, str]
    to_exposed: dict[str, str]
    too_long: tuple[str, ...] = ()
    #: Every other unambiguous spelling (dotted, ``__``, ``_``) → internal name.
    aliases: dict[str, str] = attrs.field(factory=dict)

    @classmethod
    def build(cls, internal_names: Iterable[str], style: str) -> ToolNames:
        """The table for ``internal_names``; two tools that would share a wire name are an error."""
        if style not in STYLES:
            raise ConfigError(f"[serve] tool_names: expected one of {', '.join(map(repr, STYLES))}, got {style!r}")
        internal_names = list(internal_names)
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
            others = " or ".join(f'tool_names = "{s}"' for s in STYLES if s != style)
            raise ConfigError(
                f"[serve] tool_names = {style!r} gives two tools the same wire name: {detail}. "
                f"Use {others} in [serve], or rename one of the servers."
            )
        owners: dict[str, set[str]] = {}
        for internal in internal_names:
            for other in STYLES:
                owners.setdefault(exposed_name(internal, other), set()).add(internal)
        aliases = {
            spelling: next(iter(found))
            for spelling, found in owners.items()
            if len(found) == 1 and spelling not in to_internal
        }
        too_long = tuple(name for name in to_internal if len(name) > MODEL_NAME_LIMIT)
        return cls(style=style, to_internal=to_internal, to_exposed=to_exposed, too_long=too_long, aliases=aliases)

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
        """The internal name a client's ``name`` calls: the listed spelling or any unambiguous other."""
        found = self.to_internal.get(name)
        return found if found is not None else self.aliases.get(name)

    def exposed(self, name: str) -> str:
        """``name`` as the client calls it (unknown names unchanged)."""
        return self.to_exposed.get(name, name)

    def nearest(self, name: str, limit: int = 3) -> list[str]:
        """Up to ``limit`` listed names closest to an unknown ``name`` (best first).

        Compared with separators folded (``filesystem-read-file`` finds its tool) and against the
        tool part alone too, so a right tool name without (or under a wrong) server is found.
        """
        key = _fold(name)
        scored = []
        for listed, internal in self.to_internal.items():
            tool = internal.partition(".")[2]
            score = max(
                difflib.SequenceMatcher(None, key, _fold(listed)).ratio(),
                difflib.SequenceMatcher(None, key, _fold(tool)).ratio(),
            )
            if score >= 0.6:
                scored.append((-score, listed))
        return [listed for _, listed in sorted(scored)[:limit]]

    def rename_mentions(self, text: str) -> str:
        """``text`` with every internal tool name it mentions replaced by its wire name.

        Used on descriptions and error messages under ``portable`` and ``underscored``, so the
        model is never told a name it cannot call.
        """
        if self.style == "dotted" or "." not in text:
            return text
        return _mentions(tuple(self.to_exposed)).sub(lambda m: self.to_exposed[m.group(0)], text)


def _fold(name: str) -> str:
    return re.sub(r"[._-]+", "_", name).lower()


@functools.lru_cache(maxsize=8)
def _mentions(names: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    # Not inside a rule: `allow = ["probe.note(hello)"]`, `bash.execute:ls *` keep the dotted names
    # rules are written in (a quote before, or a rule's ':' / '(' after).
    return re.compile(rf"(?<![\w.\-\"])(?:{alternatives})(?![\w\-:(])")
