"""A caller's delegations are looked up in its own storage scope (OAuth subjects, issue 28)."""

from __future__ import annotations

from typing import Any


def test_a_callers_delegations_are_looked_up_in_their_own_scope() -> None:
    from entropic_mcp import CallContext
    from entropic_mcp_entropic._state import caller_scope

    class Store:
        def scope_of(self, conversation_id: str) -> str | None:
            return "stored-scope" if conversation_id == "stored" else None

    store: Any = Store()
    alice = CallContext(conversation_id="sub:alice/chat", subject="alice", scope="sub:alice")
    assert caller_scope(store, alice) == "sub:alice"
    assert caller_scope(store, CallContext(conversation_id="chat")) == "default"  # no [auth]: as before
    assert caller_scope(store, CallContext(conversation_id="stored", scope="sub:alice")) == "stored-scope"
