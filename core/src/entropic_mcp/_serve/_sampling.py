"""Delegation under ``serve``: child conversations run through the client's ``sampling/createMessage``.

A ``delegate`` or ``pipeline`` directive answered by a tool (``entropic.delegate``, ``pipeline``,
``resume_delegation``) is carried out here when the client declared sampling: the child tier's
system prompt and task go to the client's model turn by turn, the tool calls it makes run
through the same pipeline as every call (under the child's identity: schema, access keys,
guards, rules, approvals), until it calls ``entropic.complete``, stops calling tools, or runs
out of turns or time. The records are the ones the reference host makes (``start_delegation``,
the child's messages, ``finish_delegation``); the parent's tool result is the child's summary
with the delegation id.

Handshake era (2025-06-18, 2025-11-25): one ``sampling/createMessage`` request per turn, tied
to the running ``tools/call``. 2026-07-28: servers send no requests, so each turn is an input
request inside an ``InputRequiredResult`` (``SamplingCall``, as approvals are asked).

A client without sampling sees the delegation tools only when it declares the directives
extension (``entropic-mcp/directives``, in ``capabilities.extensions`` or, before 2026-07-28,
``capabilities.experimental``) or the config opts in (``[servers.entropic] without_sampling =
"directives"``): it then gets today's directive and runs the child itself.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from .._access import AccessLevel
from .._context import CallContext
from .._delegation import (
    Completion,
    DelegationStarted,
    DirectiveContext,
    finish_delegation,
    start_delegation,
)
from .._directives import Delegate, Pipeline
from .._envelope import ServerResponse, dumps
from .._errors import StorageError
from .._pipeline import CallOutcome
from .._storage._records import DEFAULT_SCOPE
from ._approval import ANSWER_TIMEOUT, SuspendedCall, answer_from
from ._approval import input_required as approval_input_required

log = logging.getLogger("entropic_mcp.serve")

#: The capability key a client without sampling declares to receive the directives and run children itself.
DIRECTIVES_EXTENSION = "entropic-mcp/directives"
#: The key of a sampling turn inside ``inputRequests`` (2026-07-28).
SAMPLING_KEY = "entropic-mcp/sampling"
DEFAULT_SYSTEM = (
    "You are the '{identity}' tier. Work on the task with the tools you have. When you are done, call "
    "{complete} with a summary of what you found or did."
)
COMPLETE_TOOL = "entropic.complete"


class SamplingFailed(Exception):
    """The client did not answer a sampling request with a message (refused, errored, malformed)."""


# -- what the client declared ----------------------------------------------------------------------


def sampling_of(capabilities: Any) -> tuple[bool, bool]:
    """(the client declared sampling, it declared tools in sampling)."""
    sampling = getattr(capabilities, "sampling", None)
    if sampling is None:
        return False, False
    return True, getattr(sampling, "tools", None) is not None


def declares_directives(capabilities: Any) -> bool:
    """Whether the client declared the ``entropic-mcp/directives`` extension (it runs children itself)."""
    for field in ("extensions", "experimental"):
        table = getattr(capabilities, field, None)
        if isinstance(table, Mapping) and DIRECTIVES_EXTENSION in table:
            return True
    return False


# -- the two ways a turn reaches the client ----------------------------------------------------------


class SessionSampler:
    """Handshake era: a ``sampling/createMessage`` request tied to the running call."""

    def __init__(self, session: Any, request_id: Any, *, tools: bool) -> None:
        self.session = session
        self.request_id = request_id
        self.tools = tools

    async def create_message(self, params: dict[str, Any]) -> dict[str, Any]:
        from mcp.shared.message import ServerMessageMetadata
        from mcp_types import CreateMessageRequest, CreateMessageRequestParams, CreateMessageResultWithTools

        request = CreateMessageRequest(params=CreateMessageRequestParams.model_validate(params, by_name=False))
        try:
            result = await self.session.send_request(
                request,
                CreateMessageResultWithTools,
                metadata=ServerMessageMetadata(related_request_id=self.request_id),
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise SamplingFailed(_why(exc)) from None
        return dict(result.model_dump(by_alias=True, mode="json", exclude_none=True))


class SamplingCall(SuspendedCall):
    """2026-07-28: a suspended call that can also pause for one sampling turn.

    ``round`` resolves with the input request (a mapping) instead of an approval form; the
    client's retry carries the model's message under ``SAMPLING_KEY``.
    """

    def __init__(self, *, tools: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tools = tools
        self.sampling = False

    async def create_message(self, params: dict[str, Any]) -> dict[str, Any]:
        self.questions += 1  # a sampling turn is a round too: a later approval is not the first question
        self._answer = self.loop.create_future()
        self.sampling = True
        if not self.round.done():
            self.round.set_result({"method": "sampling/createMessage", "params": params})  # type: ignore[arg-type]
        try:
            answer = await asyncio.wait_for(self._answer, ANSWER_TIMEOUT)
        except TimeoutError:
            raise SamplingFailed(f"the client sent no model message within {ANSWER_TIMEOUT:g} s") from None
        finally:
            self.sampling = False
        if answer is None:
            raise SamplingFailed("the client's retry carried no answer to the sampling request")
        if not isinstance(answer, Mapping) or "content" not in answer:
            raise SamplingFailed(f"the client answered the sampling request with {str(answer)[:200]!r}")
        return dict(answer)


def input_required(asked: Any, state: str) -> dict[str, Any]:
    """The ``InputRequiredResult`` for what a suspended call waits on: a sampling turn or a question."""
    if isinstance(asked, Mapping):
        return {"resultType": "input_required", "inputRequests": {SAMPLING_KEY: dict(asked)}, "requestState": state}
    return approval_input_required(asked, state)


def answer_for(call: Any, input_responses: Mapping[str, Any] | None) -> Any:
    """What a retried call carries for the question it waits on (the model's message, or an approval)."""
    if not getattr(call, "sampling", False):
        return answer_from(input_responses)
    response = (input_responses or {}).get(SAMPLING_KEY)
    if response is None:
        return None
    if hasattr(response, "model_dump"):
        return response.model_dump(by_alias=True, mode="json", exclude_none=True)
    return response


def _why(exc: BaseException) -> str:
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None) or str(exc) or type(exc).__name__
    code = getattr(error, "code", None)
    return f"{message} (error {code})" if code is not None else message


