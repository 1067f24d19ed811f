"""Duplicate and loop guards: per conversation and identity, after the permission stage.

The rules (pipeline.md, revised after replaying real agent loops):

- No result is ever served from a cache. A READ call whose fresh answer equals the previous
  answer to the same call is *flagged* (the notice wraps the fresh result); the third identical
  answer in a row gets the STOP notice. WRITE calls are never flagged.
- Identical failures: a call is refused before it runs only after its previous two runs failed
  one after the other with the same error code. A success of the call, a different code, any
  successful call on the same server, or any successful WRITE call clears the record. Codes that
  say the world is not ready yet (``TRANSIENT_CODES``: a server reconnecting, busy) are not
  counted: their messages tell the model when to retry the very same call.
- Same-tool spiral: a long run of one WRITE tool (READ calls and refused calls do not count) is
  refused until another tool runs.

Where the state lives: in this process's memory, unless the store is shared by several processes
(a ``StateStore`` other than the embedded ``tinydb`` one, e.g. PostgreSQL behind several serve
workers). Then each (conversation, identity) has one document in the store (namespace
``pipeline.guards``), loaded before the guard check and saved, guarded by its version, after the
call ran, so N workers count exactly as one does. Answers are compared by a stable digest there
(``hash()`` differs between processes) and call keys are kept as digests, so the document stays
small: the last ``MAX_REMEMBERED_ANSWERS`` answers are one base64 string of 12 bytes each (about
1 KB, under PostgreSQL's 2 KB TOAST threshold: a document over it was compressed, stored out of
line and read back whole on every call; at 512 answers it was 25 KB). The store may commit it
without waiting for the disk (``HEURISTIC_NAMESPACES``): a crash of the store loses at most the
last counts, which only delays a flag or a refusal.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import attrs

from .._config import PipelineConfig
from .._envelope import error_code_of

MAX_CONVERSATIONS = 4096
#: Failures that depend on time, not on the arguments: retrying the same call is the remedy.
TRANSIENT_CODES = frozenset({"server_disconnected", "server_busy", "todo_busy"})
#: Answers remembered per conversation (the oldest forgotten first), in memory as in the store.
MAX_REMEMBERED_ANSWERS = 64
#: Failure records kept per conversation (the oldest forgotten first); successes clear them sooner.
MAX_FAILURES = 16
#: The store's namespace for guard state shared by several workers.
NAMESPACE = "pipeline.guards"
#: Saves retried when another worker changed the same conversation's guard state meanwhile.
SAVE_ATTEMPTS = 8

log = logging.getLogger("entropic_mcp.pipeline")


@attrs.define
class _Failure:
    code: str
    count: int


@attrs.define
class GuardState:
    """What the guards remember of one conversation and identity."""

    #: call key -> (hash, length) of its last answer; when shared, key digest -> answer digest (bytes).
    answers: OrderedDict[Any, Any] = attrs.field(factory=OrderedDict)
    last_key: str | None = None
    repeats: int = 0
    failures: dict[str, _Failure] = attrs.field(factory=dict)
    run_tool: str | None = None
    run_length: int = 0
    #: The store key when this state lives in a shared store (None: memory only; "" while a change
    #: is applied to it), and its version.
    shared: str | None = None
    version: int = 0
    #: Shared state changed by a call and not saved yet: the change (``ran``'s arguments) and the
    #: document as loaded; ``Guards.save`` writes it (again on a conflict, applied to the newer one).
    pending: tuple[Any, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            # "seen", not the earlier "answers" list: a worker of the older layout ignores it.
            "seen": base64.b64encode(b"".join(k + v for k, v in self.answers.items())).decode("ascii"),
            "last_key": self.last_key,
            "repeats": self.repeats,
            "failures": {key: [failure.code, failure.count] for key, failure in self.failures.items()},
            "run_tool": self.run_tool,
            "run_length": self.run_length,
        }

    def load(self, value: Any, version: int) -> None:
        """Replace this state by a stored document (anything malformed counts as empty)."""
        self.answers.clear()
        self.failures.clear()
        self.last_key, self.repeats, self.run_tool, self.run_length = None, 0, None, 0
        self.version = version
        if not isinstance(value, dict):
            return
        try:
            seen = value.get("seen", "")
            raw = base64.b64decode(seen, validate=True) if isinstance(seen, str) else b""
            for at in range(0, len(raw) - _RECORD + 1, _RECORD):
                self.answers[raw[at : at + _HALF]] = raw[at + _HALF : at + _RECORD]
            for key, (code, count) in value.get("failures", {}).items():
                self.failures[str(key)] = _Failure(code=str(code), count=int(count))
            last_key, run_tool = value.get("last_key"), value.get("run_tool")
            self.last_key = last_key if isinstance(last_key, str) else None
            self.run_tool = run_tool if isinstance(run_tool, str) else None
            self.repeats = int(value.get("repeats", 0))
            self.run_length = int(value.get("run_length", 0))
        except (TypeError, ValueError, binascii.Error):
            log.warning("guard state %s in the store is malformed; starting it afresh", self.shared)
            self.load(None, version)


def _digest(text: str) -> int:
    """A digest every process computes alike (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


#: Bytes of each digest of a remembered answer in the store: the call key's, then the answer's
#: (48 bits: a false flag among 64 answers is a 1-in-10^12 event, and the result is shown anyway).
_HALF = 6
_RECORD = 2 * _HALF


def _short(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_HALF).digest()


def _document(conversation_id: str, identity: str | None) -> str:
    """The store key of a (conversation, identity)'s guard state."""
    return conversation_id if identity is None else f"{conversation_id}\x1fidentity={identity}"


def shared_key(key: str) -> str:
    """A call key as kept in the store: the tool name, then a digest of the arguments."""
    name, _, args = key.partition("\x00")
    return f"{name}#{_digest(args):016x}"


class Guards:
    """The duplicate and loop rules, with their state per (conversation, identity)."""

    def __init__(self, config: PipelineConfig, store: Callable[[], Any] | None = None) -> None:
        """``store`` gives the shared ``StateStore`` the state lives in, or None (memory); it is
        asked once, at the first call."""
        self.config = config
        self._states: OrderedDict[tuple[str, str | None], GuardState] = OrderedDict()
        #: The state a (conversation, identity) key already has in this process's memory, or None
        #: (the dict's own lookup: the pipeline asks on every call, and ``state`` makes the missing one).
        self.in_memory = self._states.get
        self._lock = threading.Lock()
        self._store_of = store
        self._store: Any = None
        #: The state may live in a store: the pipeline loads and saves it (``load``, ``flush``).
        self.shared = store is not None
        #: The store can be awaited on the event loop (``AsyncStateStore``): no worker thread per call.
        self._on_loop = False
        #: Identities whose state this process saved in the store (ending a conversation deletes theirs).
        self._identities: set[str | None] = {None}

    def store(self) -> Any:
        """The shared StateStore the guard state lives in, or None (this process's memory)."""
        if self._store_of is not None:
            of, self._store_of = self._store_of, None
            try:
                candidate = of()
            except Exception as exc:
                log.warning("guard state kept in this process's memory: the store could not be opened: %s", exc)
                candidate = None
            from .._storage import AsyncStateStore, StateStore

            self._store = candidate if isinstance(candidate, StateStore) else None
            self.shared = self._store is not None
            self._on_loop = isinstance(candidate, AsyncStateStore)
        return self._store

    def state(self, conversation_id: str, identity: str | None) -> GuardState:
        key = (conversation_id, identity)
        state = self._states.get(key)
        if state is None:
            store = self.store() if self._store_of is not None or self._store is not None else None
            if store is not None:
                return self._shared_state(store, conversation_id, identity)
            with self._lock:
                state = self._states.setdefault(key, GuardState())
                while len(self._states) > MAX_CONVERSATIONS:
                    self._states.popitem(last=False)
        return state

    def _shared_state(self, store: Any, conversation_id: str, identity: str | None) -> GuardState:
        """The conversation's state as the store holds it now (memory only for this call when it fails)."""
        name = _document(conversation_id, identity)
        try:
            loaded = store.load_state(NAMESPACE, name)
        except Exception as exc:
            return self._unread(name, exc)
        return self._loaded(name, identity, loaded)

    def _loaded(self, name: str, identity: str | None, loaded: tuple[Any, int]) -> GuardState:
        state = GuardState(shared=name)
        state.load(*loaded)
        self._identities.add(identity)
        return state

    @staticmethod
    def _unread(name: str, exc: Exception) -> GuardState:
        log.warning("guard state of %s could not be read from the store (this call is not counted): %s", name, exc)
        return GuardState()

    def end_conversation(self, conversation_id: str) -> None:
        with self._lock:
            for key in [k for k in self._states if k[0] == conversation_id]:
                del self._states[key]
        store = self._store
        if store is None:
            return
        from .._errors import StateConflict
        from .._storage._update import update_document

        for identity in list(self._identities):
            name = _document(conversation_id, identity)
            try:
                update_document(store, NAMESPACE, name, lambda stored: None, attempts=SAVE_ATTEMPTS)
            except StateConflict:
                continue  # kept being saved by calls still running on other workers: theirs
            except Exception as exc:
                log.warning("guard state of %s could not be deleted from the store: %s", name, exc)

    # -- before the call runs ------------------------------------------------------------------

    def refusal(
        self, state: GuardState, key: str, name: str, *, write: bool, shown: str | None = None
    ) -> tuple[str, int] | None:
        """(message, run length) when a loop rule refuses the call; None lets it run. ``name`` is
        the canonical name (what ``ran`` records); ``shown``, the name the messages use."""
        if state.shared:
            key = shared_key(key)
        failure = state.failures.get(key)
        limit = self.config.identical_failure_limit
        said = name if shown is None else shown
        if failure is not None and failure.count >= limit:
            return (
                f"'{said}' failed {failure.count} times in a row with exactly these arguments "
                f"({failure.code}), and nothing has changed since. Take a different approach (other "
                "arguments or another tool), or change what made it fail first.",
                state.run_length,
            )
        run = state.run_length + 1 if write and state.run_tool == name else 1
        if write and run > self.config.same_tool_limit:
            return (
                f"'{said}' has run {run - 1} times in a row (limit {self.config.same_tool_limit}, "
                "[pipeline] same_tool_limit). Step back: check the result with another tool or change "
                "approach before calling it again.",
                run - 1,
            )
        return None

    # -- after the call ran ------------------------------------------------------------------------

    def ran(
        self,
        state: GuardState,
        key: str,
        name: str,
        text: str,
        *,
        failed: bool,
        write: bool,
        flag: bool,
        code: str | None = None,
    ) -> int:
        """Record a call that ran; returns how many identical answers came just before (0: none).

        ``code`` is a failure's error code (``ServerResponse.code``); without one it is read from
        ``text`` as from any error that arrived as text.
        """
        if state.shared:
            return self._ran_shared(state, key, name, text, failed=failed, write=write, flag=flag, code=code)
        server = name.partition(".")[0]
        if failed:
            if code is None:
                code = error_code_of(text)
            if code in TRANSIENT_CODES:
                return 0
            failure = state.failures.get(key)
            if failure is not None and failure.code == code:
                failure.count += 1
            else:
                state.failures[key] = _Failure(code=code, count=1)
                if len(state.failures) > MAX_FAILURES:
                    del state.failures[next(iter(state.failures))]
        elif state.failures:
            if write:
                state.failures.clear()  # the failure may have depended on what this call changed
            else:
                prefix = server + "."
                for stale in [k for k in state.failures if k.startswith(prefix)]:
                    del state.failures[stale]
        if write:
            if state.run_tool == name:
                state.run_length += 1
            else:
                state.run_tool, state.run_length = name, 1
        elif state.run_tool != name:
            state.run_tool, state.run_length = None, 0
        repeats = 0
        if flag and not failed and not write:
            slot: Any
            answer: Any
            if state.shared is None:
                slot, answer = key, (hash(text), len(text))
            else:
                slot, answer = _short(key), _short(text)
            answers = state.answers
            if answers.get(slot) == answer:
                repeats = state.repeats + 1 if state.last_key == key else 1
            answers.pop(slot, None)  # re-inserted last: the oldest answer is the one forgotten
            answers[slot] = answer
            if len(answers) > MAX_REMEMBERED_ANSWERS:
                answers.popitem(last=False)
        state.last_key, state.repeats = key, repeats
        return repeats

    def _ran_shared(
        self,
        state: GuardState,
        key: str,
        name: str,
        text: str,
        *,
        failed: bool,
        write: bool,
        flag: bool,
        code: str | None,
    ) -> int:
        """``ran`` for state in the shared store: the memory rules applied to the loaded document
        (keys as digests, answers by a stable digest); ``save`` writes it."""
        shared, wire = state.shared, shared_key(key)
        if state.pending is None:
            state.pending = ((wire, name, text, failed, write, flag, code), state.to_json())
        state.shared = ""
        try:
            return self.ran(state, wire, name, text, failed=failed, write=write, flag=flag, code=code)
        finally:
            state.shared = shared

    def save(self, state: GuardState) -> None:
        """Write a shared state a call changed, guarded by its version; when another worker saved
        first, load theirs and apply the call to it again. A store that fails: not counted, logged."""
        save = self._saving(state)
        if save is not None:
            self._saved(state, save[0], loaded=save[1])

    def _saving(self, state: GuardState) -> tuple[Callable[[Any], Any], tuple[Any, int]] | None:
        """The change ``save`` makes (``update_document``'s) and the document it starts from; None
        when the call changed nothing there is to save."""
        from .._storage._update import UNCHANGED

        if state.pending is None or not state.shared:
            return None
        (wire, name, text, failed, write, flag, code), before = state.pending
        state.pending = None
        shared = state.shared
        after = state.to_json()
        if after == before or self._store is None:
            return None
        rounds = 0

        def apply(value: Any) -> Any:
            nonlocal rounds
            rounds += 1
            if rounds == 1:
                return after  # the call applied to the document as loaded before it ran
            state.load(value, state.version)
            loaded = state.to_json()
            state.shared = ""
            try:
                self.ran(state, wire, name, text, failed=failed, write=write, flag=flag, code=code)
            finally:
                state.shared = shared
            changed = state.to_json()
            return UNCHANGED if changed == loaded else changed

        return apply, (before, state.version)

    def _saved(self, state: GuardState, apply: Callable[[Any], Any], *, loaded: tuple[Any, int] | None) -> None:
        """``update_document`` with ``apply`` (from ``loaded``, else a fresh load); failures logged."""
        from .._errors import StateConflict
        from .._storage._update import update_document

        shared = str(state.shared)
        try:
            _, state.version = update_document(
                self._store, NAMESPACE, shared, apply, attempts=SAVE_ATTEMPTS, loaded=loaded
            )
        except StateConflict:
            log.warning("guard state of %s kept changing in the store; this call is not counted", shared)
        except Exception as exc:
            log.warning("guard state of %s could not be saved in the store (this call is not counted): %s", shared, exc)

    async def load(self, conversation_id: str, identity: str | None) -> GuardState:
        """``state`` without holding the event loop's other calls: awaited on the loop when the
        store can be (P17: a worker thread per statement cost more than the statement), else in
        a worker thread (the first call too, which opens the store)."""
        if self._on_loop and (conversation_id, identity) not in self._states:
            name = _document(conversation_id, identity)
            try:
                loaded = await self._store.load_state_async(NAMESPACE, name)
            except Exception as exc:
                return self._unread(name, exc)
            return self._loaded(name, identity, loaded)
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.state, conversation_id, identity)

    async def flush(self, state: GuardState) -> None:
        """``save``: its first write awaited on the loop when the store can be, the rounds after a
        conflict (another worker saved first) in a worker thread; else all in a worker thread."""
        from .._errors import StateConflict

        if not self._on_loop:
            import anyio.to_thread

            await anyio.to_thread.run_sync(self.save, state)
            return
        save = self._saving(state)
        if save is None:
            return
        apply, (value, version) = save
        try:
            state.version = await self._store.save_state_async(NAMESPACE, str(state.shared), apply(value), version)
        except StateConflict:
            import anyio.to_thread

            await anyio.to_thread.run_sync(lambda: self._saved(state, apply, loaded=None))
        except Exception as exc:
            log.warning(
                "guard state of %s could not be saved in the store (this call is not counted): %s", state.shared, exc
            )

    def notice(self, name: str, repeats: int) -> str:
        """The text put before a repeated answer."""
        calls = repeats + 1
        if calls >= self.config.duplicate_stop_after:
            return (
                f"[duplicate_call] STOP. You have called '{name}' {calls} times with identical arguments and "
                "got the same result each time. Use the result you have, or do something else."
            )
        return (
            f"[duplicate_call] Tool '{name}' was already called with the same arguments and returned the "
            "same result (shown again below)."
        )

    def stops(self, repeats: int) -> bool:
        return repeats > 0 and repeats + 1 >= self.config.duplicate_stop_after
