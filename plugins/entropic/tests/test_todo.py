"""todo: one list per conversation; the rendering, the anchor and the presenter notice; the list in
the store (shared by workers, deleted when emptied or ended) or, without a StateStore, in memory."""

from __future__ import annotations

import threading

import orjson
import pytest
from entropic_mcp.directives import ContextAnchor, NotifyPresenter
from entropic_mcp.storage import StateConflict, StateStore, StorageError
from entropic_mcp.testing import MemoryStorage
from entropic_mcp_entropic._todo import MAX_SAVE_ATTEMPTS, NAMESPACE
from entropic_support import call, directive_types


def test_add_renders_and_emits_anchor_and_presenter(make):
    outcome = call(make(), "entropic.todo", {"action": "add", "content": "read the spec"})
    assert directive_types(outcome) == ["context_anchor", "notify_presenter"]
    anchor, notice = outcome.response.directives
    assert anchor == ContextAnchor(key="todo_state", content=outcome.response.result)
    assert notice == NotifyPresenter(key="todo", data=[{"content": "read the spec", "status": "pending"}])
    assert outcome.response.result == "Todo (0/1 completed):\n[0] [ ] read the spec"


def test_update_status_and_content_then_remove(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    call(manager, "entropic.todo", {"action": "add", "content": "b", "status": "in_progress"})
    outcome = call(manager, "entropic.todo", {"action": "update", "index": 0, "status": "completed"})
    assert outcome.response.result == "Todo (1/2 completed):\n[0] [x] a\n[1] [>] b"
    outcome = call(manager, "entropic.todo", {"action": "update", "index": 1, "content": "b2"})
    assert outcome.response.directives[1].data[1] == {"content": "b2", "status": "in_progress"}
    outcome = call(manager, "entropic.todo", {"action": "remove", "index": 0})
    assert outcome.response.result == "Todo (0/1 completed):\n[0] [>] b2"


def test_clear_empties_the_list_and_removes_the_anchor(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    outcome = call(manager, "entropic.todo", {"action": "clear"})
    assert outcome.response.result == "The todo list is empty."
    assert outcome.response.directives == (
        ContextAnchor(key="todo_state", content=""),
        NotifyPresenter(key="todo", data=[]),
    )


@pytest.mark.parametrize("action", ["update", "remove"])
def test_out_of_range_index_is_an_error_without_directives(make, action):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "only"})
    outcome = call(manager, "entropic.todo", {"action": action, "index": 1, "status": "completed"})
    assert outcome.response.is_error and outcome.response.directives == ()
    error = orjson.loads(outcome.response.result)
    assert error["error"] == "index_out_of_range" and "0..0" in error["message"]


def test_lists_are_per_conversation_and_released_at_the_end(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "mine"}, conversation="a")
    other = call(manager, "entropic.todo", {"action": "add", "content": "theirs"}, conversation="b")
    assert other.response.result == "Todo (0/1 completed):\n[0] [ ] theirs"
    manager.end_conversation("a")
    again = call(manager, "entropic.todo", {"action": "add", "content": "fresh"}, conversation="a")
    assert again.response.result == "Todo (0/1 completed):\n[0] [ ] fresh"


def test_the_same_add_twice_is_not_refused_as_a_duplicate(make):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "x"})
    outcome = call(manager, "entropic.todo", {"action": "add", "content": "x"})
    assert outcome.kind == "ok" and outcome.response.result.endswith("[1] [ ] x")


@pytest.mark.parametrize(
    "args",
    [
        {"action": "add"},
        {"action": "update", "index": 0},
        {"action": "remove"},
        {"action": "explode"},
        {"action": "update", "status": "completed"},
    ],
)
def test_missing_pieces_are_invalid_args(make, args):
    manager = make()
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    outcome = call(manager, "entropic.todo", args)
    assert outcome.response.is_error and orjson.loads(outcome.response.result)["error"] == "invalid_args"


def test_the_list_has_a_limit(make):
    from entropic_mcp_entropic._todo import MAX_ITEMS

    manager = make()
    server = manager.servers["entropic"]
    server.todo_lists.change(
        "c1", lambda items: items.extend({"content": "x", "status": "pending"} for _ in range(MAX_ITEMS))
    )
    outcome = call(manager, "entropic.todo", {"action": "add", "content": "one more"})
    assert orjson.loads(outcome.response.result)["error"] == "todo_full"


# -- the list in the store: one list for every worker on it -----------------------------------------


@pytest.fixture(params=["memory", "tinydb"])
def workers(request, make):
    """Two managers ("workers") on one store: a shared MemoryStorage, or one tinydb directory."""
    if request.param == "memory":
        store = MemoryStorage()
        return make(store=store), make(store=store)
    return make(storage=True), make(storage=True)


def stored(manager, conversation="c1"):
    return manager.storage.load_state(NAMESPACE, conversation)


