"""The permission stage's parts: what a call does, as the rules see it, with one cache.

A server says what a call does (``permission_parts``, else ``permission_pattern``, else one
part per tool); its own plugin may answer a pattern instead (``entropic_mcp_permission_pattern``),
but never past a deny rule the server's own parts meet. ``judge`` judges the call once against
the rules (``_rules``) and hands the tool what the server's parts prepared (``ctx.prepared_for``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .._access import AccessLevel
from .._context import set_prepared
from .._isolation import reraise_host_stop
from .._server import MCPServerBase
from ._hooks import HookFault, HookRefusal
from ._rules import PermissionPart, PreparedParts, pattern_part

if TYPE_CHECKING:
    from .._context import CallContext
    from ._hooks import Hooks
    from ._rules import PermissionRules, Verdict

log = logging.getLogger("entropic_mcp")

#: Parts kept per pattern (and per tool of the base class's pattern) before the cache starts over.
MAX_CACHED_PARTS = 4096


class PermissionStage:
    """Works out the parts a call's permission is judged on.

    Args:
        rules: the permission rules (a pattern answer is checked against their deny rules).
        hooks: the hook calls (the pattern hook).
    """

    def __init__(self, rules: PermissionRules, hooks: Hooks) -> None:
        self.rules = rules
        self.hooks = hooks
        self._parts: dict[str, list[PermissionPart]] = {}

    def forget(self) -> None:
        """Servers changed: work the parts out again."""
        self._parts.clear()

    @staticmethod
    def constant_parts(server: MCPServerBase) -> bool:
        """Whether the server's permission parts never depend on a call's arguments."""
        return (
            getattr(server, "permission_parts", None) is None
            and type(server).permission_pattern is MCPServerBase.permission_pattern
        )

    def server_parts(self, server: MCPServerBase, tool: str, args: dict[str, Any]) -> list[PermissionPart]:
        """The server's own parts for a call (``permission_parts``, else ``permission_pattern``)."""
        parts_of = getattr(server, "permission_parts", None)
        if parts_of is not None:
            full = f"{server.name}.{tool}"
            answered = parts_of(tool, args)
            parts = list(answered) or [PermissionPart(names=(full,), store=full)]
            return PreparedParts(parts, answered.prepared) if isinstance(answered, PreparedParts) else parts
        if type(server).permission_pattern is MCPServerBase.permission_pattern:
            # The tool-level pattern of the base class: one part per tool, whatever the arguments.
            cached = self._parts.get(tool + "\x00" + server.name)
            if cached is None:
                full = f"{server.name}.{tool}"
                cached = self._parts[tool + "\x00" + server.name] = [PermissionPart(names=(full,), store=full)]
            return cached
        full = f"{server.name}.{tool}"
        pattern = server.permission_pattern(tool, args)
        cached = self._parts.get(pattern)
        if cached is None:
            if len(self._parts) > MAX_CACHED_PARTS:
                self._parts.clear()
            cached = self._parts[pattern] = [pattern_part(full, pattern)]
        return cached

    def own_parts(self, server: MCPServerBase, tool: str, args: dict[str, Any]) -> list[PermissionPart]:
        """``server_parts``, with a server that raises turned into a HookRefusal (denied)."""
        try:
            return self.server_parts(server, tool, args)
        except BaseException as exc:
            reraise_host_stop(exc)
            log.warning("server %s: permission_parts raised", server.name, exc_info=True)
            raise HookRefusal(
                f"'{server.name}.{tool}' was denied: the server could not work out what the call does "
                f"({type(exc).__name__}: {exc}). Tell the user the '{server.name}' server is broken.",
                HookFault(f"server {server.name}", "permission_parts", f"raised {type(exc).__name__}: {exc}"),
            ) from None

    def judge(
        self, server: MCPServerBase, tool: str, args: dict[str, Any], ctx: CallContext, *, hooked: bool, read_only: bool
    ) -> tuple[Verdict, str]:
        """The call's verdict and pattern, the rules asked once; ``ctx`` given what the parts prepared.

        ``hooked``: a plugin implements the pattern hook (asked only then). Its answer is judged
        in place of the server's own parts unless a deny rule or a shield refuses one of those
        (``PermissionRules.refusal``, which looks at each part once and judges nothing more).
        Raises HookRefusal when the server or the hook fails (the call is then denied).
        """
        own = self.own_parts(server, tool, args)
        set_prepared(ctx, args, own.prepared if type(own) is PreparedParts else None)
        if hooked:
            answer = self.hooks.permission_pattern(server, tool, args)
            if answer is not None:
                refused = self.rules.refusal(own, read_only=read_only)
                if refused is not None:
                    return refused, own[0].store
                return self.rules.judge([pattern_part(f"{server.name}.{tool}", answer)], read_only=read_only), answer
        return self.rules.judge(own, read_only=read_only), own[0].store

    def parts(self, server: MCPServerBase, tool: str, args: dict[str, Any]) -> tuple[list[PermissionPart], str]:
        """The parts rules are matched against, and the call's pattern (what ``judge`` judges).

        The server's own plugin may answer a pattern through the hook; deny rules are still
        checked against the server's own parts, so no pattern answer can dodge them. Raises
        HookRefusal when the hook fails (the call is then denied).
        """
        own = self.own_parts(server, tool, args)
        hooked = self.hooks.permission_pattern(server, tool, args)
        if hooked is None or self.rules.refusal(own, read_only=read_only(server, tool)) is not None:
            return own, own[0].store
        return [pattern_part(f"{server.name}.{tool}", hooked)], hooked


def read_only(server: MCPServerBase, tool: str) -> bool:
    found = server.get_tool(tool)
    return found is not None and found.required_access_level <= AccessLevel.READ
