"""update_document: one state document changed optimistically, the change applied again to what
is stored now when another save came first; and ctx.services.state_store, where that state lives."""

from __future__ import annotations

import pytest
from entropic_mcp import CallContext, ToolError
from entropic_mcp.storage import UNCHANGED, StateConflict, StorageError, update_document
from entropic_mcp.testing import MemoryStorage, make_manager

NS = "test.notes"


class Racing(MemoryStorage):
    """A store where another worker saves first, ``races`` times, just before each save of ours."""

    def __init__(self, races: int) -> None:
        super().__init__()
        self.races = races
        self.saves: list[object] = []

    def save_state(self, namespace, key, value, version):
        if self.races:
            self.races -= 1
            other, stored = self.load_state(namespace, key)
            super().save_state(namespace, key, [*(other or []), "theirs"], stored)
        self.saves.append(value)
        return super().save_state(namespace, key, value, version)


def append(note):
    def change(value):
        return [*(value or []), note]

    return change


def test_a_lost_race_applies_the_change_again_to_what_the_other_save_stored():
    store = Racing(races=2)
    seen = []

    def change(value):
        seen.append(value)
        return [*(value or []), "mine"]

    value, version = update_document(store, NS, "c1", change, backoff=0)
    assert seen == [None, ["theirs"], ["theirs", "theirs"]]
    assert value == ["theirs", "theirs", "mine"]
    assert store.load_state(NS, "c1") == (["theirs", "theirs", "mine"], version)


def test_attempts_exhausted_is_a_state_conflict_saying_so_and_nothing_of_ours_is_stored():
    store = Racing(races=3)
    with pytest.raises(StateConflict, match=r"'test\.notes'/'c1' was changed by another save in each of 3 attempts"):
        update_document(store, NS, "c1", append("mine"), attempts=3, backoff=0)
    assert store.load_state(NS, "c1")[0] == ["theirs", "theirs", "theirs"]


def test_the_last_attempt_may_win():
    store = Racing(races=2)
    assert update_document(store, NS, "c1", append("mine"), attempts=3, backoff=0)[0] == ["theirs", "theirs", "mine"]


def test_unchanged_saves_nothing_and_answers_what_is_stored():
    store = Racing(races=0)
    store.save_state(NS, "c1", ["a"], 0)
    store.saves.clear()
    assert update_document(store, NS, "c1", lambda value: UNCHANGED) == (["a"], 1)
    assert store.saves == []


def test_none_deletes_and_deleting_what_is_not_stored_saves_nothing():
    store = Racing(races=0)
    store.save_state(NS, "c1", ["a"], 0)
    assert update_document(store, NS, "c1", lambda value: None) == (None, 0)
    assert store.load_state(NS, "c1") == (None, 0)
    store.saves.clear()
    assert update_document(store, NS, "c2", lambda value: None) == (None, 0)
    assert store.saves == []


def test_loaded_starts_the_first_round_without_a_load():
    store = Racing(races=0)
    store.save_state(NS, "c1", ["a"], 0)
    loads = []
    original = store.load_state
    store.load_state = lambda *a: loads.append(a) or original(*a)
    assert update_document(store, NS, "c1", append("b"), loaded=(["a"], 1))[0] == ["a", "b"]
    assert loads == []


def test_a_stale_loaded_value_is_loaded_again_after_its_conflict():
    store = Racing(races=0)
    store.save_state(NS, "c1", ["a", "other"], 0)
    store.save_state(NS, "c1", ["a", "other", "more"], 1)
    assert update_document(store, NS, "c1", append("b"), loaded=(["a"], 1), backoff=0)[0] == ["a", "other", "more", "b"]


def test_what_the_change_or_the_store_raises_propagates():
    store = Racing(races=0)

    def broken(value):
        raise ToolError("bad_list", "no")

    with pytest.raises(ToolError, match="no"):
        update_document(store, NS, "c1", broken)
    with pytest.raises(StorageError):
        update_document(store, NS, "c1", lambda value: {1, 2})  # not JSON


@pytest.mark.parametrize("attempts", [0, -1, True, 1.5])
def test_attempts_must_be_a_whole_number_of_at_least_one(attempts):
    with pytest.raises(ValueError, match="attempts must be an integer >= 1"):
        update_document(MemoryStorage(), NS, "c1", append("x"), attempts=attempts)


# -- ctx.services.state_store ----------------------------------------------------------------------


def test_a_bare_call_keeps_state_in_memory():
    assert CallContext().services.state_store("the notes") is None


def test_no_store_keeps_state_in_memory(tmp_path):
    ctx = CallContext(manager=make_manager(tmp_path))
    assert ctx.services.state_store("the notes") is None


def test_a_store_with_state_is_used_and_shared_only_asks_whether_workers_share_it(tmp_path):
    manager = make_manager(tmp_path, config={"storage": {"backend": "tinydb", "path": str(tmp_path / "store")}})
    ctx = CallContext(manager=manager)
    assert ctx.services.state_store("the notes", shared_only=True) is None
    assert not manager.storage_is_open  # decided from the configuration alone
    store = ctx.services.state_store("the notes")
    assert store is not None and store is manager.storage
    shared = make_manager(
        tmp_path,
        config={"storage": {"backend": "tinydb", "path": str(tmp_path / "s2"), "conversation_state": "store"}},
    )
    assert CallContext(manager=shared).services.state_store("the notes", shared_only=True) is shared.storage
    manager.close()
    shared.close()


def test_a_store_that_cannot_open_is_a_tool_error_naming_the_state(tmp_path):
    (tmp_path / "store").write_text("not a directory")
    manager = make_manager(tmp_path, config={"storage": {"backend": "tinydb", "path": str(tmp_path / "store")}})
    with pytest.raises(ToolError) as caught:
        CallContext(manager=manager).services.state_store("the notes", then="Nothing was noted; try again.")
    assert caught.value.code == "storage_unavailable"
    assert caught.value.message.startswith("the notes lives in the store, which could not be opened: ")
    assert caught.value.message.endswith("Nothing was noted; try again.")
    manager.close()


def test_lost_rounds_pause_a_random_moment_within_backoff_and_the_last_does_not(monkeypatch):
    from types import SimpleNamespace

    from entropic_mcp._storage import _update

    sleeps: list[float] = []
    monkeypatch.setattr(_update, "time", SimpleNamespace(sleep=sleeps.append))
    with pytest.raises(StateConflict):
        update_document(Racing(races=10), NS, "c1", append("mine"), attempts=10, backoff=0.05)
    assert len(sleeps) == 9 and all(0 <= pause <= 0.05 for pause in sleeps)
    assert all(pause <= 0.001 * 2**n for n, pause in enumerate(sleeps, 1))
    sleeps.clear()
    update_document(Racing(races=2), NS, "c1", append("mine"), backoff=0)
    assert sleeps == []
