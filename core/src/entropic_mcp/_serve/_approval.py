""" "ask" decisions answered by the client's user through the protocol's input-request mechanism.

Handshake era (2025-06-18, 2025-11-25): an ``elicitation/create`` request to the client in the
middle of the call. 2026-07-28: servers may not send requests, so the call is suspended and the
``tools/call`` answers an ``InputRequiredResult`` carrying the elicitation; the client's retry
(with ``inputResponses`` and the echoed ``requestState``) resumes the same call. A client that did
not declare elicitation gets no question: the approver answers None and the pipeline refuses the
call naming the rule that would allow it.

Two questions are asked this way: the approval of a tool call (``entropic_mcp_approve_tool_call``)
and, for a tool running in a worker thread, the approval of one path outside the project root
(``entropic_mcp_approve_outside_root``, a synchronous hook: the thread waits while the event loop
asks).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from .._calls import Answer as Choice
from .._calls import ApprovalDecision, ApprovalRequest, OutsideRootRequest
from .._envelope import dumps
from .._plugins import hookimpl

log = logging.getLogger("entropic_mcp.serve")

#: Seconds a suspended 2026-07-28 call waits for the client's answer before it is refused.
ANSWER_TIMEOUT = 600.0
#: The key of our one input request inside ``inputRequests``.
INPUT_KEY = "entropic-mcp/approval"

DECISIONS = ("allow_once", "always_allow", "deny_once", "always_deny")
ONCE_DECISIONS = ("allow_once", "deny_once")

#: Where each person's "always" answers are kept in the store (``[auth]``; one document per subject).
PERSONAL_NAMESPACE = "serve.always"
#: The document of the answers given without a subject, on a store several workers share.
PROJECT_OWNER = "\x1fproject"  # no subject a token carries is unprintable

#: Paused 2026-07-28 calls any worker on a shared store can resume (one document per request state).
PAUSED_NAMESPACE = "serve.paused"
#: The deployment's request-state key, when neither ``[serve] state_key`` nor the environment gives one.
KEY_NAMESPACE = "serve.keys"
STATE_KEY_ENV = "ENTROPIC_MCP_STATE_KEY"
#: The start of a tool-call approval's message: the only question asked before anything ran.
APPROVAL_MESSAGE = "Allow the tool call "

#: The channel of the ``tools/call`` being served in this task (None: nobody to ask).
CURRENT: ContextVar[Any] = ContextVar("entropic_mcp_serve_channel", default=None)

#: An elicitation form: (message, requested schema).
Form = tuple[str, dict[str, Any]]
#: A user's answer to a form: (action, content).
Answer = tuple[Any, Any]


def _decision_form(description: str, choices: tuple[str, ...], default: str) -> dict[str, Any]:
    """A form with one required ``decision`` among ``choices``."""
    return {
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": description,
                "enum": list(choices),
                "default": default,
            }
        },
        "required": ["decision"],
    }


def question(request: ApprovalRequest) -> Form:
    """The message and form schema shown to the user."""
    args = dumps(dict(request.args))
    if len(args) > 600:
        args = args[:600] + " …"
    message = f"Allow the tool call {request.tool} ({request.reason})?\nArguments: {args}"
    if request.always:
        message += f"\n'always' stores the rule: {', '.join(request.patterns or (request.pattern,))}"
    feedback = {
        "type": "string",
        "title": "Feedback for the model",
        "description": "optional; shown to the model with a denial",
    }
    # "always" is offered only where the stored rule would take effect (an explicit ask rule or a
    # part that could not be analysed would still ask next time).
    if request.always:
        schema = _decision_form("allow or deny this call once, or store a rule (always)", DECISIONS, "allow_once")
    else:
        schema = _decision_form("allow or deny this call (once)", ONCE_DECISIONS, "allow_once")
    schema["properties"]["feedback"] = feedback
    return message, schema


OUTSIDE_DECISIONS = ("allow_once", "deny_once")


def outside_root_question(request: OutsideRootRequest) -> Form:
    """The message and form schema for one path outside the project root (this call only)."""
    message = (
        f"The tool {request.tool} wants to {request.access} {request.path}, outside the project root "
        f"{request.root}. Allow it for this call?\n"
        "To allow such paths for good, list them in outside_root_allow of the server's config table."
    )
    schema = _decision_form("allow or deny this path for this call", OUTSIDE_DECISIONS, "deny_once")
    return message, schema


def outside_root_answer(answer: Answer | None) -> bool | None:
    """An elicitation answer as the hook's tri-state: decline and cancel reject."""
    if answer is None:
        return None
    action, content = answer
    if action == "accept" and isinstance(content, Mapping):
        decision = content.get("decision")
        return {"allow_once": True, "deny_once": False}.get(decision) if isinstance(decision, str) else None
    if action in ("decline", "cancel"):
        return False
    return None


