"""The call pipeline: every call, from every path, goes through ``Pipeline.run``.

One method per stage, in the order pipeline.md gives. A stage that refuses raises ``_Refused``;
``run`` turns it into the refusal envelope. Guard state (``_guards``) and hook calls
(``_hooks``) live in their own modules.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from .._access import AccessLevel
from .._calls import ApprovalRequest, ToolCall
from .._context import CallContext, bind_host
from .._directives import Complete, StopProcessing
from .._envelope import ServerResponse, dumps, first_leaf, non_finite
from .._kinds import KINDS, ResultKind
from .._server import normalize_args
from .._tools import result_cap
from ._deadlines import Deadline, StepTimer
from ._guards import Guards, GuardState
from ._hooks import AFTER_HOOK, BEFORE_HOOK, DUPLICATE_HOOK, PATTERN_HOOK, HookFault, HookRefusal
from ._outcome import BatchOutcome, CallOutcome, made
from ._rules import PermissionPart, Verdict

if TYPE_CHECKING:
    from .._config import PipelineConfig
    from .._server import MCPServerBase
    from .._tools import ToolBase
    from ._hooks import Hooks
    from ._keys import AccessKeys
    from ._permission import PermissionStage

log = logging.getLogger("entropic_mcp")


#: No result is longer than this, whatever ``max_result_bytes`` says (0 turns the cap off, not
#: this): a 100 MB answer left the client with no answer at all.
RESULT_CEILING_BYTES = 8 * 1024 * 1024


def cap_text(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` UTF-8 bytes at a character boundary, with the marker.

    ``limit`` 0 (or past ``RESULT_CEILING_BYTES``) cuts at the hard ceiling instead.
    """
    ceiling = limit <= 0 or limit > RESULT_CEILING_BYTES
    if ceiling:
        limit = RESULT_CEILING_BYTES
    if len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", errors="ignore")
    rest = len(data) - len(head.encode("utf-8", errors="surrogatepass"))
    if ceiling:
        return (
            f"{head}\n[... truncated at entropic-mcp's hard ceiling of {RESULT_CEILING_BYTES // (1024 * 1024)} MiB "
            f"per result, {rest} more bytes; ask for less: a narrower range, a filter or a smaller page]"
        )
    return f"{head}\n[... truncated, {rest} more bytes]"


def classify(response: ServerResponse) -> ResultKind:
    if response.is_error:
        return ResultKind.ERROR
    stripped = response.result.strip()
    return ResultKind.OK_EMPTY if stripped in ("", "[]", "{}", "null", '""') else ResultKind.OK


class _Refused(Exception):
    """A stage refused the call."""

    def __init__(self, kind: ResultKind, code: str, message: str, **extra: Any) -> None:
        self.kind = kind
        self.code = code
        self.message = message
        self.extra = extra


class _Plan:
    """What every call of one tool shares, worked out on its first call (cleared when servers change)."""

    __slots__ = ("parts", "rules_version", "server", "timeout", "tool", "tool_name", "validator", "verdict", "write")

    def __init__(self, server: MCPServerBase, tool: ToolBase, tool_name: str, validator: Any, timeout: Any) -> None:
        self.server = server
        self.tool = tool
        self.tool_name = tool_name
        self.validator = validator
        self.timeout = timeout
        self.write = tool.required_access_level > AccessLevel.READ
        self.parts: list[PermissionPart] | None = None  # set when the parts never depend on arguments
        self.verdict: Verdict | None = None
        self.rules_version = -1


class _Call:
    """One call on its way through the stages (class attributes are the defaults: cheap to make)."""

    args: dict[str, Any]
    plan: _Plan
    key = ""
    pattern: str | None = None
    permission: str | None = None
    repeats = 0
    run_length = 0
    server: MCPServerBase | None = None
    tool: ToolBase | None = None
    tool_name = ""
    state: GuardState | None = None
    write = True
    span: Any = None  # the open stage's span when the call is traced (_traced.py)

    def __init__(self, name: str, ctx: CallContext, started: float, snap: Any) -> None:
        self.name = name
        self.ctx = ctx
        self.started = started
        self.snap = snap
        self.shown = name if ctx.tool_names is None else ctx.tool_names(name)
        self.faults: list[HookFault] = []
        self.args = {}


def _surrogate(value: object) -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "surrogate"
    return None