# -- the stored conversation and the sampling view ---------------------------------------------------


def _text_blocks(content: Any) -> list[Mapping[str, Any]]:
    blocks = content if isinstance(content, list) else [content]
    return [b for b in blocks if isinstance(b, Mapping)]


def sampling_messages(messages: Sequence[Mapping[str, Any]], exposed: Callable[[str], str]) -> list[dict[str, Any]]:
    """Stored messages (the reference host's shape) as ``SamplingMessage`` wire objects.

    System messages travel as ``systemPrompt``; tool results go, all of one turn together, in
    one user message holding only ``tool_result`` blocks (what MCP requires after ``tool_use``).
    """
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush() -> None:
        if results:
            out.append({"role": "user", "content": list(results)})
            results.clear()

    for message in messages:
        role = message.get("role")
        content = message.get("content") or ""
        text = content if isinstance(content, str) else dumps(content)
        if role == "tool":
            results.append(
                {
                    "type": "tool_result",
                    "toolUseId": str(message.get("tool_call_id") or ""),
                    "content": [{"type": "text", "text": text}],
                    "isError": bool(message.get("is_error")),
                }
            )
            continue
        flush()
        if role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for call in message.get("tool_calls") or ():
                arguments = call.get("arguments")
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id") or ""),
                        "name": exposed(str(call.get("name") or "")),
                        "input": dict(arguments) if isinstance(arguments, Mapping) else {"arguments": arguments},
                    }
                )
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})
        elif role == "user":
            out.append({"role": "user", "content": {"type": "text", "text": text}})
    flush()
    return out


