"""The tiers a conversation can delegate to, from ``[servers.entropic]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from entropic_mcp import ConfigError, ToolError

DEFAULT_MAX_TURNS_LIMIT = 50


def _where(key: str) -> str:
    return f"[servers.entropic] {key}"


def _names(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{_where(key)}: expected a list of tier names, got {value!r}")
    names = tuple(v.strip() for v in value)
    if any(not n for n in names):
        raise ConfigError(f"{_where(key)}: tier names must not be empty")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{_where(key)}: tier(s) listed twice: {', '.join(duplicates)}")
    return names


@attrs.frozen(kw_only=True)
class Tiers:
    """``names`` (in config order), those that ``need_context``, and the ``max_turns`` cap."""

    names: tuple[str, ...] = ()
    need_context: frozenset[str] = frozenset()
    max_turns_limit: int = DEFAULT_MAX_TURNS_LIMIT

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Tiers:
        names = _names(config.get("tiers", []), "tiers")
        need = _names(config.get("requires_context", []), "requires_context")
        unknown = [n for n in need if n not in names]
        if unknown:
            raise ConfigError(
                f"{_where('requires_context')}: {', '.join(map(repr, unknown))} not in tiers "
                f"({', '.join(names) or 'none configured'}); list them under tiers too"
            )
        limit = config.get("max_turns_limit", DEFAULT_MAX_TURNS_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"{_where('max_turns_limit')}: expected a positive integer, got {limit!r}")
        return cls(names=names, need_context=frozenset(need), max_turns_limit=limit)

    def check_known(self, tier: str, tool: str, argument: str) -> None:
        if tier not in self.names:
            raise ToolError(
                "invalid_args",
                f"Invalid value for '{argument}': {tier!r} is not a tier. Valid tiers: {', '.join(self.names)}. "
                f"Fix the arguments of 'entropic.{tool}' and call it again.",
                valid_tiers=list(self.names),
            )

    def check_not_self(self, tier: str, identity: str | None, tool: str) -> None:
        if identity is not None and tier == identity:
            raise ToolError(
                "self_delegation",
                f"'{identity}' cannot delegate to itself. Do the work yourself, or delegate to another tier: "
                f"{', '.join(n for n in self.names if n != identity) or 'none configured'}.",
            )

    def check_context(self, tier: str, context: list[dict[str, str]], tool: str, argument: str = "target") -> None:
        if tier in self.need_context and not context:
            raise ToolError(
                "context_required",
                f'Tier \'{tier}\' needs file context: pass context=[{{"path": ..., "lines": ..., "note": ...}}] '
                f"naming the files it should work on, then call 'entropic.{tool}' again.",
                tier=tier,
            )