def test_workers_on_one_store_see_one_list(workers):
    first, second = workers
    call(first, "entropic.todo", {"action": "add", "content": "a"})
    call(second, "entropic.todo", {"action": "add", "content": "b"})
    outcome = call(first, "entropic.todo", {"action": "update", "index": 1, "status": "completed"})
    assert outcome.response.result == "Todo (1/2 completed):\n[0] [ ] a\n[1] [x] b"
    assert stored(second) == (
        {"items": [{"content": "a", "status": "pending"}, {"content": "b", "status": "completed"}]},
        3,
    )
    state = orjson.loads(call(second, "entropic.inspect", {"target": "state"}).response.result)["state"]
    assert state["todo"] == outcome.response.directives[1].data
    other = call(second, "entropic.todo", {"action": "add", "content": "theirs"}, conversation="c2")
    assert other.response.result == "Todo (0/1 completed):\n[0] [ ] theirs"


def test_a_restarted_worker_finds_the_list(make):
    before = make(storage=True)
    call(before, "entropic.todo", {"action": "add", "content": "kept"})
    before.close()
    restarted = make(storage=True)
    outcome = call(restarted, "entropic.todo", {"action": "add", "content": "more"})
    assert outcome.response.result == "Todo (0/2 completed):\n[0] [ ] kept\n[1] [ ] more"