def _estimate(message: Mapping[str, Any]) -> int:
    text = str(message.get("content") or "") + (dumps(message["tool_calls"]) if message.get("tool_calls") else "")
    return -(-len(text) // 4)


@attrs.define
class _Child:
    """One child conversation in flight (messages in the reference host's stored shape)."""

    started: DelegationStarted
    messages: list[dict[str, Any]]
    saved: int = 0
    turns: int = 0
    last_tool: str = ""


@attrs.frozen(kw_only=True)
class ChildOutcome:
    """How one child ended: ``completed``, ``answered``, ``max_turns``, ``deadline``, ``failed``."""

    delegation_id: str
    target: str
    status: str
    summary: str
    turns: int

    @property
    def ok(self) -> bool:
        return self.status in ("completed", "answered")

    def to_dict(self) -> dict[str, Any]:
        return {
            "delegation_id": self.delegation_id,
            "target": self.target,
            "status": "completed" if self.ok else self.status,
            "turns": self.turns,
            "summary": self.summary,
        }


class Delegations:
    """Carries out the delegation directives of one ``serve`` process through the client's sampling.

    Args:
        manager: the ServerManager (its pipeline runs every child tool call).
        exposed: a tool's internal name as the client knows it; ``internal`` the reverse.
    """

    def __init__(self, manager: Any, exposed: Callable[[str], str], internal: Callable[[str], str | None]) -> None:
        self.manager = manager
        self.exposed = exposed
        self.internal = internal
        self.tools = frozenset(manager.tools_with("delegate"))
        # Tools that act on a conversation only a directive-running host holds (prune_context): a child
        # run here has nobody to carry their directives out, so it is not offered them.
        self.host_only = frozenset(manager.tools_with("host_context"))
        self.plan: Mapping[str, Any] = {}
        for name in sorted(self.tools):
            server = manager.servers.get(name.partition(".")[0])
            plan = getattr(server, "sampling_plan", None)
            if callable(plan):
                self.plan = plan()
                break
        #: A client's conversation key -> the stored conversation its delegations hang from.
        self.parents: dict[str, str] = {}

    # -- listing and the decision to run ------------------------------------------------------------

    def listed(self, capabilities: Any) -> bool:
        """Whether this client is shown the delegation tools."""
        return (
            sampling_of(capabilities)[0]
            or declares_directives(capabilities)
            or self.plan.get("without_sampling") == "directives"
        )

    def wants(self, name: str, capabilities: Any) -> bool:
        """Whether a call of ``name`` by this client is run here (through sampling)."""
        return name in self.tools and sampling_of(capabilities)[0]

    def refusal(self, outcome: CallOutcome) -> CallOutcome:
        """A delegation tool called by a client that can neither sample nor run directives."""
        return _replace(
            outcome,
            {
                "error": "sampling_unsupported",
                "message": (
                    f"'{self.exposed(outcome.name)}' needs a client that supports MCP sampling (the server runs the "
                    "child tier's conversation through your model) or one that declares the "
                    f"'{DIRECTIVES_EXTENSION}' extension and runs it itself. This client declares neither: do the "
                    "work yourself with the other tools."
                ),
            },
            error=True,
        )

    # -- carrying out one call's directives ----------------------------------------------------------

    async def carry_out(self, outcome: CallOutcome, ctx: CallContext, sampler: Any) -> CallOutcome:
        """The parent's result once the directive's children ran (the outcome itself when there is none)."""
        if outcome.response.is_error:
            return outcome
        directive = next((d for d in outcome.response.directives if isinstance(d, (Delegate, Pipeline))), None)
        if directive is None:
            return outcome
        deadline = time.monotonic() + float(self.plan.get("deadline", 600.0))
        try:
            storage = self.manager.storage
            parent = self._parent(storage, ctx)
        except StorageError as exc:
            return _replace(outcome, _storage_error(exc), error=True)
        delegating = ctx.identity or "host"
        if isinstance(directive, Delegate):
            try:
                started = start_delegation(
                    storage,
                    parent_id=parent,
                    delegating_tier=delegating,
                    target=directive.target,
                    task=directive.task,
                    max_turns=directive.max_turns,
                    context=directive.context,
                    resume_from=directive.resume_from,
                )
            except StorageError as exc:
                return _replace(outcome, _storage_error(exc), error=True)
            done = await self._child(started, sampler, ctx, deadline, 0, 1)
            return _replace(outcome, _child_result(done, directive.resume_from), error=not done.ok)
        stages: list[ChildOutcome] = []
        previous: ChildOutcome | None = None
        for index, stage in enumerate(directive.stages):
            task = directive.task
            if previous is not None:
                task += f"\n\nOutput of the previous stage ('{previous.target}'):\n{previous.summary}"
            try:
                started = start_delegation(
                    storage,
                    parent_id=parent,
                    delegating_tier=delegating,
                    target=stage,
                    task=task,
                    context=directive.context,
                )
            except StorageError as exc:
                return _replace(outcome, _storage_error(exc), error=True)
            previous = await self._child(started, sampler, ctx, deadline, index, len(directive.stages))
            stages.append(previous)
            if not previous.ok:
                break
        assert previous is not None
        body: dict[str, Any] = {
            "status": "completed" if previous.ok else "failed",
            "stages": [s.to_dict() for s in stages],
            "summary": previous.summary,
        }
        if not previous.ok:
            body["error"] = "pipeline_stopped"
            body["message"] = (
                f"The pipeline stopped at stage '{previous.target}' ({previous.status}): {previous.summary} "
                "Stages after it did not run; resume it with entropic.resume_delegation "
                f'{{"delegation_id": "{previous.delegation_id}"}} or do the rest yourself.'
            )
        return _replace(outcome, body, error=not previous.ok)

    def _parent(self, storage: Any, ctx: CallContext) -> str:
        """The stored conversation a client's delegations hang from (made on first use)."""
        key = ctx.conversation_id
        if storage is None:
            return key
        if storage.scope_of(key) is not None:
            return key
        known = self.parents.get(key)
        if known is None:
            known = storage.create_conversation(
                f"serve conversation {key}"[:120],
                {"identity": ctx.identity or "host", "serve_conversation": key},
                ctx.scope or DEFAULT_SCOPE,  # under [auth], the caller's own: their delegations stay theirs
            )
            self.parents[key] = known
        return known

    # -- one child --------------------------------------------------------------------------------------

    def profile(self, tier: str) -> Mapping[str, Any]:
        return (self.plan.get("tiers") or {}).get(tier) or {}

    def child_tools(self, identity: str, profile: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The tools a child is offered: its access keys allow them, its profile names them, no delegation."""
        keys = self.manager.access_keys
        subset = tuple(profile.get("tools") or ())
        offered = []
        for tool in self.manager.list_tools():
            name = tool["name"]
            if name in self.tools or name in self.host_only:
                continue  # children do not delegate further under serve
            if keys.has_keys(identity) and keys.level(identity, name) <= AccessLevel.NONE:
                continue
            if subset and name != COMPLETE_TOOL and not any(fnmatch.fnmatchcase(name, p) for p in subset):
                continue
            offered.append(
                {
                    "name": self.exposed(name),
                    "description": tool.get("description", ""),
                    "inputSchema": tool["inputSchema"],
                }
            )
        return offered

    def _save(self, storage: Any, child: _Child) -> None:
        if storage is not None and child.saved < len(child.messages):
            storage.save_messages(child.started.child_conversation_id, child.messages[child.saved :])
        child.saved = len(child.messages)

    def _message(self, child: _Child, role: str, content: str, **extra: Any) -> None:
        message = {"role": role, "content": content, "identity": child.started.target, **extra}
        message["tokens"] = _estimate(message)
        child.messages.append(message)

    async def _child(
        self, started: DelegationStarted, sampler: Any, ctx: CallContext, deadline: float, stage: int, stages: int
    ) -> ChildOutcome:
        storage = self.manager.storage if started.persisted else None
        child = _Child(started=started, messages=[dict(m) for m in started.seed_messages])
        try:
            status, summary = await self._turns(child, sampler, ctx, deadline, stage, stages, storage)
        except asyncio.CancelledError:
            self._end(storage, child, "failed", "cancelled: the parent's tool call was cancelled while this child ran")
            raise
        except Exception as exc:
            # A store or tool layer that broke mid-child: the parent is told, never a traceback.
            log.warning("delegation %s failed", started.delegation_id, exc_info=True)
            status, summary = "failed", f"the child's run failed: {type(exc).__name__}: {exc}"
        except BaseException as exc:
            self._end(storage, child, "failed", f"the child's run was stopped: {type(exc).__name__}")
            raise
        if status != "completed":
            self._end(storage, child, "completed" if status == "answered" else "failed", summary)
        else:
            self._end(storage, child, None, summary)
        return ChildOutcome(
            delegation_id=started.delegation_id,
            target=started.target,
            status=status,
            summary=summary,
            turns=child.turns,
        )

    def _end(self, storage: Any, child: _Child, status: str | None, summary: str) -> None:
        """Save what is unsaved and close the record (``None``: ``entropic.complete`` closed it)."""
        try:
            self._save(storage, child)
            if status is not None:
                finish_delegation(storage, child.started.delegation_id, status, summary)
        except StorageError:
            log.warning("could not record how delegation %s ended", child.started.delegation_id, exc_info=True)
        finally:
            self.manager.end_conversation(child.started.child_conversation_id)

    async def _turns(
        self,
        child: _Child,
        sampler: Any,
        ctx: CallContext,
        deadline: float,
        stage: int,
        stages: int,
        storage: Any,
    ) -> tuple[str, str]:
        started = child.started
        target = started.target
        profile = self.profile(target)
        max_turns = started.max_turns if started.max_turns > 0 else int(profile.get("max_turns") or 20)
        tools = self.child_tools(target, profile) if getattr(sampler, "tools", False) else []
        if not child.messages or child.messages[0].get("role") != "system":
            prompt = profile.get("system_prompt") or DEFAULT_SYSTEM
            system = prompt.replace("{identity}", target).replace("{complete}", self.exposed(COMPLETE_TOOL))
            child.messages.insert(0, {"role": "system", "content": system, "identity": target})
        task = started.task
        if started.context:
            task += "\n\nFiles:\n" + "\n".join(
                f"- {c['path']}"
                + (f" (lines {c['lines']})" if c.get("lines") else "")
                + (f": {c['note']}" if c.get("note") else "")
                for c in started.context
            )
        self._message(child, "user", task)
        self._save(storage, child)
        preferences: dict[str, Any] = {}
        if profile.get("model_hints"):
            preferences["hints"] = [{"name": hint} for hint in profile["model_hints"]]
        for key, value in (profile.get("priorities") or {}).items():
            preferences[f"{key}Priority"] = value
        where = f"stage {stage + 1} of {stages}, " if stages > 1 else ""
        for turn in range(1, max_turns + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "deadline", self._stopped(child, "the delegation deadline passed")
            last = f", last tool {self.exposed(child.last_tool)}" if child.last_tool else ""
            ctx.report_progress(turn - 1, max_turns, f"{target}: {where}turn {turn} of {max_turns}{last}")
            params: dict[str, Any] = {
                "messages": sampling_messages(child.messages[1:], self.exposed),
                "systemPrompt": child.messages[0]["content"],
                "maxTokens": int(profile.get("max_tokens") or 4096),
                "metadata": {"entropic-mcp/delegation": started.delegation_id, "entropic-mcp/tier": target},
            }
            if preferences:
                params["modelPreferences"] = preferences
            if tools:
                params["tools"] = tools
                params["toolChoice"] = {"mode": "auto"}
            try:
                reply = await asyncio.wait_for(sampler.create_message(params), remaining)
            except TimeoutError:
                return "deadline", self._stopped(child, "the delegation deadline passed waiting for the model")
            except SamplingFailed as exc:
                return "failed", f"the client did not run the sampling request for '{target}': {exc}"
            child.turns = turn
            text, calls = _reply(reply)
            self._message(child, "assistant", text, **({"tool_calls": calls} if calls else {}))
            if not calls:
                return "answered", text or f"'{target}' ended without a summary"
            self._save(storage, child)
            try:
                completion = await self._calls(child, calls, turn, storage, deadline)
            except TimeoutError:
                return "deadline", self._stopped(child, "the delegation deadline passed while its tools ran")
            self._save(storage, child)
            if completion is not None:
                return "completed", completion
        return "max_turns", self._stopped(
            child, f"it reached max_turns ({max_turns}) without calling entropic.complete"
        )

    def _stopped(self, child: _Child, why: str) -> str:
        said = next(
            (m["content"] for m in reversed(child.messages) if m.get("role") == "assistant" and m["content"]), ""
        )
        return f"'{child.started.target}' stopped: {why}." + (f" Its last words: {said}" if said else "")

    async def _calls(
        self, child: _Child, calls: list[dict[str, Any]], turn: int, storage: Any, deadline: float
    ) -> str | None:
        started = child.started
        names = [self.internal(c["name"]) or c["name"] for c in calls]
        for call, name in zip(calls, names, strict=True):
            call["name"] = name
        # Not offered to a child, and not run for one by name either: nobody here would carry out
        # a delegate or prune directive a child's call returned.
        for call in calls:
            if call["name"] in self.tools or call["name"] in self.host_only:
                message = (
                    f"'{self.exposed(call['name'])}' is not available to a delegated tier under serve (its directive "
                    f"would not be carried out). Do the work with your other tools, then call {self.exposed(COMPLETE_TOOL)}."
                )
                self._message(
                    child,
                    "tool",
                    dumps({"error": "not_available", "message": message}),
                    tool_call_id=call["id"],
                    name=call["name"],
                    is_error=True,
                )
        calls = [c for c in calls if c["name"] not in self.tools and c["name"] not in self.host_only]
        last = self.manager.runs_last
        ordered = [c for c in calls if not last(c["name"])] + [c for c in calls if last(c["name"])]
        if not ordered:
            return None
        ctx = CallContext(
            conversation_id=started.child_conversation_id,
            identity=started.target,
            iteration=turn,
            meta={"delegation_id": started.delegation_id},
            tool_names=self.exposed,
        )
        batch = await asyncio.wait_for(
            self.manager.execute_batch([(c["name"], c["arguments"]) for c in ordered], ctx),
            max(0.001, deadline - time.monotonic()),
        )
        completion: str | None = None
        for index, call in enumerate(ordered):
            child.last_tool = call["name"]
            if index < len(batch.outcomes):
                response = batch.outcomes[index].response
                text = response.result
                is_error = response.is_error
            else:
                why = f"the turn stopped ({batch.stopped}) before this call" if batch.stopped else "too many calls"
                text = dumps({"error": "not_run", "message": f"Not run: {why}. Call it again in a later turn."})
                is_error = True
            self._message(child, "tool", text, tool_call_id=call["id"], name=call["name"], is_error=is_error)
        processor = self.manager.directive_processor()
        context = DirectiveContext(
            conversation_id=started.child_conversation_id,
            identity=started.target,
            delegation_id=started.delegation_id,
            storage=storage,
        )
        for outcome in batch.outcomes:
            if outcome.response.is_error or not outcome.response.directives:
                continue
            try:
                result = processor.process(outcome.response.directives, context)
            except StorageError as exc:
                self._message(child, "user", f"[host] the directives of {outcome.name} could not be recorded: {exc}")
                continue
            for _, value in result.handled:
                if isinstance(value, Completion):
                    completion = value.summary
                    if not value.recorded and storage is not None:
                        finish_delegation(storage, started.delegation_id, "completed", value.summary)
        return completion


def _reply(result: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The text and the tool calls of a ``CreateMessageResult`` (content a block or a list of blocks)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in _text_blocks(result.get("content")):
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            arguments = block.get("input")
            calls.append(
                {
                    "id": str(block.get("id") or f"call_{len(calls)}"),
                    "name": str(block.get("name") or ""),
                    "arguments": arguments if arguments is not None else {},
                }
            )
    return "\n".join(t for t in texts if t), calls


def _child_result(done: ChildOutcome, resume_from: str) -> dict[str, Any]:
    body = done.to_dict()
    if resume_from:
        body["resumed_from"] = resume_from
    if done.ok:
        return body
    codes = {"max_turns": "delegation_max_turns", "deadline": "delegation_deadline"}
    body["error"] = codes.get(done.status, "delegation_failed")
    body["message"] = (
        f"The delegation to '{done.target}' did not complete ({done.status}): {done.summary} The record "
        f"'{done.delegation_id}' is marked failed; continue it with entropic.resume_delegation "
        f'{{"delegation_id": "{done.delegation_id}", "task": ...}}, or do the work yourself.'
    )
    return body


def _storage_error(exc: StorageError) -> dict[str, Any]:
    return {
        "error": "storage_unavailable",
        "message": f"the delegation could not be recorded: {exc}. Fix [storage] in entropic-mcp.toml, or do the work "
        "yourself.",
    }


def _replace(outcome: CallOutcome, body: Mapping[str, Any], *, error: bool) -> CallOutcome:
    response = ServerResponse(result=dumps(dict(body)), is_error=error, structured=dict(body))
    return attrs.evolve(outcome, response=response, kind="error" if error else "ok")
