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
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import attrs
import orjson

from ._config import PipelineConfig

MAX_CONVERSATIONS = 4096
#: Failures that depend on time, not on the arguments: retrying the same call is the remedy.
TRANSIENT_CODES = frozenset({"server_disconnected", "server_busy", "todo_busy"})
MAX_REMEMBERED_ANSWERS = 512


@attrs.define
class _Failure:
    code: str
    count: int


@attrs.define
class GuardState:
    """What the guards remember of one conversation and identity."""

    answers: OrderedDict[str, tuple[int, int]] = attrs.field(factory=OrderedDict)
    last_key: str | None = None
    repeats: int = 0
    failures: dict[str, _Failure] = attrs.field(factory=dict)
    run_tool: str | None = None
    run_length: int = 0


def error_code(text: str) -> str:
    """The ``error`` field of a JSON error result; ``"error"`` for a plain-text one."""
    if text.startswith("{"):
        try:
            code = orjson.loads(text).get("error")
        except (orjson.JSONDecodeError, AttributeError):
            code = None
        if isinstance(code, str) and code:
            return code
    return "error"


class Guards:
    """The duplicate and loop rules, with their state per (conversation, identity)."""

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self._states: OrderedDict[tuple[str, str | None], GuardState] = OrderedDict()
        self._lock = threading.Lock()

    def state(self, conversation_id: str, identity: str | None) -> GuardState:
        key = (conversation_id, identity)
        state = self._states.get(key)
        if state is None:
            with self._lock:
                state = self._states.setdefault(key, GuardState())
                while len(self._states) > MAX_CONVERSATIONS:
                    self._states.popitem(last=False)
        return state

    def end_conversation(self, conversation_id: str) -> None:
        with self._lock:
            for key in [k for k in self._states if k[0] == conversation_id]:
                del self._states[key]

    # -- before the call runs ------------------------------------------------------------------

    def refusal(self, state: GuardState, key: str, name: str, *, write: bool) -> tuple[str, int] | None:
        """(message, run length) when a loop rule refuses the call; None lets it run."""
        failure = state.failures.get(key)
        limit = self.config.identical_failure_limit
        if failure is not None and failure.count >= limit:
            return (
                f"'{name}' failed {failure.count} times in a row with exactly these arguments "
                f"({failure.code}), and nothing has changed since. Take a different approach (other "
                "arguments or another tool), or change what made it fail first.",
                state.run_length,
            )
        run = state.run_length + 1 if write and state.run_tool == name else 1
        if write and run > self.config.same_tool_limit:
            return (
                f"'{name}' has run {run - 1} times in a row (limit {self.config.same_tool_limit}, "
                "[pipeline] same_tool_limit). Step back: check the result with another tool or change "
                "approach before calling it again.",
                run - 1,
            )
        return None

    # -- after the call ran ------------------------------------------------------------------------

    def ran(self, state: GuardState, key: str, name: str, text: str, *, failed: bool, write: bool, flag: bool) -> int:
        """Record a call that ran; returns how many identical answers came just before (0: none)."""
        server = name.partition(".")[0]
        if failed:
            code = error_code(text)
            if code in TRANSIENT_CODES:
                return 0
            failure = state.failures.get(key)
            if failure is not None and failure.code == code:
                failure.count += 1
            else:
                state.failures[key] = _Failure(code=code, count=1)
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
            answer = (hash(text), len(text))
            if state.answers.get(key) == answer:
                repeats = state.repeats + 1 if state.last_key == key else 1
            answers = state.answers
            answers.pop(key, None)  # re-inserted last: the oldest answer is the one forgotten
            answers[key] = answer
            if len(answers) > MAX_REMEMBERED_ANSWERS:
                answers.popitem(last=False)
        state.last_key, state.repeats = key, repeats
        return repeats

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
