"""CheckedStorage: the protocol's argument rules in front of every backend, so a backend that
checks nothing still refuses what the protocol refuses, and receives only what it allows."""

from __future__ import annotations

import pytest
from entropic_mcp import ServerManager, config_from_dict
from entropic_mcp.storage import CheckedStorage, StateStore, StorageBackend, StorageError
from entropic_mcp.testing import MemoryStorage


class Trusting:
    """A backend with no argument checks of its own: it records what reaches it."""

    def __init__(self):
        self.seen = []

    def __getattr__(self, name):
        if name.startswith("_") or "_state" in name or name == "prune_states":
            raise AttributeError(name)

        def method(*args):
            self.seen.append((name, args))
            return "id" if name != "create_delegation" else ("d", "c")

        return method


class TrustingWithState(Trusting):
    def load_state(self, namespace, key):
        self.seen.append(("load_state", (namespace, key)))
        return None, 0

    def save_state(self, namespace, key, value, version):
        self.seen.append(("save_state", (namespace, key, value, version)))
        return version + 1

    def prune_states(self, namespace, older_than):
        self.seen.append(("prune_states", (namespace, older_than)))
        return 0


BAD_CALLS = [
    ("create_conversation", (5,)),
    ("create_conversation", ("t", ["not", "an", "object"])),
    ("create_conversation", ("t", None, "")),
    ("scope_of", (None,)),
    ("save_messages", ("c", [{"content": "no role"}])),
    ("save_messages", ("c", "not a list")),
    ("load_conversation", (7,)),
    ("list_conversations", (0,)),
    ("list_conversations", (10, -1)),
    ("list_delegations", (True,)),
    ("delete_conversation", (None,)),
    ("save_snapshot", ("c", [1, 2])),
    ("create_delegation", ("", "lead", "worker", "task")),
    ("create_delegation", ("p", "", "worker", "task")),
    ("create_delegation", ("p", "lead", "worker", "task", -2)),
    ("create_delegation", ("p", "lead", "worker", "task", 1, {"path": "a.py"})),
    ("create_delegation", ("p", "lead", "worker", "task", 1, ["a.py"])),
    ("complete_delegation", ("d", "done", "summary")),
    ("complete_delegation", ("d", "completed", 3)),
    ("load_delegation_with_messages", ([],)),
    ("latest_delegation_for_target", ("",)),
    ("latest_delegation_for_target", ("worker", "")),
    ("search_delegations", ("",)),
    ("search_delegations", ("retry", 0)),
    ("record_tool_call", ({"name": "fs.read"},)),
]


@pytest.mark.parametrize(("method", "args"), BAD_CALLS, ids=[f"{m}{a!r}" for m, a in BAD_CALLS])
def test_a_bad_argument_is_refused_before_the_backend_sees_it(method, args):
    backend = Trusting()
    with pytest.raises(StorageError):
        getattr(CheckedStorage(backend), method)(*args)
    assert backend.seen == []


def test_good_arguments_reach_the_backend_as_the_protocol_states_them():
    backend = Trusting()
    store = CheckedStorage(backend)
    store.save_messages("c", ({"role": "user", "content": "hi"},))
    store.create_delegation("p", "lead", "worker", "task")
    store.complete_delegation("d", "completed", None)
    assert backend.seen == [
        ("save_messages", ("c", [{"role": "user", "content": "hi"}])),  # the JSON-clean copy
        ("create_delegation", ("p", "lead", "worker", "task", -1, [])),
        ("complete_delegation", ("d", "completed", "")),
    ]


def test_state_methods_are_offered_only_when_the_backend_has_them():
    from entropic_mcp._storage._checked import checked

    assert not isinstance(checked(Trusting()), StateStore)
    store = checked(TrustingWithState())
    assert isinstance(store, StateStore) and isinstance(store, StorageBackend)
    with pytest.raises(StorageError, match="not JSON"):
        store.save_state("ns", "k", {1, 2}, 0)
    with pytest.raises(StorageError, match="older_than"):
        store.prune_states("ns", -1)
    assert store.save_state("ns", "k", {"a": 1}, 0) == 1
    assert store.backend.seen == [("save_state", ("ns", "k", {"a": 1}, 0))]
    assert checked(store) is store


def test_the_manager_puts_every_store_behind_the_rules(tmp_path):
    given = MemoryStorage()
    manager = ServerManager(config_from_dict({}, root=tmp_path), storage=given)
    try:
        assert isinstance(manager.storage, CheckedStorage) and manager.storage.backend is given
        with pytest.raises(StorageError, match="limit"):
            manager.storage.list_conversations(0)
    finally:
        manager.close()


class TrustingWithAsyncState(TrustingWithState):
    async def load_state_async(self, namespace, key):
        self.seen.append(("load_state_async", (namespace, key)))
        return None, 0

    async def save_state_async(self, namespace, key, value, version):
        self.seen.append(("save_state_async", (namespace, key, value, version)))
        return version + 1


def test_awaited_state_methods_are_offered_only_when_the_backend_has_them_and_checked_alike():
    import asyncio

    from entropic_mcp._storage._checked import checked
    from entropic_mcp.storage import AsyncStateStore

    assert not isinstance(checked(TrustingWithState()), AsyncStateStore)
    store = checked(TrustingWithAsyncState())
    assert isinstance(store, AsyncStateStore)
    with pytest.raises(StorageError, match="not JSON"):
        asyncio.run(store.save_state_async("ns", "k", {1, 2}, 0))
    with pytest.raises(StorageError, match="non-empty string"):
        asyncio.run(store.load_state_async("ns", ""))
    assert asyncio.run(store.save_state_async("ns", "k", {"a": 1}, 0)) == 1
    assert store.backend.seen == [("save_state_async", ("ns", "k", {"a": 1}, 0))]
