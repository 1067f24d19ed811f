"""The call pipeline: every call, from every path, goes through ``Pipeline.run``."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from ._access import AccessLevel
from ._calls import ApprovalDecision, ApprovalRequest, Refuse, ReplaceArgs, ToolCall
from ._context import CallContext
from ._directives import Complete, StopProcessing
from ._envelope import ServerResponse, dumps
from ._permissions import PermissionPart
from ._server import normalize_args

if TYPE_CHECKING:
    from ._manager import ServerManager

log = logging.getLogger("entropic_mcp")

KINDS = (
    "ok",
    "ok_empty",
    "error",
    "timeout",
    "cancelled",
    "rejected_hook",
    "rejected_loop",
    "rejected_schema",
    "rejected_access",
    "rejected_duplicate",
    "rejected_permission",
)
MAX_CONVERSATIONS = 4096
MAX_CACHED_RESULTS = 512


@attrs.frozen(kw_only=True)
class CallOutcome:
    """What one call came to: the envelope plus how it got there."""

    name: str
    response: ServerResponse
    kind: str
    elapsed_ms: float
    conversation_id: str
    identity: str | None = None
    args: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    permission: str | None = None  # allow | ask->allow | deny | ...
    pattern: str | None = None
    consecutive_duplicates: int = 0
    same_tool_calls: int = 0
    time: float = attrs.field(factory=time.time)

    def summary(self) -> dict[str, Any]:
        """The history form: argument names only, never values."""
        return {
            "tool": self.name,
            "kind": self.kind,
            "is_error": self.response.is_error,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "arg_names": sorted(self.args),
            "conversation_id": self.conversation_id,
            "identity": self.identity,
            "permission": self.permission,
            "time": self.time,
        }

    def to_record(self) -> dict[str, Any]:
        """The audit form: everything."""
        return {
            **self.summary(),
            "args": dict(self.args),
            "pattern": self.pattern,
            "response": self.response.to_dict(),
            "consecutive_duplicates": self.consecutive_duplicates,
        }


@attrs.define
class _Conversation:
    results: OrderedDict[str, str] = attrs.field(factory=OrderedDict)
    last_key: str | None = None
    consecutive_duplicates: int = 0
    failures: dict[str, int] = attrs.field(factory=dict)
    last_tool: str | None = None
    same_tool: int = 0


class _Deadlines:
    """One watchdog per event loop that cancels calls past their deadline.

    A timer per call (what ``asyncio.timeout`` arms) costs more than the rest of the pipeline's
    bookkeeping; here a call only enters and leaves a dict, and one tick every
    ``RESOLUTION`` seconds — armed only while calls are in flight — cancels the late ones.
    """

    RESOLUTION = 0.02

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.calls: dict[Any, list[Any]] = {}
        self.armed = False

    def add(self, task: Any, seconds: float) -> list[Any]:
        entry = [self.loop.time() + seconds, False]
        self.calls[task] = entry
        if not self.armed:
            self.armed = True
            self.loop.call_later(self.RESOLUTION, self.tick)
        return entry

    def tick(self) -> None:
        now = self.loop.time()
        for task, entry in list(self.calls.items()):
            if entry[0] <= now and not entry[1]:
                entry[1] = True
                task.cancel()
        if self.calls:
            self.loop.call_later(self.RESOLUTION, self.tick)
        else:
            self.armed = False


async def _with_timeout(awaitable: Any, seconds: float) -> Any:
    """Await with a deadline; our cancellation becomes TimeoutError, anyone else's passes through."""
    import asyncio  # here, not at module level: listing tools must not pay for asyncio

    loop = asyncio.get_running_loop()
    deadlines = getattr(loop, "_entropic_mcp_deadlines", None)
    if deadlines is None:
        deadlines = _Deadlines(loop)
        loop._entropic_mcp_deadlines = deadlines  # type: ignore[attr-defined]
    task = asyncio.current_task()
    outer = deadlines.calls.get(task)  # a tool that calls the pipeline again, in the same task
    entry = deadlines.add(task, seconds)
    try:
        return await awaitable
    except asyncio.CancelledError:
        if entry[1] and task is not None and task.uncancel() == 0:
            raise TimeoutError from None
        raise
    finally:
        if outer is None:
            deadlines.calls.pop(task, None)
        else:
            deadlines.calls[task] = outer