def test_adds_interleaved_from_two_workers_lose_nothing(workers):
    per_thread = 12
    outcomes = []

    def adder(manager, name):
        for n in range(per_thread):
            outcomes.append(call(manager, "entropic.todo", {"action": "add", "content": f"{name}-{n}"}))

    threads = [
        threading.Thread(target=adder, args=(manager, f"{w}{t}")) for w, manager in enumerate(workers) for t in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [o.kind for o in outcomes] == ["ok"] * len(threads) * per_thread
    expected = {f"{w}{t}-{n}" for w in range(2) for t in range(3) for n in range(per_thread)}
    value, version = stored(workers[0])
    assert sorted(item["content"] for item in value["items"]) == sorted(expected)
    assert version == len(expected)


class Watched(MemoryStorage):
    """Counts the todo list's saves; runs ``meanwhile`` (once) between the list's next load and
    the save after it. Other namespaces (the pipeline's guard state on a shared store) pass by."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile = None
        self.saves = 0

    def load_state(self, namespace, key):
        loaded = super().load_state(namespace, key)
        if namespace == NAMESPACE:
            meanwhile, self.meanwhile = self.meanwhile, None
            if meanwhile is not None:
                meanwhile()
        return loaded

    def save_state(self, namespace, key, value, version):
        if namespace == NAMESPACE:
            self.saves += 1
        return super().save_state(namespace, key, value, version)


def test_a_stale_writer_starts_again_from_what_is_stored(make):
    store = Watched()
    first, second = make(store=store), make(store=store)
    call(first, "entropic.todo", {"action": "add", "content": "a"})

    def other_worker() -> None:
        # its own thread, as another worker would be its own process: the tool's worker thread
        # belongs to the first call's event loop (with sniffio installed anyio.run refuses there)
        done = threading.Thread(
            target=call, args=(second, "entropic.todo", {"action": "update", "index": 0, "status": "completed"})
        )
        done.start()
        done.join()

    store.meanwhile = other_worker
    store.saves = 0
    outcome = call(first, "entropic.todo", {"action": "add", "content": "b"})
    assert outcome.response.result == "Todo (1/2 completed):\n[0] [x] a\n[1] [ ] b"
    assert store.saves == 3  # the other worker's save, the stale one refused, the retry


class AlwaysConflicting(Watched):
    def save_state(self, namespace, key, value, version):
        self.saves += 1
        raise StateConflict(f"{namespace}/{key} changed meanwhile")


def test_a_list_changed_by_others_at_every_attempt_is_todo_busy(make):
    store = AlwaysConflicting()
    outcome = call(make(store=store), "entropic.todo", {"action": "add", "content": "a"})
    error = orjson.loads(outcome.response.result)
    assert error["error"] == "todo_busy" and outcome.response.directives == ()
    assert "changed concurrently" in error["message"] and "nothing was changed" in error["message"]
    assert store.saves == MAX_SAVE_ATTEMPTS  # update_document's pauses between them: core's tests
    assert store.load_state(NAMESPACE, "c1") == (None, 0)


@pytest.mark.parametrize("last", [{"action": "clear"}, {"action": "remove", "index": 0}])
def test_an_emptied_list_deletes_its_document(workers, last):
    first, second = workers
    call(first, "entropic.todo", {"action": "add", "content": "a"})
    outcome = call(second, "entropic.todo", last)
    assert outcome.response.result == "The todo list is empty."
    assert stored(first) == (None, 0)


def test_clear_deletes_a_document_that_is_no_todo_list(make):
    store = MemoryStorage()
    store.save_state(NAMESPACE, "c1", ["not", "items"], 0)
    manager = make(store=store)
    error = orjson.loads(call(manager, "entropic.todo", {"action": "add", "content": "a"}).response.result)
    assert error["error"] == "storage_unavailable" and "clear the list" in error["message"]
    assert call(manager, "entropic.todo", {"action": "clear"}).kind == "ok"
    assert store.load_state(NAMESPACE, "c1") == (None, 0)


def test_end_conversation_deletes_the_document(workers):
    first, second = workers
    call(first, "entropic.todo", {"action": "add", "content": "a"}, conversation="ending")
    call(second, "entropic.todo", {"action": "add", "content": "b"}, conversation="ending")
    call(second, "entropic.todo", {"action": "add", "content": "other"}, conversation="staying")
    first.end_conversation("ending")
    assert stored(second, "ending") == (None, 0)
    assert stored(second, "staying")[0] == {"items": [{"content": "other", "status": "pending"}]}


def test_a_worker_that_never_served_the_conversation_ends_it_in_the_store(make):
    store = MemoryStorage()
    serving = make(store=store)
    call(serving, "entropic.todo", {"action": "add", "content": "a"}, conversation="ending")
    other = make(store=store)  # has served no call at all since it started
    other.end_conversation("ending")
    assert store.load_state(NAMESPACE, "ending") == (None, 0)


def test_end_conversation_without_a_list_writes_nothing(make):
    store = Watched()
    manager = make(store=store)
    call(manager, "entropic.todo", {"action": "add", "content": "a"}, conversation="other")
    store.saves = 0
    manager.end_conversation("never-had-one")
    assert store.saves == 0


# -- without a StateStore: memory, per process, as before ----------------------------------------------


class NoStateStore(MemoryStorage):
    """A backend with every StorageBackend method but not StateStore's."""

    # None blocks a protocol member, as __hash__ = None does for hashing.
    load_state = None
    save_state = None


@pytest.mark.parametrize("store", [None, NoStateStore], ids=["backend-none", "no-state-store"])
def test_without_a_state_store_each_worker_keeps_its_own_list_in_memory(make, store):
    shared = store() if store is not None else None
    assert not isinstance(shared, StateStore)
    first, second = make(store=shared), make(store=shared)
    call(first, "entropic.todo", {"action": "add", "content": "a"})
    outcome = call(second, "entropic.todo", {"action": "add", "content": "b"})
    assert outcome.response.result == "Todo (0/1 completed):\n[0] [ ] b"
    assert len(first.servers["entropic"].todo_lists) == 1
    first.end_conversation("c1")
    assert len(first.servers["entropic"].todo_lists) == 0


# -- a failing store: a tool error saying nothing changed -----------------------------------------------


class Failing(MemoryStorage):
    def __init__(self, failing: str) -> None:
        super().__init__()
        self.failing = failing

    def load_state(self, namespace, key):
        if self.failing == "load":
            raise StorageError("disk I/O error")
        return super().load_state(namespace, key)

    def save_state(self, namespace, key, value, version):
        if self.failing == "save":
            raise StorageError("disk I/O error")
        return super().save_state(namespace, key, value, version)


@pytest.mark.parametrize("failing", ["load", "save"])
def test_a_failing_store_is_a_tool_error_saying_nothing_changed(make, failing):
    store = Failing("none")
    manager = make(store=store)
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    store.failing = failing
    outcome = call(manager, "entropic.todo", {"action": "add", "content": "b"})
    assert outcome.response.is_error and outcome.response.directives == ()
    error = orjson.loads(outcome.response.result)
    assert error["error"] == "storage_unavailable"
    assert "disk I/O error" in error["message"] and "Nothing was changed" in error["message"]
    assert "Traceback" not in outcome.response.result
    store.failing = "none"
    assert store.load_state(NAMESPACE, "c1")[0] == {"items": [{"content": "a", "status": "pending"}]}


def test_inspect_says_when_the_store_cannot_give_the_list(make):
    manager = make(store=Failing("load"))
    outcome = call(manager, "entropic.inspect", {"target": "state"})
    error = orjson.loads(outcome.response.result)
    assert error["error"] == "storage_unavailable" and "could not be read" in error["message"]


def test_a_store_that_cannot_open_is_a_tool_error(make, tmp_path):
    (tmp_path / "store").write_text("not a directory")
    outcome = call(make(storage=True), "entropic.todo", {"action": "add", "content": "a"})
    error = orjson.loads(outcome.response.result)
    assert error["error"] == "storage_unavailable" and "could not be opened" in error["message"]


def test_end_conversation_logs_a_failing_store_and_goes_on(make, caplog):
    store = Failing("none")
    manager = make(store=store)
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    store.failing = "load"
    manager.end_conversation("c1")
    assert "could not delete the todo list" in caplog.text
    store.failing = "none"
    assert manager.storage.load_state(NAMESPACE, "c1")[1] == 1  # kept: nothing half-done


def test_ending_a_conversation_never_opens_or_creates_a_store(make, tmp_path):
    """A process that never opened its store stored no list; clean-up must not create the store."""
    manager = make(storage=True)
    manager.end_conversation("c1")
    assert not manager.storage_is_open
    assert not (tmp_path / "store").exists()
    call(manager, "entropic.todo", {"action": "add", "content": "a"})
    assert manager.storage_is_open
    manager.end_conversation("c1")
    assert stored(manager) == (None, 0)
