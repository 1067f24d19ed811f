"""The hook facade: every hook call typed, one implementation at a time, fault-isolated.

A plugin's hook that raises or answers with the wrong type never escapes into the pipeline:
gates (``before_tool_call``, ``permission_pattern``) refuse the call — failing closed — and
observers (``after_tool_call``, ``skip_duplicate_check``, approvers) are skipped. Either way the
fault is logged with the plugin's name and recorded on the call's outcome. Implementations are
looked up on every call, so a plugin registered after the manager was built takes effect.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .._calls import (
    ApprovalDecision,
    ApprovalRequest,
    OutsideRootRequest,
    ReadOnlyArguments,
    Refuse,
    ReplaceArgs,
    ToolCall,
    frozen,
    thawed,
)
from .._directives import DirectiveHandlerSpec, DirectiveProcessor
from .._isolation import describe, reraise_host_stop

if TYPE_CHECKING:
    from .._plugins import Plugins
    from .._server import MCPServerBase
    from ._outcome import CallOutcome

log = logging.getLogger("entropic_mcp")

BEFORE_HOOK = "entropic_mcp_before_tool_call"
AFTER_HOOK = "entropic_mcp_after_tool_call"
PATTERN_HOOK = "entropic_mcp_permission_pattern"
DUPLICATE_HOOK = "entropic_mcp_skip_duplicate_check"


@attrs.frozen
class HookFault:
    """A hook implementation that raised or answered with the wrong type."""

    plugin: str
    hook: str
    problem: str

    def __str__(self) -> str:
        return f"{self.plugin}: {self.hook}: {self.problem}"


class HookRefusal(Exception):
    """A gate hook refused the call (its own ``Refuse``, or a fault failing closed)."""

    def __init__(self, message: str, fault: HookFault | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fault = fault


def _implementations(plugins: Plugins, hook: str) -> list[Any]:
    """The hook's implementations in pluggy's call order (LIFO registration, tryfirst first)."""
    caller = getattr(plugins.pm.hook, hook, None)
    if caller is None:
        return []
    return [impl for impl in reversed(caller.get_hookimpls()) if not (impl.hookwrapper or impl.wrapper)]


CALL_HOOKS = ("entropic_mcp_before_tool_call", "entropic_mcp_after_tool_call", PATTERN_HOOK, DUPLICATE_HOOK)


class _Snapshot:
    """The call hooks' implementations as of one plugin-manager generation."""

    __slots__ = ("answers", "generation", "impls", "owned")

    def __init__(self, generation: int | None, impls: dict[str, list[Any]]) -> None:
        self.generation = generation
        self.impls = impls
        self.owned: dict[tuple[str, str], list[Any]] = {}
        self.answers: dict[tuple[str, str], bool] = {}


def _call(impl: Any, kwargs: Mapping[str, Any]) -> Any:
    # pluggy lets an implementation declare fewer arguments than the spec; pass only those.
    return impl.function(*[kwargs[name] for name in impl.argnames])


def _problem(exc: BaseException) -> str:
    if isinstance(exc, ReadOnlyArguments):
        return f"tried to change the call's arguments in place ({exc})"
    return f"raised {describe(exc)}"