def _find_surrogate(value: object) -> str | None:
    """The argument path of the first string holding a lone surrogate (not valid Unicode)."""
    found = first_leaf(value, _surrogate, keys=True)
    if found is None:
        return None
    return "(arguments)" if found[0] == "(value)" else found[0]


class CallPipeline:
    """Runs the stages of pipeline.md; holds the guard state and history.

    Every collaborator is given, none is looked up: the pipeline holds no manager.

    Args:
        config: the ``[pipeline]`` settings.
        servers: server name → server, the live registry (read on a tool's first call).
        hooks: the hook calls.
        permission: the permission stage's parts (and, through it, the rules).
        access_keys: the identities' access keys.
        audit: records each outcome in the audit trail.
        delegation_tool: the tool that hands work to another tier, if any (access refusals name it).
        store: gives the store guard state is shared through, or None (this process's memory).
        host: what a tool reaches through ``ctx.services`` (bound to each call's context).
    """

    def __init__(
        self,
        config: PipelineConfig,
        *,
        servers: Mapping[str, MCPServerBase],
        hooks: Hooks,
        permission: PermissionStage,
        access_keys: AccessKeys,
        audit: Callable[[CallOutcome], None],
        delegation_tool: Callable[[], str | None],
        store: Callable[[], Any] | None = None,
        host: Any = None,
    ) -> None:
        self.config = config
        self.servers = servers
        self.hooks = hooks
        self.permission = permission
        self.access_keys = access_keys
        self.audit = audit
        self.delegation_tool = delegation_tool
        self.host = host
        self.guards = Guards(config, store)
        self._plans: dict[str, _Plan] = {}
        self._history: deque[CallOutcome] = deque(maxlen=self.config.history_size)
        self.metrics: dict[str, dict[str, int]] = {}

    @property
    def history(self) -> list[dict[str, Any]]:
        """The last ``history_size`` outcomes, oldest first, with argument names only."""
        return [outcome.summary() for outcome in self._history]

    def history_of(self, conversation_id: str) -> list[dict[str, Any]]:
        """The history of one conversation only (what introspection shows a caller)."""
        return [outcome.summary() for outcome in self._history if outcome.conversation_id == conversation_id]

    def metrics_of(self, conversation_id: str) -> dict[str, dict[str, int]]:
        """Per-tool counts of result kinds in one conversation's history."""
        counts: dict[str, dict[str, int]] = {}
        for outcome in self._history:
            if outcome.conversation_id == conversation_id:
                per_tool = counts.setdefault(outcome.name, {})
                kind = str(outcome.kind)
                per_tool[kind] = per_tool.get(kind, 0) + 1
        return counts

    def end_conversation(self, conversation_id: str) -> None:
        self.guards.end_conversation(conversation_id)

    def forget_plans(self) -> None:
        """Servers or tools changed: work each tool's plan out again on its next call."""
        self._plans.clear()

    # -- the run --------------------------------------------------------------------------------

    async def run(self, name: str, raw_args: object, ctx: CallContext) -> CallOutcome:
        # One look at the plugin manager per call: hooks registered at any time count from the next call.
        hooks = self.hooks
        snap = hooks.current
        if snap is None or snap.generation != getattr(hooks.plugins.pm, "generation", None):
            snap = hooks.snapshot()
        call = _Call(name, ctx, time.perf_counter(), snap)
        bind_host(ctx, self.host)
        try:
            self._resolve(call)
            # The common case skips whole stages with one check each (P1: the pipeline's own cost
            # must stay well under the SDK's call).
            if call.snap.impls[BEFORE_HOOK]:
                self._before_hooks(call, raw_args)
            else:
                call.args = raw_args if type(raw_args) is dict else normalize_args(raw_args)
            self._normalise(call)
            self._schema(call)
            if ctx.identity is not None:
                self._access(call)
            verdict = self._permission(call)
            if verdict is not None:
                await self._ask(call, verdict)
            if self.guards.shared:  # guard state in a store several workers share: loaded off the loop
                call.state = await self.guards.load(ctx.conversation_id, ctx.identity)
            self._loop_guards(call)
            response = await self._dispatch(call)
        except _Refused as refused:
            outcome = self._finish(
                call, refused.kind, ServerResponse.refusal(refused.code, refused.message, **refused.extra)
            )
        else:
            outcome = self._result(call, response)
        if call.state is not None and call.state.pending is not None:
            await self.guards.flush(call.state)
        return outcome

    # -- stages ----------------------------------------------------------------------------------

    def _resolve(self, call: _Call) -> None:
        plan = self._plans.get(call.name)
        if plan is None:
            plan = self._plan(call)
        call.plan = plan
        call.server, call.tool, call.tool_name, call.write = plan.server, plan.tool, plan.tool_name, plan.write

    def _plan(self, call: _Call) -> _Plan:
        server_name, _, tool_name = call.name.partition(".")
        server = self.servers.get(server_name)
        if server is None:
            known = ", ".join(sorted(self.servers)) or "none"
            raise _Refused(
                ResultKind.ERROR,
                "unknown_server",
                f"Error: unknown server '{server_name}'. Servers: {known}. List the tools with tools/list.",
            )
        tool = server.get_tool(tool_name)
        if tool is None:
            tools = ", ".join(call.ctx.display(f"{server_name}.{t}") for t in server.tools) or "none"
            raise _Refused(
                ResultKind.ERROR,
                "unknown_tool",
                f"Error: unknown tool '{call.shown}'. Tools of '{server_name}': {tools}.",
            )
        timeout = self.config.tool_timeouts.get(call.name, server.default_timeout_seconds)
        try:
            validator = tool.validator
        except Exception as exc:  # a schema only known at run time (an external server's)
            raise _Refused(
                ResultKind.ERROR,
                "invalid_tool",
                f"Error: '{call.shown}' cannot be called: its inputSchema is not a valid JSON Schema ({exc}). "
                f"Tell the user the '{server_name}' server is broken.",
            ) from None
        plan = _Plan(server, tool, tool_name, validator, timeout)
        if self.permission.constant_parts(server):
            plan.parts = self.permission.server_parts(server, tool_name, {})
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[call.name] = plan
        return plan

    def _before_hooks(self, call: _Call, raw_args: object) -> None:
        """Run only when a plugin implements the hook (``run`` checks)."""
        server_name = call.name.partition(".")[0]
        args = normalize_args(raw_args)
        # The hooks see a read-only copy: what they are shown is what is judged and run.
        request = ToolCall(name=call.name, server=server_name, tool=call.tool_name, args=args, context=call.ctx)
        try:
            replaced = self.hooks.before_tool_call(request, call.faults)
        except HookRefusal as refusal:
            call.args = args
            if refusal.fault is not None:
                call.faults.append(refusal.fault)
            raise _Refused(ResultKind.REJECTED_HOOK, "refused_by_hook", refusal.message) from None
        call.args = args if replaced is request.args else normalize_args(replaced)

    def _normalise(self, call: _Call) -> None:
        try:
            call.key = call.name + "\x00" + orjson.dumps(call.args, option=orjson.OPT_SORT_KEYS, default=str).decode()
            if "null" in call.key:  # NaN and Infinity come out as null: only then is there anything to look for
                found = non_finite(call.args)
                if found is not None:
                    at, what = found
                    raise _Refused(
                        ResultKind.REJECTED_SCHEMA,
                        "invalid_args",
                        f"Invalid arguments for '{call.shown}': argument '{at}' is {what}, which JSON cannot "
                        "carry. Send a finite number (or a string) and call it again.",
                    )
        except TypeError:
            where = _find_surrogate(call.args)
            problem = (
                f"argument '{where}' holds a lone surrogate code point, which is not valid Unicode"
                if where
                else "the arguments cannot be represented as JSON"
            )
            # Only the names survive into history and audit: the values cannot be stored as JSON.
            call.args = {k: "<invalid>" for k in call.args if isinstance(k, str)}
            raise _Refused(
                ResultKind.REJECTED_SCHEMA,
                "invalid_args",
                f"Invalid arguments for '{call.shown}': {problem}. Send valid UTF-8 text and call it again.",
            ) from None

    def _schema(self, call: _Call) -> None:
        validator = call.plan.validator
        if validator.coerces:
            call.args = validator.coerce(call.args)
        if validator.is_valid(call.args):
            return
        problem = validator.validate(call.args)
        if problem is not None:
            raise _Refused(
                ResultKind.REJECTED_SCHEMA,
                "invalid_args",
                f"{problem}. Fix the arguments of '{call.shown}' and call it again.",
            )

    def _access(self, call: _Call) -> None:
        assert call.tool is not None
        ctx, keys = call.ctx, self.access_keys
        if ctx.identity is None or not keys.has_keys(ctx.identity):
            return
        level = call.tool.required_access_level
        held = keys.level(ctx.identity, call.name)
        if held < level:
            delegate = self.delegation_tool()
            hint = f" Use {ctx.display(delegate)} to hand this work to a tier that has it." if delegate else ""
            raise _Refused(
                ResultKind.REJECTED_ACCESS,
                "access_denied",
                f"'{ctx.identity}' holds {held.name} access to '{call.shown}', which needs {level.name}.{hint}",
            )

    def _permission(self, call: _Call) -> Verdict | None:
        """Allow (None), deny (raises), or the verdict to ask about."""
        assert call.server is not None and call.tool is not None
        plan = call.plan
        rules = self.permission.rules
        if plan.parts is not None and not call.snap.impls[PATTERN_HOOK]:
            # Parts that never depend on the arguments: one verdict until the rules change.
            call.pattern = plan.parts[0].store
            if plan.rules_version != rules.version or plan.verdict is None:
                plan.verdict, plan.rules_version = rules.judge(plan.parts, read_only=not call.write), rules.version
            return self._decided(call, plan.verdict)
        try:
            verdict, call.pattern = self.permission.judge(
                call.server,
                call.tool_name,
                call.args,
                call.ctx,
                hooked=call.snap.impls[PATTERN_HOOK],
                read_only=not call.write,
            )
        except HookRefusal as refusal:
            if refusal.fault is not None:
                call.faults.append(refusal.fault)
            call.permission = "deny"
            raise _Refused(ResultKind.REJECTED_HOOK, "refused_by_hook", refusal.message) from None
        return self._decided(call, verdict)

    def _decided(self, call: _Call, verdict: Verdict) -> Verdict | None:
        if verdict.decision == "allow":
            call.permission = "allow"
            return None
        if verdict.decision == "deny":
            call.permission = "deny"
            raise _Refused(ResultKind.REJECTED_PERMISSION, "permission_denied", self._denied_message(call, verdict))
        return verdict

    def _denied_message(self, call: _Call, verdict: Verdict) -> str:
        rules = verdict.rules()
        private = [v.part for v in verdict.verdicts if v.kind == "private"]
        if private and not rules:
            return (
                f"'{call.shown}' would read or change entropic-mcp's store or its per-user data "
                f"({private[0].store.partition(':')[2]}); no tool may, whatever the rules say. Do not retry it; "
                "the user can look into the store with 'entropic-mcp storage'."
            )
        protected = [v.part for v in verdict.verdicts if v.kind == "protected"]
        if protected and not rules:
            target = protected[0].store.partition(":")[2]
            return (
                f"'{call.shown}' would change {target}, one of entropic-mcp's policy files; tools may not change "
                "them unless a rule names the file, e.g. allow = "
                f'["filesystem.write:{target}"] under [permissions]. Ask the user to edit it instead.'
            )
        why = ("deny = [" + ", ".join(f'"{r}"' for r in rules) + "]") if rules else f'default = "{default_rule(self)}"'
        return (
            f"'{call.shown}' is denied by the permission rules ({why}). Do not retry it; choose another approach "
            "or ask the user to change [permissions]."
        )

    async def _ask(self, call: _Call, verdict: Verdict) -> None:
        asking = verdict.asking
        ask_rules = [v.rule for v in verdict.verdicts if v.kind == "ask" and v.rule]
        unclear = any(v.kind == "not_understood" for v in verdict.verdicts)
        if unclear:
            reason = "part of the call could not be fully analysed"
            # A server may say which part, and where (bash: the construct and its column).
            explain = getattr(call.server, "unclear_reason", None)
            try:
                detail = explain(call.tool_name, call.args) if explain is not None else None
            except Exception:
                log.warning("server %s: unclear_reason raised", getattr(call.server, "name", "?"), exc_info=True)
                detail = None
            if detail:
                reason += f": {detail}"
        elif ask_rules:
            reason = f'the rule ask = ["{ask_rules[0]}"] matched'
        else:
            reason = f'no rule allows this call (default = "{default_rule(self)}")'
        request = ApprovalRequest(
            tool=call.name,
            args=call.args,
            pattern=asking[0].store,
            patterns=tuple(p.store for p in asking),
            access=call.tool.required_access_level if call.tool is not None else AccessLevel.WRITE,
            identity=call.ctx.identity,
            subject=call.ctx.subject,
            conversation_id=call.ctx.conversation_id,
            reason=reason,
            always=verdict.always_effective,
        )
        answer = await self.hooks.approve_tool_call(request, call.faults)
        if answer is None:
            call.permission = "ask->deny"
            # Addressed to the agent: it cannot approve or edit the policy itself, a person can.
            if unclear:
                remedy = (
                    "Part of it could not be fully analysed, so no rule can allow it: simplify the call (plain "
                    "commands instead of computed ones), or ask the user to run it themselves. Do not retry it "
                    "unchanged."
                )
            elif ask_rules:
                remedy = (
                    f'The rule ask = ["{ask_rules[0]}"] requires a person\'s approval: ask the user to approve '
                    "it (or to run it themselves, or to change that rule). Do not retry it unchanged."
                )
            else:
                remedy = f"Ask the user to approve it; {would_allow(asking)}. Do not retry it unchanged."
            raise _Refused(
                ResultKind.REJECTED_PERMISSION,
                "permission_denied",
                f"'{call.shown}' needs the user's approval ({reason}) and no approval came: this client cannot "
                f"ask them, or nobody answered. {remedy}",
            )
        choice = answer.answer
        if choice.startswith("always_") and not request.always:
            log.info("%s: 'always' answer for %s taken as once (it would not take effect)", choice, call.name)
            choice = "allow_once" if choice == "always_allow" else "deny_once"
        elif choice in ("always_allow", "always_deny"):
            self.permission.rules.add("allow" if choice == "always_allow" else "deny", [p.store for p in asking])
        allowed = choice in ("allow_once", "always_allow")
        call.permission = "ask->allow" if allowed else "ask->deny"
        if not allowed:
            if answer.dismissed:
                raise _Refused(
                    ResultKind.REJECTED_PERMISSION,
                    "permission_denied",
                    f"The user dismissed the approval request for '{call.shown}' without answering. Ask the user "
                    f"whether to run it; {would_allow(asking)}. Do not retry it unchanged.",
                )
            feedback = f" Feedback: {answer.feedback}" if answer.feedback else ""
            raise _Refused(
                ResultKind.REJECTED_PERMISSION,
                "permission_denied",
                f"The user denied '{call.shown}'.{feedback} Do not retry it unchanged.",
                **({"feedback": answer.feedback} if answer.feedback else {}),
            )

    def _loop_guards(self, call: _Call) -> None:
        ctx = call.ctx
        state = call.state or self.guards.in_memory((ctx.conversation_id, ctx.identity))
        if state is None:
            state = self.guards.state(ctx.conversation_id, ctx.identity)
        call.state = state
        if not state.failures and not call.write:
            return
        refusal = self.guards.refusal(state, call.key, call.name, write=call.write, shown=call.shown)
        if refusal is not None:
            message, call.run_length = refusal
            raise _Refused(ResultKind.REJECTED_LOOP, "loop_detected", message)

    async def _dispatch(self, call: _Call) -> ServerResponse:
        server, ctx = call.server, call.ctx
        assert server is not None
        ctx.result_budget = call.plan.tool.result_budget_bytes
        ctx.validated = True
        timeout = call.plan.timeout
        deadline = None
        running = server.execute(call.tool_name, call.args, ctx)
        try:
            if timeout is None:
                return await running
            started = time.monotonic()
            ctx.deadline = started + timeout
            # No deadline can pass before the call first waits (it holds the loop until then), so
            # the watchdog is armed only then: most calls end in their first step (P1).
            try:
                waiting = running.send(None)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            deadline = Deadline(started, started + timeout - time.monotonic())
            return await StepTimer(running, waiting)  # type: ignore[no-any-return]
        except BaseException as exc:
            if type(exc).__name__ != "CancelledError":
                raise
            ctx.cancelled.set()
            if deadline is not None and deadline.expired():
                extra: dict[str, Any] = {"timeout_seconds": timeout}
                if ctx.partial:
                    extra["output"] = ctx.partial
                self._record_run(call, '{"error": "timeout"}', failed=True, code="timeout")
                raise _Refused(
                    ResultKind.TIMEOUT,
                    "timeout",
                    f"'{call.shown}' did not finish within {timeout:g} s and was cancelled. Narrow the request or "
                    "raise the timeout in config.",
                    **extra,
                ) from None
            self._finish(
                call, ResultKind.CANCELLED, ServerResponse.refusal("cancelled", f"'{call.shown}' was cancelled.")
            )
            raise
        finally:
            if deadline is not None:
                deadline.leave()

    def _record_run(self, call: _Call, text: str, *, failed: bool, flag: bool = False, code: str | None = None) -> None:
        if call.state is not None:
            call.repeats = self.guards.ran(
                call.state, call.key, call.name, text, failed=failed, write=call.write, flag=flag, code=code
            )
            call.run_length = call.state.run_length

    def _result(self, call: _Call, response: ServerResponse) -> CallOutcome:
        """Cap, classify, flag a repeated answer, finish."""
        limit = result_cap(self.config.max_result_bytes, call.ctx.result_budget)
        effective = limit if 0 < limit <= RESULT_CEILING_BYTES else RESULT_CEILING_BYTES
        text = response.result if len(response.result) * 4 <= effective else cap_text(response.result, limit)
        if text is not response.result:
            response = ServerResponse(
                result=text, directives=response.directives, is_error=response.is_error, code=response.code
            )
        if response.is_error:
            kind = ResultKind.ERROR
        elif len(response.result) > 4:
            kind = ResultKind.OK
        else:
            kind = classify(response)
        flag = not call.write and kind != ResultKind.ERROR
        if flag:
            assert call.server is not None
            skip = (
                None if call.snap.impls[DUPLICATE_HOOK] else call.snap.answers.get((call.server.name, call.tool_name))
            )
            if skip is None:
                skip = self.hooks.skip_duplicate_check(call.server, call.tool_name, call.faults)
            flag = not skip
        state = call.state
        if state is not None:
            call.repeats = self.guards.ran(
                state,
                call.key,
                call.name,
                response.result,
                failed=kind == ResultKind.ERROR,
                write=call.write,
                flag=flag,
                code=response.code,
            )
            call.run_length = state.run_length
        if call.repeats:
            response = ServerResponse._make(
                f"{self.guards.notice(call.shown, call.repeats)}\n\n{response.result}",
                response.directives,
                response.is_error,
                response.structured,
                code=response.code,
            )
        if kind == ResultKind.ERROR and response.code == "timeout":
            kind = ResultKind.TIMEOUT
        return self._finish(call, kind, response)

    def _finish(self, call: _Call, kind: ResultKind, response: ServerResponse) -> CallOutcome:
        ctx = call.ctx
        outcome = made(
            call.name,
            response,
            kind,
            (time.perf_counter() - call.started) * 1000.0,
            ctx.conversation_id,
            ctx.identity,
            ctx.subject,
            call.args,
            call.permission,
            call.pattern,
            call.repeats,
            call.run_length,
            tuple(map(str, call.faults)) if call.faults else (),
        )
        if call.snap.impls[AFTER_HOOK]:
            server_name, _, tool_name = call.name.partition(".")
            faults: list[HookFault] = []
            shown = ToolCall(name=call.name, server=server_name, tool=tool_name, args=call.args, context=ctx)
            text = self.hooks.after_tool_call(shown, attrs.evolve(outcome, args=shown.args), faults)
            changes: dict[str, Any] = {}
            if text is not None and text != response.result:
                changes["response"] = ServerResponse(
                    result=text, directives=response.directives, is_error=response.is_error, code=response.code
                )
            if faults:
                changes["hook_faults"] = outcome.hook_faults + tuple(str(f) for f in faults)
            if changes:
                outcome = attrs.evolve(outcome, **changes)
        self._history.append(outcome)
        counts = self.metrics.get(call.name)
        if counts is None:
            counts = self.metrics[call.name] = {}
        counts[str(kind)] = counts.get(str(kind), 0) + 1
        self.audit(outcome)
        return outcome


def would_allow(asking: Sequence[PermissionPart]) -> str:
    """The rule that would allow the asking parts, named as the user's to add (not the agent's)."""
    rules = ", ".join(f'"{p.store}"' for p in asking)
    return (
        f"this would be allowed by allow = [{rules}] under [permissions] in entropic-mcp.toml "
        "(or by answering 'always allow' when asked), which is the user's to add, not yours"
    )


def default_rule(pipeline: CallPipeline) -> str:
    return str(pipeline.permission.rules.config.default)


def stops_batch(outcome: CallOutcome, guards: Guards) -> str | None:
    """Why a batch stops after this outcome (None: it goes on)."""
    for directive in outcome.response.directives:
        if isinstance(directive, StopProcessing):
            return "stop_processing"
        if isinstance(directive, Complete):
            return "complete"
    if guards.stops(outcome.consecutive_duplicates):
        return "duplicate_stop"
    return None


__all__ = ["KINDS", "BatchOutcome", "CallOutcome", "CallPipeline", "PermissionPart", "ResultKind", "dumps"]
