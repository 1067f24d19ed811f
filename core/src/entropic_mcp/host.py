"""A small reference host: drive a conversation with any model callable, delegations included.

The model is any callable ``model(messages, tools) -> turn`` (plain or ``async``), or a mapping
from identity to such a callable. A turn is an :class:`AssistantTurn`, a mapping
``{"content": str, "tool_calls": [{"name": ..., "arguments": {...}, "id": ...}]}`` (OpenAI's
``{"function": {"name", "arguments"}}`` shape is accepted too) or a plain string. Each turn's
tool calls run through ``ServerManager.execute_batch``; the directives they return go through the
manager's ``DirectiveProcessor`` (the built-in delegation handlers plus any plugin's). A
``delegate`` runs a child conversation under the target's identity, a ``pipeline`` runs one child
per stage, and a ``complete`` ends the conversation with its summary. Messages are saved to the
storage backend as they happen. For real models, :class:`OpenAICompatibleModel` (llama.cpp, vLLM,
Ollama, OpenAI) and :class:`AnthropicMessagesModel` are such callables (docs/host.md, "Real models").

Example::

    host = Host(manager, {"lead": lead_model, "researcher": researcher_model})
    result = host.run_sync("Find where retries are configured", identity="lead")
    print(result.status, result.summary)
"""

from __future__ import annotations

import inspect
import logging
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import orjson

from ._access import AccessLevel
from ._context import CallContext
from ._delegation import (
    Completion,
    DelegationStarted,
    DirectiveContext,
    PipelineStarted,
    finish_delegation,
    start_delegation,
)
from ._directives import (
    ClearSelfTodos,
    Complete,
    ContextAnchor,
    Directive,
    DirectiveProcessor,
    InjectContext,
    NotifyPresenter,
    PhaseChange,
    PruneMessages,
    TierChange,
)
from ._errors import StorageError
from ._host_models import (
    AnthropicMessagesModel,
    ModelError,
    OpenAICompatibleModel,
    TierModels,
    model_from_config,
    models_from_config,
)
from ._storage._records import DEFAULT_SCOPE

if TYPE_CHECKING:
    from ._manager import ServerManager
    from ._storage import StorageBackend

log = logging.getLogger("entropic_mcp.host")

Model = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Any]
Presenter = Callable[[str, Any], Any]

DEFAULT_SYSTEM = (
    "You are the '{identity}' tier. Work on the task with the tools you have. When you are done, call "
    "entropic.complete with a summary of what you found or did."
)
_UNSET: Any = object()


def estimate_tokens(message: Mapping[str, Any]) -> int:
    body = message.get("content") or ""
    text = body if isinstance(body, str) else orjson.dumps(body, default=str).decode()
    if message.get("tool_calls"):
        text += orjson.dumps(message["tool_calls"], default=str).decode()
    return math.ceil(len(text) / 4)


# -- what the model returns ------------------------------------------------------------------------


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


@attrs.frozen(kw_only=True)
class ToolCallRequest:
    """One tool call the model asked for; ``arguments`` as the model gave them (dict or JSON text)."""

    name: str = attrs.field(validator=attrs.validators.instance_of(str))
    arguments: Any = attrs.field(factory=dict)
    id: str = attrs.field(factory=_new_call_id)

    @classmethod
    def coerce(cls, value: object) -> ToolCallRequest:
        if isinstance(value, ToolCallRequest):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"a tool call is a mapping with 'name' and 'arguments', got {value!r}")
        function = value.get("function")
        source = function if isinstance(function, Mapping) else value
        name = source.get("name")
        if not isinstance(name, str) or not name:
            raise TypeError(f"a tool call needs a 'name', got {value!r}")
        arguments = source.get("arguments", source.get("args", {}))
        call_id = value.get("id")
        return cls(
            name=name, arguments=arguments, id=call_id if isinstance(call_id, str) and call_id else _new_call_id()
        )


