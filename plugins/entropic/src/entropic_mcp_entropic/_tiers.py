"""The tiers a conversation can delegate to, from ``[servers.entropic]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from entropic_mcp import ConfigError, ToolError

DEFAULT_MAX_TURNS_LIMIT = 50
#: Seconds one delegation (a pipeline: all its stages) may run through the client's sampling.
DEFAULT_DEADLINE = 600.0
#: Tokens asked for per sampling request when a tier's profile names none.
DEFAULT_MAX_TOKENS = 4096
#: Turns a child runs through sampling when neither the call nor its profile gives max_turns.
DEFAULT_SAMPLING_TURNS = 20
WITHOUT_SAMPLING = ("hide", "directives")
PROFILE_KEYS = ("system_prompt", "model_hints", "tools", "max_tokens", "max_turns", "priorities")
PRIORITIES = ("cost", "speed", "intelligence")


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


def _positive(value: Any, key: str, kind: type = int) -> Any:
    ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
    if not ok or value <= 0:
        raise ConfigError(
            f"{_where(key)}: expected a positive {'number' if kind is float else 'integer'}, got {value!r}"
        )
    return value


def _strings(value: Any, key: str, what: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{_where(key)}: expected a list of {what}, got {value!r}")
    return tuple(v.strip() for v in value)


@attrs.frozen(kw_only=True)
class TierProfile:
    """What a tier's child conversation gets when it runs through the client's sampling.

    ``tools``: the tools offered to the child (``server.tool`` or ``server.*``), narrowed further
    by the tier's access keys; empty means every tool the keys allow.
    """

    system_prompt: str = ""
    model_hints: tuple[str, ...] = ()
    priorities: Mapping[str, float] = attrs.field(factory=dict)
    tools: tuple[str, ...] = ()
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_turns: int = DEFAULT_SAMPLING_TURNS

    @classmethod
    def from_table(cls, tier: str, table: Any) -> TierProfile:
        where = f"profiles.{tier}"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{_where(where)}: expected a table, got {table!r}")
        unknown = sorted(set(table) - set(PROFILE_KEYS))
        if unknown:
            raise ConfigError(
                f"{_where(where)}: unknown key(s) {', '.join(unknown)}; expected one of: {', '.join(PROFILE_KEYS)}"
            )
        prompt = table.get("system_prompt", "")
        if not isinstance(prompt, str):
            raise ConfigError(f"{_where(where + '.system_prompt')}: expected a string, got {prompt!r}")
        priorities = table.get("priorities", {})
        if not isinstance(priorities, Mapping) or any(
            k not in PRIORITIES or isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1
            for k, v in priorities.items()
        ):
            raise ConfigError(
                f"{_where(where + '.priorities')}: expected a table of {', '.join(PRIORITIES)} = 0..1, got {priorities!r}"
            )
        return cls(
            system_prompt=prompt,
            model_hints=_strings(table.get("model_hints", []), where + ".model_hints", "model names"),
            priorities={k: float(v) for k, v in priorities.items()},
            tools=_strings(table.get("tools", []), where + ".tools", "tool names (server.tool or server.*)"),
            max_tokens=_positive(table.get("max_tokens", DEFAULT_MAX_TOKENS), where + ".max_tokens"),
            max_turns=_positive(table.get("max_turns", DEFAULT_SAMPLING_TURNS), where + ".max_turns"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "system_prompt": self.system_prompt,
            "model_hints": list(self.model_hints),
            "priorities": dict(self.priorities),
            "tools": list(self.tools),
            "max_tokens": self.max_tokens,
            "max_turns": self.max_turns,
        }


@attrs.frozen(kw_only=True)
class Tiers:
    """``names`` (in config order), those that ``need_context``, and the ``max_turns`` cap."""

    names: tuple[str, ...] = ()
    need_context: frozenset[str] = frozenset()
    max_turns_limit: int = DEFAULT_MAX_TURNS_LIMIT
    profiles: Mapping[str, TierProfile] = attrs.field(factory=dict)
    deadline: float = DEFAULT_DEADLINE
    without_sampling: str = "hide"

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
        profiles_table = config.get("profiles", {})
        if not isinstance(profiles_table, Mapping):
            raise ConfigError(f"{_where('profiles')}: expected a table of tier tables, got {profiles_table!r}")
        stray = [n for n in profiles_table if n not in names]
        if stray:
            raise ConfigError(
                f"{_where('profiles')}: {', '.join(map(repr, stray))} not in tiers "
                f"({', '.join(names) or 'none configured'}); list them under tiers too"
            )
        profiles = {n: TierProfile.from_table(n, t) for n, t in profiles_table.items()}
        deadline = float(_positive(config.get("delegation_deadline", DEFAULT_DEADLINE), "delegation_deadline", float))
        without = config.get("without_sampling", "hide")
        if without not in WITHOUT_SAMPLING:
            raise ConfigError(f'{_where("without_sampling")}: expected "hide" or "directives", got {without!r}')
        return cls(
            names=names,
            need_context=frozenset(need),
            max_turns_limit=limit,
            profiles=profiles,
            deadline=deadline,
            without_sampling=without,
        )

    def profile(self, tier: str) -> TierProfile:
        return self.profiles.get(tier) or TierProfile()

    def sampling_plan(self) -> dict[str, Any]:
        """What ``serve`` needs to run children through the client's sampling (a plain mapping)."""
        return {
            "tiers": {name: self.profile(name).to_dict() for name in self.names},
            "deadline": self.deadline,
            "without_sampling": self.without_sampling,
        }

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