class Hooks:
    """Typed, isolated calls of the hooks the pipeline and the manager use.

    Args:
        plugins: the plugin manager.
        providers: server name → the plugin that provides it (``"host"`` for servers the host
            added itself); pattern and duplicate answers are taken only from a server's provider.
    """

    def __init__(self, plugins: Plugins, providers: Mapping[str, str]) -> None:
        self.plugins = plugins
        self.providers = providers
        #: The snapshot last taken, None after ``reset``: the pipeline compares its generation with
        #: the plugin manager's on every call, without a call (P1), and takes a new one when they differ.
        self.current: _Snapshot | None = None

    def reset(self) -> None:
        """Forget what was looked up (servers or their providers changed)."""
        self.current = None

    def snapshot(self) -> _Snapshot:
        # Registering or unregistering a plugin bumps the manager's generation, so a plugin
        # registered at any time is seen on the next call without a lookup per call.
        generation = getattr(self.plugins.pm, "generation", None)
        snap = self.current
        if snap is None or generation is None or snap.generation != generation:
            snap = self.current = _Snapshot(generation, {h: _implementations(self.plugins, h) for h in CALL_HOOKS})
        return snap

    def _answers(
        self,
        impls: Iterable[Any],
        hook: str,
        kwargs: Mapping[str, Any],
        faults: list[HookFault] | None,
        accept: tuple[type, ...],
    ) -> Iterator[Any]:
        """Each implementation's non-None answer of an ``accept`` type, in call order.

        An implementation that raises, or answers another type, is logged and recorded in
        ``faults`` (when given) and skipped: what observer hooks do with a fault.
        """
        for impl in impls:
            try:
                value = _call(impl, kwargs)
            except BaseException as exc:
                reraise_host_stop(exc)
                fault = self._fault(impl.plugin_name, hook, _problem(exc))
            else:
                if value is None:
                    continue
                if isinstance(value, accept):
                    yield value
                    continue
                expected = " or ".join(t.__name__ for t in accept)
                fault = self._fault(
                    impl.plugin_name, hook, f"returned {type(value).__name__}, expected {expected} or None"
                )
            if faults is not None:
                faults.append(fault)

    def _fault(self, plugin: str, hook: str, problem: str) -> HookFault:
        fault = HookFault(plugin, hook, problem)
        log.warning("plugin %r: %s %s", plugin, hook, problem)
        return fault

    # -- call gates ---------------------------------------------------------------------------------

    def before_tool_call(self, call: ToolCall, faults: list[HookFault]) -> object:
        """The arguments to run with; raises HookRefusal when a hook refuses or fails."""
        impls = self.snapshot().impls["entropic_mcp_before_tool_call"]
        if not impls:
            return call.args
        args: object = call.args
        kwargs = {"call": call}
        for impl in impls:
            hook = "entropic_mcp_before_tool_call"
            try:
                value = _call(impl, kwargs)
            except BaseException as exc:
                reraise_host_stop(exc)
                fault = self._fault(impl.plugin_name, hook, _problem(exc))
                raise HookRefusal(
                    f"The call was not run: plugin '{impl.plugin_name}' failed while checking it "
                    f"({fault.problem}). Tell the user that plugin is broken; other tools still work.",
                    fault,
                ) from None
            if value is None:
                continue
            if isinstance(value, Refuse):
                raise HookRefusal(value.reason)
            if isinstance(value, ReplaceArgs):
                # A copy of the hook's own: nothing the hook keeps can change what is judged and run.
                args = thawed(value.args)
                continue
            fault = self._fault(
                impl.plugin_name, hook, f"returned {type(value).__name__}, expected Refuse, ReplaceArgs or None"
            )
            raise HookRefusal(
                f"The call was not run: plugin '{impl.plugin_name}' gave an answer of the wrong type "
                f"({type(value).__name__}) while checking it. Tell the user that plugin is broken.",
                fault,
            )
        return args

    def _owned(self, hook: str, server: MCPServerBase) -> list[Any]:
        """Implementations of ``hook`` whose answers count for ``server``: its provider's own.

        For a server the host added in-process, plugins the host registered in-process (no
        distribution) answer too.
        """
        snap = self.snapshot()
        key = (hook, server.name)
        owned = snap.owned.get(key)
        if owned is None:
            owned = snap.owned[key] = self._owned_now(snap.impls[hook], server)
        return owned

    def _owned_now(self, impls: list[Any], server: MCPServerBase) -> list[Any]:
        if not impls:
            return impls
        provider = self.providers.get(server.name)
        infos = self.plugins.infos
        owned = []
        for impl in impls:
            name = impl.plugin_name
            if name == provider:
                owned.append(impl)
            elif provider == "host":
                info = infos.get(name)
                if info is None or (info.distribution is None and not info.builtin):
                    owned.append(impl)
        return owned

    def permission_pattern(self, server: MCPServerBase, tool: str, args: dict[str, Any]) -> str | None:
        """The pattern the server's own plugin answers; None for the server's own parts.

        Raises HookRefusal when that plugin's hook fails or answers a pattern that is not
        ``<server>.<tool>`` or ``<server>.<tool>:...`` (fail closed: the call is denied).
        """
        impls = self._owned(PATTERN_HOOK, server)
        if not impls:
            return None
        full = f"{server.name}.{tool}"
        kwargs = {"server": server, "tool": tool, "args": frozen(args)}
        for impl in impls:
            try:
                value = _call(impl, kwargs)
            except BaseException as exc:
                reraise_host_stop(exc)
                fault = self._fault(impl.plugin_name, PATTERN_HOOK, _problem(exc))
                raise HookRefusal(
                    f"'{full}' was denied: plugin '{impl.plugin_name}' failed while working out its permission "
                    f"pattern ({fault.problem}). Tell the user that plugin is broken.",
                    fault,
                ) from None
            if value is None:
                continue
            if isinstance(value, str) and (value == full or value.startswith(full + ":")):
                return value
            fault = self._fault(
                impl.plugin_name,
                PATTERN_HOOK,
                f"answered {value!r} for {full}; a pattern must be '{full}' or start with '{full}:'",
            )
            raise HookRefusal(
                f"'{full}' was denied: plugin '{impl.plugin_name}' answered a permission pattern that does not "
                f"name this tool ({value!r}). Tell the user that plugin is broken.",
                fault,
            )
        return None

    def skip_duplicate_check(self, server: MCPServerBase, tool: str, faults: list[HookFault]) -> bool:
        """Whether to leave the call's repeats unflagged (the server's provider may say)."""
        kwargs = {"server": server, "tool": tool}
        for value in self._answers(self._owned(DUPLICATE_HOOK, server), DUPLICATE_HOOK, kwargs, faults, (bool,)):
            return bool(value)
        # A server's own answer is per tool and fixed: asked once per plugin-manager generation.
        answers = self.snapshot().answers
        answer = answers.get((server.name, tool))
        if answer is None:
            try:
                answer = bool(server.skip_duplicate_check(tool))
            except BaseException as exc:
                reraise_host_stop(exc)
                faults.append(self._fault(f"server {server.name}", "skip_duplicate_check", _problem(exc)))
                return False
            answers[(server.name, tool)] = answer
        return answer

    # -- hooks plugins declare (entropic_mcp_add_hookspecs) ---------------------------------------------

    def declared_answers(self, hook: str, kwargs: Mapping[str, Any]) -> list[Any]:
        """Every non-None answer to ``hook``; an implementation that raises is logged and skipped."""
        return list(self._answers(_implementations(self.plugins, hook), hook, kwargs, None, (object,)))

    def first_answer(self, hook: str, arguments: Mapping[str, Any]) -> Any:
        """The first non-None answer to ``hook``, in pluggy's call order; an implementation's
        exception propagates, with the plugin named in a note."""
        for impl in _implementations(self.plugins, hook):
            try:
                value = _call(impl, arguments)
            except Exception as exc:
                exc.add_note(f"raised by plugin {impl.plugin_name!r} in {hook}")
                raise
            if value is not None:
                return value
        return None

    # -- observers ------------------------------------------------------------------------------------

    def after_tool_call(self, call: ToolCall, outcome: CallOutcome, faults: list[HookFault]) -> str | None:
        """The last replacement text a hook returned; faults are recorded and skipped."""
        impls = self.snapshot().impls[AFTER_HOOK]
        text = None
        for value in self._answers(impls, AFTER_HOOK, {"call": call, "outcome": outcome}, faults, (str,)):
            text = value
        return text

    async def approve_tool_call(self, request: ApprovalRequest, faults: list[HookFault]) -> ApprovalDecision | None:
        """The first approver's answer; None when nobody can answer (the call is then denied)."""
        kwargs = {"request": request}
        for impl in _implementations(self.plugins, "entropic_mcp_approve_tool_call"):
            try:
                value = _call(impl, kwargs)
                if inspect.isawaitable(value):
                    value = await value
            except BaseException as exc:
                reraise_host_stop(exc)
                faults.append(self._fault(impl.plugin_name, "entropic_mcp_approve_tool_call", _problem(exc)))
                continue
            try:
                decision = ApprovalDecision.coerce(value)
            except (TypeError, ValueError) as exc:
                faults.append(self._fault(impl.plugin_name, "entropic_mcp_approve_tool_call", str(exc)))
                continue
            if decision is not None:
                return decision
        return None

    def approve_outside_root(self, request: OutsideRootRequest) -> bool | None:
        hook = "entropic_mcp_approve_outside_root"
        for value in self._answers(_implementations(self.plugins, hook), hook, {"request": request}, None, (bool,)):
            return bool(value)
        return None

    def directive_processor(self) -> DirectiveProcessor:
        """A processor with every handler the plugins provide (later ones replace earlier ones)."""
        processor = DirectiveProcessor()
        for impl in _implementations(self.plugins, "entropic_mcp_directive_handlers"):
            try:
                value = _call(impl, {})
            except BaseException as exc:
                reraise_host_stop(exc)
                self._fault(impl.plugin_name, "entropic_mcp_directive_handlers", _problem(exc))
                continue
            for spec in as_list(value):
                if isinstance(spec, DirectiveHandlerSpec):
                    processor.register(spec.type, spec.handler)
                else:
                    self._fault(
                        impl.plugin_name,
                        "entropic_mcp_directive_handlers",
                        f"returned {type(spec).__name__}, expected DirectiveHandlerSpec",
                    )
        return processor


def as_list(value: object) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        return [value]
    return list(value)