@attrs.frozen(kw_only=True)
class AssistantTurn:
    """What the model said in one turn: text and the tool calls it wants run."""

    content: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = attrs.field(
        default=(), converter=lambda calls: tuple(ToolCallRequest.coerce(c) for c in calls or ())
    )

    @classmethod
    def coerce(cls, value: object) -> AssistantTurn:
        if isinstance(value, AssistantTurn):
            return value
        if isinstance(value, str):
            return cls(content=value)
        if isinstance(value, Mapping):
            content = value.get("content") or ""
            if not isinstance(content, str):
                content = orjson.dumps(content, default=str).decode()
            return cls(content=content, tool_calls=value.get("tool_calls") or ())
        raise TypeError(
            f"the model returned {type(value).__name__}; return an AssistantTurn, a mapping with 'content' "
            "and 'tool_calls', or a string"
        )


# -- what a run comes to ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DelegationResult:
    """One child conversation run for a ``delegate`` (or one pipeline stage)."""

    delegation_id: str
    child_conversation_id: str
    target: str
    task: str
    status: str  # completed | failed
    summary: str
    resume_from: str = ""
    persisted: bool = True
    result: RunResult | None = None


@attrs.frozen(kw_only=True)
class RunResult:
    """How a conversation ended.

    ``status``: ``completed`` (``entropic.complete`` was called), ``answered`` (the model
    replied without tool calls; its text is the summary) or ``max_turns``. A model or store that
    raises propagates out of ``run`` (a child's delegation record is marked ``failed`` first),
    except a child's :class:`ModelError` (its endpoint failed): that delegation is ``failed`` with
    the reason, and the parent reads it and goes on.
    """

    conversation_id: str
    identity: str
    status: str
    summary: str
    turns: int
    messages: tuple[dict[str, Any], ...] = ()
    delegations: tuple[DelegationResult, ...] = ()
    completion: Completion | None = None
    anchors: Mapping[str, str] = attrs.field(factory=dict)
    phase: str | None = None
    unhandled: tuple[Directive, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in ("completed", "answered")


#: Pinned anchors a conversation keeps (the oldest key goes first), and the size of each.
MAX_ANCHORS = 16
MAX_ANCHOR_CHARS = 16_384


@attrs.define
class _State:
    """One conversation in flight."""

    conversation_id: str
    identity: str
    delegation_id: str | None
    messages: list[dict[str, Any]]
    saved: int = 0
    anchors: dict[str, str] = attrs.field(factory=dict)
    phase: str | None = None
    completion: Completion | None = None
    delegations: list[DelegationResult] = attrs.field(factory=list)
    unhandled: list[Directive] = attrs.field(factory=list)
    errors: list[str] = attrs.field(factory=list)
    processor: DirectiveProcessor = attrs.field(factory=DirectiveProcessor)


def _check_scope(scope: object) -> str:
    if not isinstance(scope, str) or not scope.strip():
        raise ValueError(f"scope must be a non-empty string (a tenant: a project, a user, a team), got {scope!r}")
    return scope


# -- the host ----------------------------------------------------------------------------------------


class Host:
    """Runs conversations against a ServerManager with a model callable.

    Args:
        manager: the ServerManager whose tools the model uses.
        model: ``model(messages, tools) -> turn`` (plain or async), or a mapping from identity
            to such a callable (a child runs the callable of its target's identity).
        storage: where messages and delegation records go; defaults to ``manager.storage``
            (``None`` keeps everything in memory; ids are then fresh UUIDs).
        max_turns: the turn limit of a conversation (a delegation's own ``max_turns`` wins).
        max_depth: how deep delegations may nest (the root is depth 0).
        presenter: ``presenter(key, data)`` receives ``notify_presenter`` directives.
        system_prompt: the first message of every new conversation; ``{identity}`` is filled in.
        scope: the tenant the conversations belong to (a project, a user, a team: any non-empty
            string), unless a ``run`` names another; delegations take the scope of the
            conversation they are made from, and ``entropic.followup`` / ``resume_delegation``
            called in a conversation see only its scope's delegations. Only for a stored
            conversation: without storage there are no delegation records to separate.
    """

    def __init__(
        self,
        manager: ServerManager,
        model: Model | Mapping[str, Model],
        *,
        storage: StorageBackend | None = _UNSET,
        max_turns: int = 20,
        max_depth: int = 3,
        presenter: Presenter | None = None,
        system_prompt: str = DEFAULT_SYSTEM,
        scope: str = DEFAULT_SCOPE,
    ) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        _check_scope(scope)
        self.manager = manager
        self.model = model
        self.storage = manager.storage if storage is _UNSET else storage
        self.max_turns = max_turns
        self.max_depth = max_depth
        self.presenter = presenter
        self.system_prompt = system_prompt
        self.scope = scope

    # -- entry points ------------------------------------------------------------------------------

    async def run(
        self, task: str, *, identity: str = "lead", title: str | None = None, scope: str | None = None
    ) -> RunResult:
        """Run a root conversation on ``task`` as ``identity`` until it completes or runs out of turns.

        ``scope`` puts the conversation (and every delegation made in it) in that tenant's scope
        instead of the host's ``scope``.
        """
        scope = self.scope if scope is None else _check_scope(scope)
        if self.storage is not None:
            conversation_id = self.storage.create_conversation(title or task[:80], {"identity": identity}, scope)
        else:
            conversation_id = str(uuid.uuid4())
        return await self._conversation(
            conversation_id=conversation_id,
            identity=identity,
            task=task,
            seed=(),
            max_turns=self.max_turns,
            delegation_id=None,
            depth=0,
        )

    def run_sync(
        self, task: str, *, identity: str = "lead", title: str | None = None, scope: str | None = None
    ) -> RunResult:
        """``run`` for synchronous callers (runs its own event loop)."""

        async def main() -> RunResult:
            return await self.run(task, identity=identity, title=title, scope=scope)

        return anyio.run(main)

    # -- one conversation ---------------------------------------------------------------------------

    def _model_for(self, identity: str) -> Model:
        if isinstance(self.model, Mapping):
            model = self.model.get(identity)
            if model is None:
                raise KeyError(f"no model for identity {identity!r}; the host has models for: {', '.join(self.model)}")
            return model
        return self.model

    def _tools_for(self, identity: str) -> list[dict[str, Any]]:
        keys = self.manager.access_keys
        tools = self.manager.list_tools()
        if not keys.has_keys(identity):
            return tools
        return [t for t in tools if keys.level(identity, t["name"]) > AccessLevel.NONE]

    def _message(self, state: _State, role: str, content: str, **extra: Any) -> dict[str, Any]:
        message = {"role": role, "content": content, "identity": state.identity, **extra}
        message["tokens"] = estimate_tokens(message)
        state.messages.append(message)
        return message

    def _save(self, state: _State) -> None:
        if self.storage is not None and state.saved < len(state.messages):
            self.storage.save_messages(state.conversation_id, state.messages[state.saved :])
        state.saved = len(state.messages)

    async def _conversation(
        self,
        *,
        conversation_id: str,
        identity: str,
        task: str,
        seed: Sequence[Mapping[str, Any]],
        max_turns: int,
        delegation_id: str | None,
        depth: int,
    ) -> RunResult:
        state = _State(
            conversation_id=conversation_id,
            identity=identity,
            delegation_id=delegation_id,
            messages=[dict(m) for m in seed],
        )
        if not state.messages or state.messages[0].get("role") != "system":
            self._message(state, "system", self.system_prompt.format(identity=identity))
        self._message(state, "user", task)
        self._save(state)
        state.processor = self._processor(state)
        status, summary, turn = "max_turns", "", 0
        try:
            for turn in range(1, max_turns + 1):
                model = self._model_for(state.identity)
                value = model(self._view(state), self._tools_for(state.identity))
                if inspect.isawaitable(value):
                    value = await value
                reply = AssistantTurn.coerce(value)
                calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls]
                self._message(state, "assistant", reply.content, **({"tool_calls": calls} if calls else {}))
                if not reply.tool_calls:
                    status, summary = "answered", reply.content
                    break
                self._save(state)  # tools such as entropic.context_inspect read the conversation back
                await self._run_calls(state, reply.tool_calls, turn, depth)
                self._save(state)
                if state.completion is not None:
                    status, summary = "completed", state.completion.summary
                    break
            else:
                summary = f"stopped after {max_turns} turns without calling entropic.complete"
        finally:
            self._save(state)
            self.manager.end_conversation(conversation_id)
        return RunResult(
            conversation_id=conversation_id,
            identity=state.identity,
            status=status,
            summary=summary,
            turns=turn,
            messages=tuple(state.messages),
            delegations=tuple(state.delegations),
            completion=state.completion,
            anchors=dict(state.anchors),
            phase=state.phase,
            unhandled=tuple(state.unhandled),
            errors=tuple(state.errors),
        )

    def _view(self, state: _State) -> list[dict[str, Any]]:
        """What the model sees: the messages, with pinned anchors in the leading system message.

        Never a system message in the middle of the conversation (chat templates that require
        alternating roles reject it), and never a second copy of a page: an anchor whose content
        is still in view in a tool result is not repeated.
        """
        view = [dict(m) for m in state.messages]
        in_view = {m["content"] for m in state.messages if m.get("role") == "tool" and not m.get("pruned")}
        pinned = [(key, content) for key, content in state.anchors.items() if content not in in_view]
        if pinned:
            block = "Pinned context (the latest of each key):\n\n" + "\n\n".join(
                f"[{key}]\n{content}" for key, content in pinned
            )
            if view and view[0].get("role") == "system":
                view[0]["content"] = f"{view[0]['content']}\n\n{block}"
            else:
                view.insert(0, {"role": "system", "content": block})
        return view

    async def _run_calls(self, state: _State, calls: Sequence[ToolCallRequest], turn: int, depth: int) -> None:
        # execute_batch runs delegation last; its outcomes come back in that order.
        last = self.manager.runs_last
        ordered = [c for c in calls if not last(c.name)] + [c for c in calls if last(c.name)]
        # A model whose API spells tool names its own way (``tool_name``) reads errors in that spelling.
        spelling = getattr(self._model_for(state.identity), "tool_name", None)
        ctx = CallContext(
            conversation_id=state.conversation_id,
            identity=state.identity,
            iteration=turn,
            meta={"delegation_id": state.delegation_id} if state.delegation_id else {},
            tool_names=spelling if callable(spelling) else None,
        )
        batch = await self.manager.execute_batch([(c.name, c.arguments) for c in ordered], ctx)
        for index, call in enumerate(ordered):
            if index < len(batch.outcomes):
                response = batch.outcomes[index].response
                self._message(
                    state, "tool", response.result, tool_call_id=call.id, name=call.name, is_error=response.is_error
                )
            else:
                why = (
                    f"the turn stopped ({batch.stopped}) before this call"
                    if batch.stopped
                    else "more tool calls than [pipeline] max_tool_calls_per_turn allows in one turn"
                )
                self._message(
                    state,
                    "tool",
                    orjson.dumps(
                        {
                            "error": "not_run",
                            "message": f"Not run: {why}. Call it again in a later turn if it is still needed.",
                        }
                    ).decode(),
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=True,
                )
        for outcome in batch.outcomes:
            directives = outcome.response.directives
            if not directives:
                continue
            # No manager here: the handlers use this host's storage (None = ids only, nothing recorded).
            context = DirectiveContext(
                conversation_id=state.conversation_id,
                identity=state.identity,
                delegation_id=state.delegation_id,
                storage=self.storage,
            )
            try:
                result = state.processor.process(directives, context)
            except StorageError as exc:
                self._error(state, f"directives of {outcome.name} could not be carried out: {exc}")
                continue
            state.unhandled.extend(result.unhandled)
            for _, value in result.handled:
                if isinstance(value, DelegationStarted):
                    await self._delegate(state, value, depth)
                elif isinstance(value, PipelineStarted):
                    await self._pipeline(state, value, depth)
                elif isinstance(value, Completion):
                    state.completion = value
            if state.completion is None:
                for directive in directives:
                    if isinstance(directive, Complete):  # a host-replaced handler still ends the conversation
                        state.completion = Completion(
                            summary=directive.summary,
                            coverage_gap=directive.coverage_gap,
                            gap_description=directive.gap_description,
                            suggested_files=directive.suggested_files,
                        )

    def _error(self, state: _State, text: str) -> None:
        log.warning("conversation %s: %s", state.conversation_id, text)
        state.errors.append(text)
        self._message(state, "user", f"[host] {text}")

    # -- directives ------------------------------------------------------------------------------------

    def _processor(self, state: _State) -> DirectiveProcessor:
        """The manager's handlers, plus this host's own for what no plugin handles."""
        processor = self.manager.directive_processor()
        local: dict[str, Callable[[Any, Any], Any]] = {
            ContextAnchor.type: lambda d, _: self._anchor(state, d),
            PruneMessages.type: lambda d, _: self._prune(state, d),
            PhaseChange.type: lambda d, _: setattr(state, "phase", d.phase),
            NotifyPresenter.type: lambda d, _: self.presenter(d.key, d.data) if self.presenter else None,
            InjectContext.type: lambda d, _: self._message(state, d.role, d.content),
            TierChange.type: lambda d, _: setattr(state, "identity", d.tier),
            ClearSelfTodos.type: lambda d, _: self._clear_todos(state),
        }
        for name, handler in local.items():
            if name not in processor.handlers:
                processor.register(name, handler)
        return processor

    def _anchor(self, state: _State, directive: ContextAnchor) -> None:
        """One anchor per key, the latest wins; at most MAX_ANCHORS, each at most MAX_ANCHOR_CHARS."""
        state.anchors.pop(directive.key, None)  # re-inserted last: the oldest is evicted first
        if not directive.content:
            return
        content = directive.content
        if len(content) > MAX_ANCHOR_CHARS:
            content = content[:MAX_ANCHOR_CHARS] + f"\n[... pinned copy cut at {MAX_ANCHOR_CHARS} characters]"
        state.anchors[directive.key] = content
        while len(state.anchors) > MAX_ANCHORS:
            del state.anchors[next(iter(state.anchors))]

    def _prune(self, state: _State, directive: PruneMessages) -> int:
        tool_messages = [m for m in state.messages if m.get("role") == "tool" and not m.get("pruned")]
        old = tool_messages[: max(0, len(tool_messages) - directive.keep_recent)]
        if old and self.storage is not None:
            self.storage.save_snapshot(state.conversation_id, state.messages)
        for message in old:
            message["content"] = (
                f"[pruned: {len(message['content'])} characters of {message.get('name', 'tool')} output]"
            )
            message["pruned"] = True
            message["tokens"] = estimate_tokens(message)
        if directive.keep_recent == 0:
            state.anchors.clear()  # "keep nothing recent" removes the pinned copies too
        return len(old)

    def _clear_todos(self, state: _State) -> None:
        servers = {name.partition(".")[0] for name in self.manager.tools_with("todo")}
        self.manager.end_conversation(state.conversation_id, servers=servers)

    # -- children ----------------------------------------------------------------------------------------

    async def _child(self, started: DelegationStarted, depth: int) -> DelegationResult:
        if depth + 1 > self.max_depth:
            summary = f"not run: delegations nest at most {self.max_depth} deep in this host"
            finish_delegation(self.storage if started.persisted else None, started.delegation_id, "failed", summary)
            return _failed(started, summary)
        task = started.task
        if started.context:
            lines = [
                f"- {c['path']}"
                + (f" (lines {c['lines']})" if c.get("lines") else "")
                + (f": {c['note']}" if c.get("note") else "")
                for c in started.context
            ]
            task += "\n\nFiles:\n" + "\n".join(lines)
        storage = self.storage if started.persisted else None
        try:
            result = await self._conversation(
                conversation_id=started.child_conversation_id,
                identity=started.target,
                task=task,
                seed=started.seed_messages,
                max_turns=started.max_turns if started.max_turns > 0 else self.max_turns,
                delegation_id=started.delegation_id,
                depth=depth + 1,
            )
        except ModelError as exc:
            # A child's model endpoint failing is the parent's to handle (retry, another tier), not the run's end.
            summary = f"the '{started.target}' tier's model failed: {exc}"
            log.warning("delegation %s: %s", started.delegation_id, summary)
            finish_delegation(storage, started.delegation_id, "failed", summary)
            return _failed(started, summary)
        except BaseException as exc:
            # The record must not stay "running" when the child dies; the error still propagates.
            if storage is not None:
                try:
                    finish_delegation(
                        storage, started.delegation_id, "failed", f"the child raised {type(exc).__name__}: {exc}"
                    )
                except StorageError:
                    log.warning("could not mark delegation %s failed", started.delegation_id, exc_info=True)
            raise
        if result.status == "completed":
            if result.completion is not None and not result.completion.recorded and storage is not None:
                finish_delegation(storage, started.delegation_id, "completed", result.summary)
            status = "completed"
        elif result.status == "answered":
            finish_delegation(storage, started.delegation_id, "completed", result.summary)
            status = "completed"
        else:
            finish_delegation(storage, started.delegation_id, "failed", result.summary)
            status = "failed"
        return DelegationResult(
            delegation_id=started.delegation_id,
            child_conversation_id=started.child_conversation_id,
            target=started.target,
            task=started.task,
            status=status,
            summary=result.summary,
            resume_from=started.resume_from,
            persisted=started.persisted,
            result=result,
        )

    async def _delegate(self, state: _State, started: DelegationStarted, depth: int) -> None:
        done = await self._child(started, depth)
        state.delegations.append(done)
        self._message(
            state, "user", f"[delegation {done.delegation_id} to '{done.target}' {done.status}]\n{done.summary}"
        )

    async def _pipeline(self, state: _State, plan: PipelineStarted, depth: int) -> None:
        previous: DelegationResult | None = None
        for stage in plan.stages:
            task = (
                plan.task
                if previous is None
                else (f"{plan.task}\n\nOutput of the previous stage ('{previous.target}'):\n{previous.summary}")
            )
            try:
                started = start_delegation(
                    self.storage,
                    parent_id=state.conversation_id,
                    delegating_tier=plan.delegating_tier,
                    target=stage,
                    task=task,
                    context=plan.context,
                )
            except StorageError as exc:
                self._error(state, f"pipeline stage '{stage}' could not start: {exc}")
                return
            previous = await self._child(started, depth)
            state.delegations.append(previous)
            if previous.status != "completed":
                self._message(state, "user", f"[pipeline stopped at '{stage}': {previous.status}]\n{previous.summary}")
                return
        assert previous is not None
        self._message(state, "user", f"[pipeline {' -> '.join(plan.stages)} completed]\n{previous.summary}")


async def run_conversation(
    manager: ServerManager, model: Model | Mapping[str, Model], task: str, *, identity: str = "lead", **options: Any
) -> RunResult:
    """Run one root conversation with a fresh :class:`Host` (``options`` are Host's keyword arguments)."""
    return await Host(manager, model, **options).run(task, identity=identity)


__all__ = [
    "AnthropicMessagesModel",
    "AssistantTurn",
    "Completion",
    "DelegationResult",
    "DelegationStarted",
    "DirectiveContext",
    "Host",
    "Model",
    "ModelError",
    "OpenAICompatibleModel",
    "PipelineStarted",
    "RunResult",
    "TierModels",
    "ToolCallRequest",
    "finish_delegation",
    "model_from_config",
    "models_from_config",
    "run_conversation",
    "start_delegation",
]


def _failed(started: DelegationStarted, summary: str) -> DelegationResult:
    """The result of a child that failed before or instead of finishing its conversation."""
    return DelegationResult(
        delegation_id=started.delegation_id,
        child_conversation_id=started.child_conversation_id,
        target=started.target,
        task=started.task,
        status="failed",
        summary=summary,
        resume_from=started.resume_from,
        persisted=started.persisted,
    )