def decision_from(action: object, content: object) -> ApprovalDecision | None:
    """An elicitation answer as an approval; decline and cancel deny once."""
    if action == "accept" and isinstance(content, Mapping):
        answer = content.get("decision")
        feedback = content.get("feedback")
        if answer in DECISIONS:
            return ApprovalDecision(answer=answer, feedback=feedback if isinstance(feedback, str) else "")
        return None
    if action == "decline":
        return ApprovalDecision(answer="deny_once", feedback="The user declined the approval request.")
    if action == "cancel":
        return ApprovalDecision(answer="deny_once", dismissed=True)
    return None


def supports_elicitation(capabilities: Any) -> bool:
    """Whether the client declared form elicitation (an empty ``elicitation`` object means form)."""
    elicitation = getattr(capabilities, "elicitation", None)
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


class ElicitingChannel:
    """Handshake era: ask with an ``elicitation/create`` request tied to the running call."""

    def __init__(self, session: Any, request_id: Any) -> None:
        self.session = session
        self.request_id = request_id
        self.loop = asyncio.get_running_loop()
        self.pending: set[concurrent.futures.Future[Any]] = set()

    async def elicit(self, form: Form) -> Answer | None:
        message, schema = form
        try:
            result = await self.session.elicit_form(message, schema, related_request_id=self.request_id)
        except Exception as exc:
            log.warning("could not ask the client: %s", exc)
            return None
        return result.action, result.content

    def close(self) -> None:
        """The call is over: questions asked from its worker thread are abandoned."""
        for future in list(self.pending):
            future.cancel()


class SuspendedCall:
    """2026-07-28: a call running in its own task that can pause for the client's answer.

    ``round`` is the future the request now waiting on the call awaits: it resolves with an
    ``ApprovalRequest`` when the call needs an answer, or with None when the call is done.
    """

    def __init__(self, *, name: str, arguments: Any, conversation: str) -> None:
        self.name = name
        self.arguments = arguments
        self.conversation = conversation
        self.task: asyncio.Task[Any] | None = None
        self.loop = asyncio.get_running_loop()
        self.round: asyncio.Future[Form | None] = self.loop.create_future()
        self._answer: asyncio.Future[Answer | None] | None = None
        self.relay: Any = None
        self.pending: set[concurrent.futures.Future[Any]] = set()
        #: Questions this call asked so far; ``preanswer``: the answer given on another worker
        #: to its first question (a call resumed from the store runs again from the start).
        self.questions = 0
        self.preanswer: tuple[str, Answer | None] | None = None
        #: Whether its pause is kept in the store (then the call is not kept waiting here: the
        #: worker the answer reaches runs it again from the store's copy).
        self.stored = False
        #: Whether its current question is kept in the store for another worker to hand the
        #: answer over (a question asked mid-call: _relay.py).
        self.relayed = False

    def start(self, coroutine: Any) -> None:
        self.task = asyncio.get_running_loop().create_task(coroutine)
        self.task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        if not self.round.done():
            self.round.set_result(None)
        if self._answer is not None and not self._answer.done():
            self._answer.cancel()
        for future in list(self.pending):
            future.cancel()

    def next_round(self) -> asyncio.Future[Form | None]:
        self.round = asyncio.get_running_loop().create_future()
        if self.task is not None and self.task.done():
            self.round.set_result(None)
        return self.round

    def answer(self, answer: Answer | None) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(answer)

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
        for future in list(self.pending):
            future.cancel()

    async def elicit(self, form: Form) -> Answer | None:
        self.questions += 1
        if self.preanswer is not None:
            message, answer = self.preanswer
            self.preanswer = None
            if form[0] == message:
                return answer
        self._answer = self.loop.create_future()
        if not self.round.done():
            self.round.set_result(form)
        try:
            return await asyncio.wait_for(self._answer, ANSWER_TIMEOUT)
        except TimeoutError:
            log.warning("no answer within %g s; refused", ANSWER_TIMEOUT)
            return None