def cap_text(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` UTF-8 bytes at a character boundary, with the marker."""
    if limit <= 0 or len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", errors="ignore")
    rest = len(data) - len(head.encode("utf-8"))
    return f"{head}\n[... truncated, {rest} more bytes]"


def classify(response: ServerResponse) -> str:
    if response.is_error:
        return "error"
    stripped = response.result.strip()
    return "ok_empty" if stripped in ("", "[]", "{}", "null", '""') else "ok"


class Pipeline:
    """Runs the stages of pipeline.md for a ServerManager; holds per-conversation guard state."""

    def __init__(self, manager: ServerManager) -> None:
        self.manager = manager
        self.config = manager.config.pipeline
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._lock = threading.Lock()
        self._history: deque[CallOutcome] = deque(maxlen=self.config.history_size)
        self.metrics: dict[str, dict[str, int]] = {}

    @property
    def history(self) -> list[dict[str, Any]]:
        """The last ``history_size`` outcomes, oldest first, with argument names only."""
        return [outcome.summary() for outcome in self._history]

    # -- state ------------------------------------------------------------------------------

    def _state(self, conversation_id: str) -> _Conversation:
        state = self._conversations.get(conversation_id)
        if state is None:
            with self._lock:
                state = self._conversations.setdefault(conversation_id, _Conversation())
                while len(self._conversations) > MAX_CONVERSATIONS:
                    self._conversations.popitem(last=False)
        return state

    def end_conversation(self, conversation_id: str) -> None:
        with self._lock:
            self._conversations.pop(conversation_id, None)

    # -- the stages ------------------------------------------------------------------------------

    async def run(self, name: str, raw_args: object, ctx: CallContext) -> CallOutcome:
        started = time.perf_counter()
        manager = self.manager
        ctx.manager = manager
        server_name, _, tool_name = name.partition(".")
        server = manager.servers.get(server_name)
        if server is None:
            known = ", ".join(sorted(manager.servers)) or "none"
            return self._refuse(
                name,
                {},
                ctx,
                started,
                "error",
                "unknown_server",
                f"Error: unknown server '{server_name}'. Servers: {known}. Tool names are <server>.<tool>; "
                "list them with tools/list.",
            )
        tool = server.get_tool(tool_name)
        if tool is None:
            return self._refuse(
                name,
                {},
                ctx,
                started,
                "error",
                "unknown_tool",
                f"Error: unknown tool '{name}'. Tools of '{server_name}': {', '.join(server.tools) or 'none'}.",
            )

        # 1. before hooks
        if manager.has_before_hooks:
            raw_args, refusal = manager.before_tool_call(
                ToolCall(name=name, server=server_name, tool=tool_name, args=normalize_args(raw_args), context=ctx)
            )
            if refusal is not None:
                return self._refuse(
                    name, normalize_args(raw_args), ctx, started, "rejected_hook", "refused_by_hook", refusal
                )
        # 2. normalise
        args = normalize_args(raw_args)
        state = self._state(ctx.conversation_id)
        key = name + "\x00" + orjson.dumps(args, option=orjson.OPT_SORT_KEYS, default=str).decode()

        # 3. loop guards
        same = state.same_tool + 1 if state.last_tool == name else 1
        state.last_tool, state.same_tool = name, same
        if same > self.config.same_tool_limit:
            return self._refuse(
                name,
                args,
                ctx,
                started,
                "rejected_loop",
                "loop_detected",
                f"'{name}' has been called {same - 1} times in a row (limit {self.config.same_tool_limit}). "
                "Step back: use another tool or change approach before calling it again.",
                same_tool=same,
            )
        if state.failures.get(key, 0) >= self.config.identical_failure_limit:
            return self._refuse(
                name,
                args,
                ctx,
                started,
                "rejected_loop",
                "loop_detected",
                f"'{name}' already failed {state.failures[key]} times with exactly these arguments; the "
                "failure is not transient. Take a different approach (other arguments or another tool).",
                same_tool=same,
            )

        # 4. schema
        validator = manager.validator(name, tool)
        args = validator.coerce(args)
        problem = validator.validate(args)
        if problem is not None:
            return self._refuse(
                name,
                args,
                ctx,
                started,
                "rejected_schema",
                "invalid_args",
                f"{problem}. Fix the arguments of '{name}' and call it again.",
                same_tool=same,
                failure_key=key,
            )

        # 5. access keys
        level = tool.required_access_level
        if ctx.identity is not None and manager.access_keys.has_keys(ctx.identity):
            held = manager.access_keys.level(ctx.identity, name)
            if held < level:
                return self._refuse(
                    name,
                    args,
                    ctx,
                    started,
                    "rejected_access",
                    "access_denied",
                    f"'{ctx.identity}' holds {held.name} access to '{name}', which needs {level.name}. Use "
                    "entropic.delegate to hand this work to a tier that has it.",
                    same_tool=same,
                )

        # 6. duplicates
        skip_duplicates = manager.skip_duplicate_check(server, tool_name)
        if not skip_duplicates:
            previous = state.results.get(key)
            if previous is not None:
                count = state.consecutive_duplicates + 1 if state.last_key == key else 1
                state.last_key, state.consecutive_duplicates = key, count
                if count >= self.config.duplicate_stop_after:
                    message = (
                        f"STOP. You have called the same tool {count + 1} times with identical "
                        f"arguments ('{name}'). The result will not change. Use the result you "
                        "already have, or do something else."
                    )
                else:
                    message = (
                        f"Tool '{name}' was already called with the same arguments. The previous "
                        "result is included; use it instead of calling again."
                    )
                return self._refuse(
                    name,
                    args,
                    ctx,
                    started,
                    "rejected_duplicate",
                    "duplicate_call",
                    message,
                    extra={"previous_result": previous},
                    same_tool=same,
                    duplicates=count,
                )
        state.last_key, state.consecutive_duplicates = key, 0

        # 7. permissions
        parts, pattern = manager.permission_parts(server, tool_name, args)
        decision, asking = manager.permissions.decide(parts, read_only=level <= AccessLevel.READ)
        permission: str = decision
        if decision == "ask":
            request = ApprovalRequest(
                tool=name,
                args=args,
                pattern=asking[0].store,
                patterns=tuple(p.store for p in asking),
                access=level,
                identity=ctx.identity,
                conversation_id=ctx.conversation_id,
                reason="no rule allows this call" if not asking[0].neutral else "a rule asks for this call",
            )
            answer = await manager.approve_tool_call(request)
            if answer is None:
                rules = ", ".join(f'"{p.store}"' for p in asking if p.understood)
                if all(p.understood for p in asking):
                    remedy = (
                        f"To allow it, add allow = [{rules}] under [permissions] in entropic-mcp.toml "
                        "(or answer 'always allow' when asked)."
                    )
                else:
                    remedy = (
                        "Part of it could not be fully analysed, so no rule can allow it: simplify the "
                        "call (e.g. plain commands instead of computed ones) or run it where a person can "
                        "approve it."
                    )
                return self._refuse(
                    name,
                    args,
                    ctx,
                    started,
                    "rejected_permission",
                    "permission_denied",
                    f"'{name}' needs approval and no approver is available. {remedy}",
                    same_tool=same,
                    permission="ask->deny",
                    pattern=pattern,
                )
            if answer.answer in ("always_allow", "always_deny"):
                manager.permissions.add(
                    "allow" if answer.answer == "always_allow" else "deny", [p.store for p in asking]
                )
            permission = "ask->" + ("allow" if answer.answer in ("allow_once", "always_allow") else "deny")
            if permission == "ask->deny":
                feedback = f" Feedback: {answer.feedback}" if answer.feedback else ""
                return self._refuse(
                    name,
                    args,
                    ctx,
                    started,
                    "rejected_permission",
                    "permission_denied",
                    f"The user denied '{name}'.{feedback} Do not retry it unchanged.",
                    extra={"feedback": answer.feedback} if answer.feedback else None,
                    same_tool=same,
                    permission=permission,
                    pattern=pattern,
                )
        elif decision == "deny":
            rules = ", ".join(p.store for p in asking) or name
            return self._refuse(
                name,
                args,
                ctx,
                started,
                "rejected_permission",
                "permission_denied",
                f"'{name}' is denied by the permission rules ({rules}). Do not retry it; choose another "
                "approach or ask the user to change [permissions].",
                same_tool=same,
                permission="deny",
                pattern=pattern,
            )

        # 8. dispatch
        timeout = self.config.tool_timeouts.get(name, server.default_timeout_seconds)
        try:
            if timeout is None:
                response = await server.execute(tool_name, args, ctx)
            else:
                ctx.deadline = time.monotonic() + timeout
                response = await _with_timeout(server.execute(tool_name, args, ctx), timeout)
        except TimeoutError:
            ctx.cancelled.set()
            extra: dict[str, Any] = {"timeout_seconds": timeout}
            if ctx.partial:
                extra["output"] = ctx.partial
            return self._refuse(
                name,
                args,
                ctx,
                started,
                "timeout",
                "timeout",
                f"'{name}' did not finish within {timeout:g} s and was cancelled. Narrow the request or "
                "raise the timeout in config.",
                extra=extra,
                same_tool=same,
                permission=permission,
                pattern=pattern,
                failure_key=key,
            )
        except BaseException as exc:
            if type(exc).__name__ != "CancelledError":
                raise
            ctx.cancelled.set()
            self._refuse(
                name,
                args,
                ctx,
                started,
                "cancelled",
                "cancelled",
                f"'{name}' was cancelled.",
                same_tool=same,
                permission=permission,
                pattern=pattern,
            )
            raise

        # 9. cap and classify
        text = cap_text(response.result, self.config.max_result_bytes)
        if text is not response.result:
            response = ServerResponse(result=text, directives=response.directives, is_error=response.is_error)
        kind = classify(response)
        if kind == "error":
            state.failures[key] = state.failures.get(key, 0) + 1
        else:
            state.failures.pop(key, None)
            if not skip_duplicates:
                state.results[key] = response.result
                if len(state.results) > MAX_CACHED_RESULTS:
                    state.results.popitem(last=False)
        if kind == "error" and response.result.startswith("{"):
            try:
                code = orjson.loads(response.result).get("error")
            except (orjson.JSONDecodeError, AttributeError):
                code = None
            if code == "timeout":
                kind = "timeout"
        return self._finish(
            name, args, ctx, started, kind, response, same_tool=same, permission=permission, pattern=pattern
        )

    def _refuse(
        self,
        name: str,
        args: Mapping[str, Any],
        ctx: CallContext,
        started: float,
        kind: str,
        code: str,
        message: str,
        *,
        same_tool: int = 0,
        duplicates: int = 0,
        permission: str | None = None,
        pattern: str | None = None,
        failure_key: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> CallOutcome:
        """End the call with ``{"error": code, "message": message, **extra}`` and the given kind."""
        return self._finish(
            name,
            args,
            ctx,
            started,
            kind,
            ServerResponse.refusal(code, message, **(extra or {})),
            same_tool=same_tool,
            duplicates=duplicates,
            permission=permission,
            pattern=pattern,
            failure_key=failure_key,
        )

    def _finish(
        self,
        name: str,
        args: Mapping[str, Any],
        ctx: CallContext,
        started: float,
        kind: str,
        response: ServerResponse,
        *,
        same_tool: int = 0,
        duplicates: int = 0,
        permission: str | None = None,
        pattern: str | None = None,
        failure_key: str | None = None,
    ) -> CallOutcome:
        if failure_key is not None:
            failures = self._state(ctx.conversation_id).failures
            failures[failure_key] = failures.get(failure_key, 0) + 1
        outcome = CallOutcome(
            name=name,
            response=response,
            kind=kind,
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
            conversation_id=ctx.conversation_id,
            identity=ctx.identity,
            args=args,
            permission=permission,
            pattern=pattern,
            consecutive_duplicates=duplicates,
            same_tool_calls=same_tool,
        )
        manager = self.manager
        if manager.has_after_hooks:
            text = manager.after_tool_call(
                ToolCall(name=name, server=name.partition(".")[0], tool=name.partition(".")[2], args=args, context=ctx),
                outcome,
            )
            if text is not None and text != response.result:
                outcome = attrs.evolve(
                    outcome,
                    response=ServerResponse(result=text, directives=response.directives, is_error=response.is_error),
                )
        self._history.append(outcome)
        counts = self.metrics.get(name)
        if counts is None:
            counts = self.metrics[name] = {}
        counts[kind] = counts.get(kind, 0) + 1
        manager.audit(outcome)
        return outcome


@attrs.frozen(kw_only=True)
class BatchOutcome:
    """A model turn's calls: what ran, what was left over, and whether the batch stopped early."""

    outcomes: tuple[CallOutcome, ...]
    surplus: tuple[str, ...] = ()
    stopped: str | None = None  # stop_processing | complete | duplicate_stop


DEFERRED = ("entropic.delegate", "entropic.pipeline")


def stops_batch(outcome: CallOutcome, stop_after: int) -> str | None:
    for directive in outcome.response.directives:
        if isinstance(directive, StopProcessing):
            return "stop_processing"
        if isinstance(directive, Complete):
            return "complete"
    if outcome.consecutive_duplicates >= stop_after:
        return "duplicate_stop"
    return None


def approval_from(value: object) -> ApprovalDecision | None:
    try:
        return ApprovalDecision.coerce(value)
    except (TypeError, ValueError) as exc:
        log.warning("ignored an approver's answer: %s", exc)
        return None


def before_result(value: object) -> Refuse | ReplaceArgs | None:
    return value if isinstance(value, (Refuse, ReplaceArgs)) else None


__all__ = ["KINDS", "BatchOutcome", "CallOutcome", "PermissionPart", "Pipeline", "dumps"]