class PausedCalls:
    """2026-07-28 paused calls kept in a store shared by every worker of a deployment.

    The request state is ``<nonce>.<mac>``: an HMAC-SHA256 over the nonce, tool and conversation
    with the deployment's key (``[serve] state_key``, else ``ENTROPIC_MCP_STATE_KEY``, else one
    kept in the store under ``serve.keys``). A call paused at its tool-call approval (nothing has
    run yet) is kept in the store (``serve.paused``, one document per nonce), so the retry
    carrying the answer can reach any worker, which runs it again from the start with that answer
    to the same question. Each state is used
    once (a version-guarded delete decides which retry gets it).

    Such a call is not kept waiting on the worker that asked (serve cancels it there, before
    anything ran, so nothing is audited twice): every worker, that one included, runs it again.
    """

    def __init__(self, store: Callable[[], Any], key: str = "") -> None:
        self._store = store
        self._key = key.encode() if key else None

    def _state_store(self) -> Any:
        from .._storage import StateStore

        store = self._store()
        return store if isinstance(store, StateStore) else None

    def key(self) -> bytes:
        """The deployment's key: configured, from the environment, or shared through the store."""
        if self._key is None:
            from .._errors import StateConflict
            from .._storage._update import UNCHANGED, update_document

            env = os.environ.get(STATE_KEY_ENV, "")
            if env:
                self._key = env.encode()
                return self._key
            store = self._state_store()
            if store is None:
                self._key = secrets.token_bytes(32)  # one process: its own key, as before
                return self._key

            def agree(stored: Any) -> Any:  # another worker's key stored first: use theirs
                return UNCHANGED if isinstance(stored, str) and stored else secrets.token_hex(32)

            try:
                value, _ = update_document(store, KEY_NAMESPACE, "request-state", agree)
            except StateConflict as exc:
                raise RuntimeError(f"could not agree on a request-state key through the store: {exc}") from None
            self._key = value.encode()
        return self._key

    def _mac(self, nonce: str, name: str, conversation: str) -> str:
        text = f"{nonce}\x00{name}\x00{conversation}".encode()
        return hmac.new(self.key(), text, hashlib.sha256).hexdigest()[:32]

    def pause(self, name: str, arguments: Any, conversation: str, form: Form | None) -> tuple[str, bool]:
        """A signed request state, and whether the call is kept in the store for any worker to
        resume (only with ``form``: the call's first question, a tool-call approval)."""
        nonce = secrets.token_urlsafe(18)
        state = f"{nonce}.{self._mac(nonce, name, conversation)}"
        store = self._state_store() if form is not None else None
        if store is not None and form is not None:
            record = {
                "name": name,
                "arguments": arguments,
                "conversation": conversation,
                "message": form[0],
                "expires": time.time() + ANSWER_TIMEOUT,
            }
            try:
                store.save_state(PAUSED_NAMESPACE, nonce, record, 0)
            except Exception as exc:
                log.warning("paused call not kept in the store (only this worker can resume it): %s", exc)
                return state, False
            try:
                store.prune_states(PAUSED_NAMESPACE, ANSWER_TIMEOUT * 2)
            except Exception as exc:
                log.debug("expired paused calls not pruned: %s", exc)
            return state, True
        return state, False

    def verify(self, state: str, name: str, conversation: str) -> str | None:
        """The nonce of ``state`` when this deployment signed it for this tool and conversation."""
        nonce, _, mac = state.partition(".")
        if not nonce or not hmac.compare_digest(mac.encode(), self._mac(nonce, name, conversation).encode()):
            return None
        return nonce

    def take(self, state: str, name: str, arguments: Any, conversation: str) -> str | None:
        """The question a paused call kept in the store was asked, if ``state`` is this
        deployment's, for this very call, not expired, and not taken before; the record is
        deleted (None: no such call)."""
        from .._errors import StateConflict

        nonce = self.verify(state, name, conversation)
        if nonce is None:
            return None
        store = self._state_store()
        if store is None:
            return None
        record, version = store.load_state(PAUSED_NAMESPACE, nonce)
        if not isinstance(record, Mapping) or not version:
            return None
        try:
            store.save_state(PAUSED_NAMESPACE, nonce, None, version)
        except StateConflict:
            return None  # another retry took it
        if (
            record.get("name") != name
            or record.get("arguments") != arguments
            or record.get("conversation") != conversation
            or not isinstance(record.get("expires"), (int, float))
            or record["expires"] < time.time()
        ):
            return None
        message = record.get("message")
        return message if isinstance(message, str) else None


def input_required(form: Form, state: str) -> dict[str, Any]:
    """The ``InputRequiredResult`` (wire form) asking ``form``."""
    message, schema = form
    return {
        "resultType": "input_required",
        "inputRequests": {
            INPUT_KEY: {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": message, "requestedSchema": schema},
            }
        },
        "requestState": state,
    }


def answer_from(input_responses: Mapping[str, Any] | None) -> Answer | None:
    """Our answer inside a retried call's ``inputResponses`` (None when missing or malformed)."""
    if not input_responses:
        return None
    response = input_responses.get(INPUT_KEY)
    if response is None:
        return None
    action = getattr(response, "action", None)
    content = getattr(response, "content", None)
    if action is None and isinstance(response, Mapping):
        action, content = response.get("action"), response.get("content")
    if action is None:
        return None
    return action, content


class ServeApprover:
    """The plugin ``serve`` registers: answers "ask" through the current call's channel.

    A call with a subject (``[auth]``: each person's own token) keeps that person's "always"
    answers here, by subject and pattern, instead of writing a rule for everyone: the pipeline is
    told "once", and the next call asking the same is answered without a question. Nobody else's
    calls see them. With a ``store`` (a callable giving the store's ``StateStore``, or None) they
    are kept there too, one document per person (namespace ``serve.always``), so they outlive the
    process and hold for every worker on the store.
    """

    def __init__(self, store: Callable[[], Any] | None = None, *, shared: bool = False) -> None:
        #: (subject, pattern) -> "always_allow" or "always_deny"
        self.personal: dict[tuple[str, str], Choice] = {}
        self.store = store
        #: The store is shared by several workers: a call without a subject keeps its "always"
        #: answers there too (under PROJECT_OWNER) instead of in this worker's local rules file,
        #: and an answer not known here is looked up again (another worker may have stored it).
        self.shared = shared
        self._loaded: set[str] = set()

    @hookimpl
    async def entropic_mcp_approve_tool_call(self, request: ApprovalRequest) -> ApprovalDecision | None:
        owner = request.subject
        if owner is None and self.shared and self.store is not None:
            owner = PROJECT_OWNER
        if owner is not None and request.always:
            remembered = self._remembered(owner, request) if owner in self._loaded else None
            if remembered is None and (owner not in self._loaded or self.shared):
                await _off_loop(self._load, owner)
                remembered = self._remembered(owner, request)
            if remembered is not None:
                return remembered
        channel = CURRENT.get()
        if channel is None:
            return None
        answer = await channel.elicit(question(request))
        decision = decision_from(*answer) if answer is not None else None
        if owner is None or decision is None or not decision.answer.startswith("always_"):
            return decision
        if request.always:
            for pattern in request.patterns or (request.pattern,):
                self.personal[(owner, pattern)] = decision.answer
            if owner == PROJECT_OWNER:
                log.info("answered %s for %s (kept in the shared store)", decision.answer, request.tool)
            else:
                log.info("%s answered %s for %s (theirs only)", owner, decision.answer, request.tool)
            await _off_loop(self._save, owner)
        once: Choice = "allow_once" if decision.answer == "always_allow" else "deny_once"
        return ApprovalDecision(answer=once, feedback=decision.feedback)

    def _state(self) -> Any:
        if self.store is None:
            return None
        from .._storage import StateStore

        store = self.store()
        return store if isinstance(store, StateStore) else None

    def _load(self, subject: str) -> None:
        """This person's stored answers, once per process (memory only when the store fails)."""
        try:
            store = self._state()
            value = store.load_state(PERSONAL_NAMESPACE, subject)[0] if store is not None else None
        except Exception as exc:
            log.warning("could not read %s's 'always' answers from the store: %s", subject, exc)
            return
        self._loaded.add(subject)
        if isinstance(value, Mapping):
            for pattern, answer in value.items():
                if answer in ("always_allow", "always_deny"):
                    self.personal[(subject, str(pattern))] = answer

    def _save(self, subject: str) -> None:
        from .._storage._update import update_document

        mine = {pattern: answer for (who, pattern), answer in self.personal.items() if who == subject}
        try:
            store = self._state()
            if store is None:
                return
            # another worker saving the same person's answers meanwhile: merged with theirs
            update_document(
                store,
                PERSONAL_NAMESPACE,
                subject,
                lambda stored: {**(stored if isinstance(stored, Mapping) else {}), **mine},
            )
        except Exception as exc:
            log.warning("could not keep %s's 'always' answer in the store (kept until serve stops): %s", subject, exc)

    def _remembered(self, subject: str, request: ApprovalRequest) -> ApprovalDecision | None:
        """This person's earlier "always" answer covering every asking part (a deny wins)."""
        answers = [self.personal.get((subject, pattern)) for pattern in request.patterns or (request.pattern,)]
        if "always_deny" in answers:
            return ApprovalDecision(answer="deny_once", feedback="You answered 'always deny' for this earlier.")
        if answers and all(answer == "always_allow" for answer in answers):
            return ApprovalDecision(answer="allow_once")
        return None

    @hookimpl
    def entropic_mcp_approve_outside_root(self, request: OutsideRootRequest) -> bool | None:
        """Ask from the tool's worker thread while the event loop carries the question.

        A tool running on the event loop itself (an async tool) cannot wait here without
        stopping the loop that would carry the answer: it gets None, and the tool's refusal names
        the config keys that allow the path.
        """
        channel = CURRENT.get()
        if channel is None:
            return None
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return None
        future = asyncio.run_coroutine_threadsafe(channel.elicit(outside_root_question(request)), channel.loop)
        channel.pending.add(future)
        try:
            return outside_root_answer(future.result(ANSWER_TIMEOUT + 30))
        except (concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
            future.cancel()
            return None
        except Exception as exc:
            log.warning("could not ask the client about %s: %s", request.path, exc)
            return None
        finally:
            channel.pending.discard(future)


async def _off_loop(function: Callable[[str], None], subject: str) -> None:
    """Store I/O for the approver, in a worker thread: the event loop carries every other call."""
    import anyio.to_thread

    await anyio.to_thread.run_sync(function, subject)
