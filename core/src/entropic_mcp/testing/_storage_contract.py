"""The storage backend contract: one test class every ``StorageBackend`` must pass.

Use it by subclassing and naming how to open your backend::

    import pytest
    from entropic_mcp.testing import StorageContract

    class TestMyBackend(StorageContract):
        @pytest.fixture
        def open_backend(self, tmp_path):
            # Each call opens a handle on the SAME store (a second process would do the same).
            return lambda: MyBackend(dsn=..., schema=f"test_{tmp_path.name}")

Set ``shares_store = False`` on the subclass when each call opens an independent store (an
in-memory backend): the tests that reopen the store or use two handles are then skipped.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from .._envelope import ServerResponse
from .._errors import StateConflict, StorageError
from .._pipeline import CallOutcome
from .._storage import DEFAULT_SCOPE, MAX_STATE_BYTES, StateStore, StorageBackend, ToolCallRecord
from .._storage._checked import checked

Opener = Callable[[], StorageBackend]


def _is_uuid(value: object) -> bool:
    try:
        return isinstance(value, str) and str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def _is_utc_iso(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return stamp.utcoffset() == timedelta(0)


def _outcome(name: str = "demo.echo", conversation_id: str = "c1") -> CallOutcome:
    return CallOutcome(
        name=name,
        response=ServerResponse(result="ok"),
        kind="success",
        elapsed_ms=0.5,
        conversation_id=conversation_id,
        args={"text": "hello"},
    )


def _record(name: str = "demo.echo", conversation_id: str = "c1") -> ToolCallRecord:
    return ToolCallRecord.from_outcome(_outcome(name, conversation_id))


class StorageContract:
    """The behaviour ``entropic.md`` ("Storage interface") requires of every backend."""

    #: False when every ``open_backend()`` call gives an independent store (in-memory backends).
    shares_store: bool = True

    @pytest.fixture
    def open_backend(self) -> Opener:
        pytest.fail(
            f"{type(self).__name__} must override the `open_backend` fixture: return a callable that "
            "opens a handle on one store for this test (see entropic_mcp.testing.StorageContract)"
        )

    @pytest.fixture
    def backend(self, open_backend: Opener) -> Iterator[StorageBackend]:
        store = open_backend()
        assert isinstance(store, StorageBackend), f"{type(store).__name__} lacks the StorageBackend methods"
        # as the manager presents every backend: behind CheckedStorage, which applies the argument rules
        checked_store = checked(store)
        yield checked_store
        checked_store.close()

    @pytest.fixture
    def root(self, backend: StorageBackend) -> str:
        return backend.create_conversation("root session", {"host": "contract"})

    def _delegation(
        self,
        backend: StorageBackend,
        root: str,
        *,
        target: str = "researcher",
        task: str = "look into it",
        summary: str | None = None,
        status: str = "completed",
    ) -> str:
        delegation_id, _ = backend.create_delegation(root, "lead", target, task, 5, [{"path": "a.py"}])
        if summary is not None:
            backend.complete_delegation(delegation_id, status, summary)
        return delegation_id

    def _reopen(self, open_backend: Opener) -> StorageBackend:
        if not self.shares_store:
            pytest.skip("this backend's handles do not share a store (shares_store = False)")
        return checked(open_backend())

    # -- conversations -----------------------------------------------------------------------------

    def test_create_conversation_returns_a_uuid(self, backend: StorageBackend) -> None:
        first = backend.create_conversation("one")
        second = backend.create_conversation("two")
        assert _is_uuid(first) and _is_uuid(second) and first != second

    def test_load_conversation_returns_the_record_and_messages_in_order(
        self, backend: StorageBackend, root: str
    ) -> None:
        backend.save_messages(root, [{"role": "user", "content": "first"}, {"role": "assistant", "content": "second"}])
        backend.save_messages(root, [{"role": "user", "content": "third"}])
        loaded = backend.load_conversation(root)
        assert [m["content"] for m in loaded["messages"]] == ["first", "second", "third"]
        conversation = loaded["conversation"]
        assert conversation["conversation_id"] == root
        assert conversation["title"] == "root session"
        assert conversation["metadata"] == {"host": "contract"}
        assert conversation["message_count"] == 3
        assert conversation["scope"] == DEFAULT_SCOPE
        assert _is_utc_iso(conversation["created_at"]) and _is_utc_iso(conversation["updated_at"])

    def test_messages_round_trip_unchanged(self, backend: StorageBackend, root: str) -> None:
        messages: list[dict[str, Any]] = [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "t1", "name": "fs.read", "arguments": {"path": "ü/ß.py"}}],
                "tokens": 12,
                "identity": "lead",
            },
            {"role": "tool", "content": 'line 1\nline 2 \u2603 "quoted"', "tool_call_id": "t1", "is_error": False},
            {"role": "user", "content": None, "extra": {"nested": [1, 2.5, None, True]}},
        ]
        backend.save_messages(root, messages)
        assert backend.load_conversation(root)["messages"] == messages

    def test_returned_data_is_a_copy(self, backend: StorageBackend, root: str) -> None:
        backend.save_messages(root, [{"role": "user", "content": "keep", "parts": ["a"]}])
        loaded = backend.load_conversation(root)
        loaded["messages"][0]["parts"].append("mutated")
        loaded["conversation"]["metadata"]["host"] = "mutated"
        again = backend.load_conversation(root)
        assert again["messages"][0]["parts"] == ["a"]
        assert again["conversation"]["metadata"] == {"host": "contract"}

    def test_load_unknown_conversation_raises(self, backend: StorageBackend) -> None:
        with pytest.raises(StorageError, match="unknown conversation"):
            backend.load_conversation(str(uuid.uuid4()))

    def test_save_messages_to_unknown_conversation_raises(self, backend: StorageBackend) -> None:
        with pytest.raises(StorageError, match="unknown conversation"):
            backend.save_messages(str(uuid.uuid4()), [{"role": "user", "content": "x"}])

    @pytest.mark.parametrize(
        "messages",
        ["just text", [{"content": "no role"}], ["not an object"], [{"role": "user", "content": {1, 2}}]],
        ids=["string", "missing-role", "non-object", "not-json"],
    )
    def test_save_messages_rejects_what_is_not_a_message_list(
        self, backend: StorageBackend, root: str, messages: Any
    ) -> None:
        with pytest.raises(StorageError):
            backend.save_messages(root, messages)
        assert backend.load_conversation(root)["messages"] == []

    def test_list_conversations_is_newest_first_with_limit_and_offset(self, backend: StorageBackend) -> None:
        ids = [backend.create_conversation(f"c{i}") for i in range(5)]
        listed = backend.list_conversations(limit=50, offset=0)
        assert [c["conversation_id"] for c in listed] == ids[::-1]
        page = backend.list_conversations(limit=2, offset=1)
        assert [c["conversation_id"] for c in page] == [ids[3], ids[2]]
        assert backend.list_conversations(limit=10, offset=5) == []

    def test_list_rejects_a_bad_limit_or_offset(self, backend: StorageBackend) -> None:
        for limit, offset in ((0, 0), (-1, 0), (10, -1)):
            with pytest.raises(StorageError):
                backend.list_conversations(limit=limit, offset=offset)
            with pytest.raises(StorageError):
                backend.list_delegations(limit=limit, offset=offset)

    def test_save_snapshot_returns_an_id_and_is_counted(self, backend: StorageBackend, root: str) -> None:
        snapshot_id = backend.save_snapshot(root, [{"role": "user", "content": "before compaction"}])
        assert _is_uuid(snapshot_id)
        assert backend.stats()["snapshots"] == 1
        with pytest.raises(StorageError, match="unknown conversation"):
            backend.save_snapshot(str(uuid.uuid4()), [])

    def test_delete_conversation_cascades_to_messages_snapshots_and_delegations(
        self, backend: StorageBackend, root: str
    ) -> None:
        backend.save_messages(root, [{"role": "user", "content": "hi"}])
        backend.save_snapshot(root, [{"role": "user", "content": "hi"}])
        delegation_id, child = backend.create_delegation(root, "lead", "coder", "fix the parser", 3, None)
        backend.save_messages(child, [{"role": "assistant", "content": "on it"}])
        grandchild_delegation, grandchild = backend.create_delegation(
            child, "coder", "researcher", "read docs", 2, None
        )
        backend.complete_delegation(grandchild_delegation, "completed", "parser docs read")
        backend.complete_delegation(delegation_id, "completed", "parser fixed")
        other = backend.create_conversation("unrelated")
        backend.save_messages(other, [{"role": "user", "content": "stay"}])

        backend.delete_conversation(root)

        for gone in (root, child, grandchild):
            with pytest.raises(StorageError):
                backend.load_conversation(gone)
        for gone in (delegation_id, grandchild_delegation):
            with pytest.raises(StorageError):
                backend.load_delegation_with_messages(gone)
        assert backend.search_delegations("parser") == []
        assert backend.latest_delegation_for_target("coder") is None
        stats = backend.stats()
        assert (stats["conversations"], stats["messages"], stats["snapshots"], stats["delegations"]) == (1, 1, 0, 0)
        assert backend.load_conversation(other)["messages"] == [{"role": "user", "content": "stay"}]

    def test_deleting_a_child_conversation_removes_its_delegation_only(
        self, backend: StorageBackend, root: str
    ) -> None:
        delegation_id, child = backend.create_delegation(root, "lead", "coder", "task", 3, None)
        backend.delete_conversation(child)
        with pytest.raises(StorageError):
            backend.load_delegation_with_messages(delegation_id)
        assert backend.load_conversation(root)["conversation"]["conversation_id"] == root

    def test_delete_unknown_conversation_raises(self, backend: StorageBackend) -> None:
        with pytest.raises(StorageError, match="unknown conversation"):
            backend.delete_conversation(str(uuid.uuid4()))

    # -- delegations -------------------------------------------------------------------------------

    def test_create_delegation_makes_a_running_record_and_a_child_conversation(
        self, backend: StorageBackend, root: str
    ) -> None:
        delegation_id, child = backend.create_delegation(
            root, "lead", "researcher", "find the bug", 7, [{"path": "a.py", "lines": "1-5"}]
        )
        assert _is_uuid(delegation_id) and _is_uuid(child)
        record = backend.load_delegation_with_messages(delegation_id)
        assert record["delegation_id"] == delegation_id
        assert record["child_conversation_id"] == child
        assert record["parent_id"] == root
        assert (record["delegating_tier"], record["target_tier"], record["task"]) == (
            "lead",
            "researcher",
            "find the bug",
        )
        assert record["max_turns"] == 7
        assert record["context"] == [{"path": "a.py", "lines": "1-5"}]
        assert record["status"] == "running" and record["summary"] is None and record["completed_at"] is None
        assert _is_utc_iso(record["created_at"])
        assert record["messages"] == []
        assert backend.load_conversation(child)["conversation"]["parent_delegation_id"] == delegation_id

    @pytest.mark.parametrize("parent", ["", "   ", None], ids=["empty", "blank", "none"])
    def test_create_delegation_with_an_empty_parent_raises(self, backend: StorageBackend, parent: Any) -> None:
        with pytest.raises(StorageError):
            backend.create_delegation(parent, "lead", "researcher", "task", 5, None)
        assert backend.stats()["delegations"] == 0

    def test_create_delegation_with_an_unknown_parent_raises(self, backend: StorageBackend) -> None:
        with pytest.raises(StorageError, match="unknown conversation"):
            backend.create_delegation(str(uuid.uuid4()), "lead", "researcher", "task", 5, None)
        assert backend.stats()["delegations"] == 0

    @pytest.mark.parametrize(
        "field, value",
        [
            ("target_tier", ""),
            ("delegating_tier", None),
            ("task", ""),
            ("max_turns", "5"),
            ("max_turns", -2),
            ("context", "a.py"),
            ("context", [1, 2]),
        ],
    )
    def test_create_delegation_rejects_bad_fields(
        self, backend: StorageBackend, root: str, field: str, value: Any
    ) -> None:
        args: dict[str, Any] = {
            "parent_id": root,
            "delegating_tier": "lead",
            "target_tier": "researcher",
            "task": "task",
            "max_turns": 5,
            "context": None,
        }
        args[field] = value
        with pytest.raises(StorageError):
            backend.create_delegation(**args)
        assert backend.stats()["delegations"] == 0

    def test_complete_delegation_stores_status_summary_and_time(self, backend: StorageBackend, root: str) -> None:
        delegation_id = self._delegation(backend, root)
        backend.complete_delegation(delegation_id, "failed", "ran out of turns")
        record = backend.load_delegation_with_messages(delegation_id)
        assert (record["status"], record["summary"]) == ("failed", "ran out of turns")
        assert _is_utc_iso(record["completed_at"]) and record["completed_at"] >= record["created_at"]

    def test_complete_unknown_delegation_raises(self, backend: StorageBackend) -> None:
        with pytest.raises(StorageError, match="unknown delegation"):
            backend.complete_delegation(str(uuid.uuid4()), "completed", "done")

    def test_a_second_completion_raises_and_keeps_the_first(self, backend: StorageBackend, root: str) -> None:
        delegation_id = self._delegation(backend, root, summary="first result")
        with pytest.raises(StorageError, match="already completed"):
            backend.complete_delegation(delegation_id, "failed", "second result")
        record = backend.load_delegation_with_messages(delegation_id)
        assert (record["status"], record["summary"]) == ("completed", "first result")

    @pytest.mark.parametrize("status", ["running", "done", "", None])
    def test_complete_with_an_invalid_status_raises(self, backend: StorageBackend, root: str, status: Any) -> None:
        delegation_id = self._delegation(backend, root)
        with pytest.raises(StorageError, match="status"):
            backend.complete_delegation(delegation_id, status, "x")
        assert backend.load_delegation_with_messages(delegation_id)["status"] == "running"

    def test_load_delegation_with_messages_returns_the_child_conversation(
        self, backend: StorageBackend, root: str
    ) -> None:
        delegation_id, child = backend.create_delegation(root, "lead", "coder", "write tests", 4, None)
        backend.save_messages(
            child, [{"role": "user", "content": "write tests"}, {"role": "assistant", "content": "done"}]
        )
        backend.complete_delegation(delegation_id, "completed", "tests written")
        record = backend.load_delegation_with_messages(delegation_id)
        assert [m["content"] for m in record["messages"]] == ["write tests", "done"]
        assert (record["target_tier"], record["task"], record["summary"]) == ("coder", "write tests", "tests written")

    def test_load_unknown_delegation_raises(self, backend: StorageBackend) -> None:
        with pytest.raises(StorageError, match="unknown delegation"):
            backend.load_delegation_with_messages(str(uuid.uuid4()))
        with pytest.raises(StorageError):
            backend.load_delegation_with_messages("")

    def test_latest_delegation_for_target_is_the_most_recent_completed(
        self, backend: StorageBackend, root: str
    ) -> None:
        assert backend.latest_delegation_for_target("researcher") is None
        older = self._delegation(backend, root, summary="older")
        newer = self._delegation(backend, root, summary="newer")
        self._delegation(backend, root)  # still running
        self._delegation(backend, root, summary="gave up", status="failed")
        self._delegation(backend, root, target="coder", summary="other tier")
        assert backend.latest_delegation_for_target("researcher") == newer
        assert older != newer
        assert backend.latest_delegation_for_target("nobody") is None

    def test_latest_delegation_follows_completion_order_not_creation(self, backend: StorageBackend, root: str) -> None:
        first = self._delegation(backend, root)
        second = self._delegation(backend, root)
        backend.complete_delegation(second, "completed", "second finished first")
        backend.complete_delegation(first, "completed", "first finished last")
        assert backend.latest_delegation_for_target("researcher") == first

    def test_list_delegations_is_newest_first(self, backend: StorageBackend, root: str) -> None:
        ids = [self._delegation(backend, root, task=f"task {i}") for i in range(4)]
        listed = backend.list_delegations(limit=3, offset=0)
        assert [d["delegation_id"] for d in listed] == ids[::-1][:3]
        assert listed[0]["task"] == "task 3" and listed[0]["status"] == "running"
        assert [d["delegation_id"] for d in backend.list_delegations(limit=10, offset=3)] == [ids[0]]

    # -- search ------------------------------------------------------------------------------------

    def test_search_returns_completed_delegations_only(self, backend: StorageBackend, root: str) -> None:
        done = self._delegation(backend, root, task="audit the payment code", summary="payment code is fine")
        self._delegation(backend, root, task="audit the payment code again")
        self._delegation(backend, root, task="payment retry", summary="payment retries broken", status="failed")
        assert [r["delegation_id"] for r in backend.search_delegations("payment", 10)] == [done]

    def test_search_result_has_the_followup_shape(self, backend: StorageBackend, root: str) -> None:
        delegation_id = self._delegation(backend, root, target="coder", task="fix login", summary="login fixed")
        (result,) = backend.search_delegations("login", 3)
        assert set(result) == {"delegation_id", "target_tier", "task", "summary", "completed_at"}
        assert (result["delegation_id"], result["target_tier"], result["task"], result["summary"]) == (
            delegation_id,
            "coder",
            "fix login",
            "login fixed",
        )
        assert _is_utc_iso(result["completed_at"])

    def test_search_is_case_insensitive(self, backend: StorageBackend, root: str) -> None:
        delegation_id = self._delegation(backend, root, task="Check OAuth Tokens", summary="Token REFRESH works")
        for query in ("oauth", "OAUTH tokens", "refresh", "ReFrEsH"):
            assert [r["delegation_id"] for r in backend.search_delegations(query, 3)] == [delegation_id], query

    def test_search_needs_every_word_in_the_summary_or_the_task(self, backend: StorageBackend, root: str) -> None:
        both = self._delegation(backend, root, task="profile the importer", summary="importer is slow on csv")
        self._delegation(backend, root, task="profile the exporter", summary="exporter is fine")
        assert [r["delegation_id"] for r in backend.search_delegations("profile csv", 5)] == [both]
        assert backend.search_delegations("importer yaml", 5) == []

    def test_search_ranks_by_summary_matches_then_newest(self, backend: StorageBackend, root: str) -> None:
        task_only_old = self._delegation(backend, root, task="cache invalidation bug", summary="nothing found")
        summary_one = self._delegation(backend, root, task="cache work", summary="bug reproduced")
        summary_both = self._delegation(backend, root, task="look", summary="cache bug fixed")
        task_only_new = self._delegation(backend, root, task="cache bug again", summary="no luck")
        ranked = [r["delegation_id"] for r in backend.search_delegations("cache bug", 10)]
        assert ranked == [summary_both, summary_one, task_only_new, task_only_old]

    def test_search_respects_max_results(self, backend: StorageBackend, root: str) -> None:
        ids = [self._delegation(backend, root, task=f"report {i}", summary="weekly report") for i in range(5)]
        assert [r["delegation_id"] for r in backend.search_delegations("report", 2)] == ids[::-1][:2]
        with pytest.raises(StorageError):
            backend.search_delegations("report", 0)

    @pytest.mark.parametrize(
        "query, matches",
        [
            ("100%", True),
            ("1000", False),
            ("%", True),
            ("a_b", True),
            ("axb", False),
            ("_", True),
            (".*", False),
            ("(", False),
            ("[x]", False),
            ("c++", True),
            ("\\d", False),
        ],
    )
    def test_search_treats_percent_underscore_and_regex_characters_literally(
        self, backend: StorageBackend, root: str, query: str, matches: bool
    ) -> None:
        self._delegation(backend, root, task="coverage of a_b and c++", summary="coverage is 100% now")
        found = backend.search_delegations(query, 3)
        assert bool(found) is matches

    @pytest.mark.parametrize(
        "query, matches",
        [
            ("c:\\tmp", True),
            ("\\", True),
            ("\\%", False),
            ("\\_", False),
            ("it's", True),
            ("'", True),
            ("''", False),
            ('"q"', True),
            ("50%_", True),
            ("50%x", False),
            ("%_", True),
            ("_%", False),
            ("*", False),
            ("?", False),
            ("$1", False),
            ("{}", False),
            ("|", False),
            ("^it", False),
            ("tmp$", False),
        ],
    )
    def test_search_matches_escape_and_quote_characters_literally(
        self, backend: StorageBackend, root: str, query: str, matches: bool
    ) -> None:
        """Whatever a backend escapes with (``\\`` in SQL LIKE, quotes in SQL text) is literal too."""
        self._delegation(backend, root, task="it's in c:\\tmp", summary='done: 50%_ of "q"')
        found = backend.search_delegations(query, 3)
        assert bool(found) is matches

    @pytest.mark.parametrize("query", ["", "   ", None, 5])
    def test_search_rejects_an_empty_or_non_text_query(self, backend: StorageBackend, query: Any) -> None:
        with pytest.raises(StorageError):
            backend.search_delegations(query, 3)

    def test_search_agrees_with_a_reference_model(self, backend: StorageBackend, root: str) -> None:
        words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
        rng = random.Random(20261130)
        done: list[tuple[str, str, str]] = []
        for _ in range(60):
            task = " ".join(rng.sample(words, 2))
            summary = " ".join(rng.sample(words, 3)).upper() if rng.random() < 0.3 else " ".join(rng.sample(words, 3))
            status = "completed" if rng.random() < 0.8 else "failed"
            delegation_id = self._delegation(backend, root, task=task, summary=summary, status=status)
            if status == "completed":
                done.append((delegation_id, task.lower(), summary.lower()))
        for _ in range(40):
            query = rng.sample(words, rng.choice([1, 2]))
            expected = []
            for order, (delegation_id, task, summary) in enumerate(done):
                if all(w in task.split() or w in summary.split() for w in query):
                    expected.append((sum(w in summary.split() for w in query), order, delegation_id))
            expected.sort(reverse=True)
            got = [r["delegation_id"] for r in backend.search_delegations(" ".join(query), 10)]
            assert got == [e[2] for e in expected[:10]], query

    # -- scopes ------------------------------------------------------------------------------------

    def test_conversations_keep_their_scope_and_delegations_inherit_it(self, backend: StorageBackend) -> None:
        root = backend.create_conversation("tenant a", None, "tenant-a")
        delegation_id, child = backend.create_delegation(root, "lead", "coder", "task", 2, None)
        _, grandchild = backend.create_delegation(child, "coder", "researcher", "deeper", 2, None)
        for conversation_id in (root, child, grandchild):
            assert backend.load_conversation(conversation_id)["conversation"]["scope"] == "tenant-a"
            assert backend.scope_of(conversation_id) == "tenant-a"
        assert backend.load_delegation_with_messages(delegation_id)["scope"] == "tenant-a"
        assert backend.list_delegations(10, 0)[0]["scope"] == "tenant-a"
        assert backend.scope_of(backend.create_conversation("plain")) == DEFAULT_SCOPE
        assert backend.scope_of(str(uuid.uuid4())) is None

    @pytest.mark.parametrize("scope", ["", "  ", None, 5], ids=["empty", "blank", "none", "int"])
    def test_create_conversation_rejects_a_bad_scope(self, backend: StorageBackend, scope: Any) -> None:
        with pytest.raises(StorageError, match="scope"):
            backend.create_conversation("x", None, scope)
        assert backend.stats()["conversations"] == 0

    def test_search_and_latest_see_only_the_given_scope(self, backend: StorageBackend) -> None:
        a = backend.create_conversation("a", None, "tenant-a")
        b = backend.create_conversation("b", None, "tenant-b")
        in_a = self._delegation(backend, a, target="coder", task="rotate the keys", summary="keys rotated")
        older_b = self._delegation(backend, b, target="coder", task="rotate the keys", summary="keys rotated too")
        newest_b = self._delegation(backend, b, target="researcher", task="other", summary="unrelated")
        _, a_child = backend.create_delegation(a, "lead", "coder", "nested", 2, None)
        nested_a = self._delegation(backend, a_child, target="researcher", task="keys below", summary="nested keys")

        def ids(rows: list[dict[str, Any]]) -> list[str]:
            return [r["delegation_id"] for r in rows]

        assert ids(backend.search_delegations("keys", 10, "tenant-a")) == [nested_a, in_a]
        assert ids(backend.search_delegations("keys", 10, "tenant-b")) == [older_b]
        assert backend.search_delegations("keys", 10, "tenant-c") == []
        assert ids(backend.search_delegations("keys", 10)) == [nested_a, older_b, in_a]
        assert backend.latest_delegation_for_target("coder", "tenant-a") == in_a
        assert backend.latest_delegation_for_target("coder", "tenant-b") == older_b
        assert backend.latest_delegation_for_target("researcher", "tenant-a") == nested_a
        assert backend.latest_delegation_for_target("researcher", "tenant-b") == newest_b
        assert backend.latest_delegation_for_target("coder", "tenant-c") is None
        assert backend.latest_delegation_for_target("researcher") == nested_a
        backend.delete_conversation(a)
        assert backend.search_delegations("keys", 10, "tenant-a") == []
        assert backend.latest_delegation_for_target("coder", "tenant-a") is None
        assert ids(backend.search_delegations("keys", 10)) == [older_b]

    @pytest.mark.parametrize("scope", ["", 5], ids=["empty", "int"])
    def test_search_and_latest_reject_a_bad_scope(self, backend: StorageBackend, scope: Any) -> None:
        with pytest.raises(StorageError, match="scope"):
            backend.search_delegations("x", 3, scope)
        with pytest.raises(StorageError, match="scope"):
            backend.latest_delegation_for_target("coder", scope)

    # -- audit trail and stats ---------------------------------------------------------------------

    def test_record_tool_call_is_counted(self, backend: StorageBackend) -> None:
        for i in range(3):
            backend.record_tool_call(_record(conversation_id=f"c{i}"))
        assert backend.stats()["tool_calls"] == 3

    @pytest.mark.parametrize("value", ["demo.echo", None, {"tool": "demo.echo"}, "outcome"], ids=repr)
    def test_record_tool_call_rejects_what_is_not_a_record(self, backend: StorageBackend, value: Any) -> None:
        if value == "outcome":
            value = _outcome()
        with pytest.raises(StorageError, match="ToolCallRecord"):
            backend.record_tool_call(value)
        assert backend.stats()["tool_calls"] == 0

    def test_stats_counts_everything(self, backend: StorageBackend, root: str) -> None:
        backend.save_messages(root, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        self._delegation(backend, root, summary="ok")
        self._delegation(backend, root, summary="no", status="failed")
        self._delegation(backend, root)
        stats = backend.stats()
        assert all(isinstance(v, int) for v in stats.values())
        assert stats["conversations"] == 4 and stats["messages"] == 2 and stats["delegations"] == 3
        assert (stats["running_delegations"], stats["completed_delegations"], stats["failed_delegations"]) == (1, 1, 1)

    # -- state documents (StateStore, optional) ---------------------------------------------------

    @pytest.fixture
    def states(self, backend: StorageBackend) -> StateStore:
        if not isinstance(backend, StateStore):
            pytest.skip(f"{type(backend).__name__} does not implement StateStore (optional)")
        return backend

    def test_state_is_absent_until_saved_then_versioned(self, states: StateStore) -> None:
        assert states.load_state("plugin.todo", "conversation-1") == (None, 0)
        first = {"items": [{"content": "write the tests", "status": "pending"}], "note": "héllo ✓"}
        assert states.save_state("plugin.todo", "conversation-1", first, 0) == 1
        assert states.load_state("plugin.todo", "conversation-1") == (first, 1)
        assert states.save_state("plugin.todo", "conversation-1", {"items": []}, 1) == 2
        assert states.load_state("plugin.todo", "conversation-1") == ({"items": []}, 2)
        values: list[Any] = [[1, 2, [3]], "text", "nul \x00 inside", 7, 2.5, True, {}]
        for value in values:
            version = states.load_state("plugin.kinds", "k")[1]
            states.save_state("plugin.kinds", "k", value, version)
            assert states.load_state("plugin.kinds", "k")[0] == value

    def test_state_returns_a_copy(self, states: StateStore) -> None:
        states.save_state("plugin.todo", "c", {"items": [1]}, 0)
        value, _ = states.load_state("plugin.todo", "c")
        value["items"].append(2)
        assert states.load_state("plugin.todo", "c") == ({"items": [1]}, 1)

    def test_a_stale_version_is_a_conflict_and_changes_nothing(self, states: StateStore) -> None:
        states.save_state("plugin.todo", "c", {"n": 1}, 0)
        states.save_state("plugin.todo", "c", {"n": 2}, 1)
        for stale in (0, 1, 3):
            with pytest.raises(StateConflict, match="load it again"):
                states.save_state("plugin.todo", "c", {"n": 99}, stale)
        assert states.load_state("plugin.todo", "c") == ({"n": 2}, 2)
        assert issubclass(StateConflict, StorageError)

    def test_none_deletes_at_the_current_version_only(self, states: StateStore) -> None:
        states.save_state("plugin.todo", "c", {"n": 1}, 0)
        with pytest.raises(StateConflict):
            states.save_state("plugin.todo", "c", None, 0)
        assert states.save_state("plugin.todo", "c", None, 1) == 0
        assert states.load_state("plugin.todo", "c") == (None, 0)
        assert states.save_state("plugin.todo", "c", None, 0) == 0  # deleting nothing is nothing
        assert states.save_state("plugin.todo", "c", {"n": 2}, 0) == 1

    def test_namespaces_and_keys_are_separate(self, states: StateStore) -> None:
        states.save_state("plugin.a", "k", "a", 0)
        states.save_state("plugin.b", "k", "b", 0)
        states.save_state("plugin.a", "k2", "a2", 0)
        assert [
            states.load_state(ns, key)[0] for ns, key in (("plugin.a", "k"), ("plugin.b", "k"), ("plugin.a", "k2"))
        ] == ["a", "b", "a2"]
        assert states.load_state("plugin.b", "k2") == (None, 0)

    @pytest.mark.parametrize(
        "namespace, key",
        [("", "k"), ("ns", ""), ("  ", "k"), (None, "k"), ("ns", 3), ("n\x00s", "k"), ("ns", "k" * 1025)],
    )
    def test_state_rejects_bad_names(self, states: StateStore, namespace: Any, key: Any) -> None:
        with pytest.raises(StorageError):
            states.load_state(namespace, key)
        with pytest.raises(StorageError):
            states.save_state(namespace, key, {"n": 1}, 0)

    @pytest.mark.parametrize(
        "value", [{1, 2}, object(), {"f": float("nan")}, {"k": b"bytes"}, "x" * (MAX_STATE_BYTES + 1), (1, 2), {1: "a"}]
    )
    def test_state_rejects_values_that_are_not_small_json(self, states: StateStore, value: Any) -> None:
        with pytest.raises(StorageError) as caught:
            states.save_state("plugin.todo", "c", value, 0)
        assert not isinstance(caught.value, StateConflict)
        assert states.load_state("plugin.todo", "c") == (None, 0)

    @pytest.mark.parametrize("version", [-1, True, 1.0, "0", None])
    def test_state_rejects_a_bad_version(self, states: StateStore, version: Any) -> None:
        with pytest.raises(StorageError):
            states.save_state("plugin.todo", "c", {"n": 1}, version)
        assert states.load_state("plugin.todo", "c") == (None, 0)

    def test_state_of_unrelated_keys_survives_deleting_conversations(self, states: StateStore) -> None:
        backend = states
        root = backend.create_conversation("x")  # type: ignore[attr-defined]
        states.save_state("plugin.todo", root, {"n": 1}, 0)
        backend.delete_conversation(root)  # type: ignore[attr-defined]
        # state is keyed by the plugin, not tied to stored conversations: the plugin removes it
        assert states.load_state("plugin.todo", root) == ({"n": 1}, 1)

    def test_prune_removes_the_namespaces_documents_older_than_asked(self, states: StateStore) -> None:
        states.save_state("plugin.todo", "old-1", {"n": 1}, 0)
        states.save_state("plugin.todo", "old-2", {"n": 2}, 0)
        states.save_state("plugin.todo", "old-2", {"n": 3}, 1)
        states.save_state("plugin.other", "kept", {"n": 4}, 0)
        assert states.prune_states("plugin.todo", 3600) == 0  # nothing is an hour old
        assert states.load_state("plugin.todo", "old-1") == ({"n": 1}, 1)
        time.sleep(0.02)
        assert states.prune_states("plugin.todo", 0) == 2
        assert states.load_state("plugin.todo", "old-1") == (None, 0)
        assert states.load_state("plugin.todo", "old-2") == (None, 0)
        assert states.load_state("plugin.other", "kept") == ({"n": 4}, 1)
        assert states.prune_states("plugin.todo", 0) == 0
        assert states.save_state("plugin.todo", "old-1", {"n": 5}, 0) == 1  # a pruned key starts afresh

    @pytest.mark.parametrize(
        "namespace, older_than",
        [
            ("", 1),
            (None, 1),
            ("ns", -1),
            ("ns", float("nan")),
            ("ns", float("inf")),
            ("ns", True),
            ("ns", "1"),
            ("ns", None),
        ],
    )
    def test_prune_rejects_bad_arguments(self, states: StateStore, namespace: Any, older_than: Any) -> None:
        states.save_state("ns", "k", {"n": 1}, 0)
        with pytest.raises(StorageError):
            states.prune_states(namespace, older_than)
        assert states.load_state("ns", "k") == ({"n": 1}, 1)

    def test_concurrent_read_modify_write_loses_no_update(self, states: StateStore, open_backend: Opener) -> None:
        handles: list[Any] = [states]
        if self.shares_store:
            handles.append(self._reopen(open_backend))
        errors: list[BaseException] = []

        def add(handle: Any, n: int) -> None:
            try:
                for i in range(15):
                    while True:
                        value, version = handle.load_state("plugin.todo", "shared")
                        items = list(value or [])
                        items.append(f"{n}-{i}")
                        try:
                            handle.save_state("plugin.todo", "shared", items, version)
                            break
                        except StateConflict:
                            continue
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=add, args=(handles[n % len(handles)], n)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            assert errors == [], errors
            value, version = states.load_state("plugin.todo", "shared")
            assert sorted(value) == sorted(f"{n}-{i}" for n in range(4) for i in range(15))
            assert version == 60
        finally:
            for handle in handles[1:]:
                handle.close()

    def test_state_survives_close_and_reopen(self, open_backend: Opener) -> None:
        store = open_backend()
        if not isinstance(store, StateStore):
            store.close()
            pytest.skip(f"{type(store).__name__} does not implement StateStore (optional)")
        store.save_state("plugin.todo", "c", {"items": ["kept"]}, 0)
        store.save_state("plugin.todo", "c", {"items": ["kept", "too"]}, 1)
        store.save_state("plugin.todo", "gone", {"x": 1}, 0)
        store.save_state("plugin.todo", "gone", None, 1)
        store.close()
        reopened = self._reopen(open_backend)
        try:
            assert reopened.load_state("plugin.todo", "c") == ({"items": ["kept", "too"]}, 2)  # type: ignore[attr-defined]
            assert reopened.load_state("plugin.todo", "gone") == (None, 0)  # type: ignore[attr-defined]
        finally:
            reopened.close()

    # -- lifecycle and sharing ---------------------------------------------------------------------

    def test_close_is_idempotent_and_later_calls_raise(self, open_backend: Opener) -> None:
        store = open_backend()
        store.create_conversation("x")
        store.close()
        store.close()
        with pytest.raises(StorageError, match="closed"):
            store.create_conversation("y")

    def test_threads_writing_at_once_lose_nothing(self, backend: StorageBackend, root: str) -> None:
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(20):
                    delegation_id, child = backend.create_delegation(root, "lead", "coder", f"t{n}-{i}", 2, None)
                    backend.save_messages(child, [{"role": "user", "content": f"m{n}-{i}"}])
                    backend.complete_delegation(delegation_id, "completed", f"s{n}-{i} threadwork")
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        stats = backend.stats()
        assert (stats["delegations"], stats["completed_delegations"], stats["messages"]) == (80, 80, 80)
        assert len(backend.search_delegations("threadwork", 10)) == 10

    def test_data_survives_close_and_reopen(self, open_backend: Opener) -> None:
        store = open_backend()
        root = store.create_conversation("persisted", {"v": 1})
        store.save_messages(root, [{"role": "user", "content": "remember me"}])
        delegation_id = self._delegation(store, root, target="coder", task="persist", summary="kept across restarts")
        store.close()
        reopened = self._reopen(open_backend)
        try:
            assert reopened.load_conversation(root)["messages"] == [{"role": "user", "content": "remember me"}]
            assert reopened.latest_delegation_for_target("coder") == delegation_id
            assert [r["delegation_id"] for r in reopened.search_delegations("restarts", 3)] == [delegation_id]
            with pytest.raises(StorageError, match="already completed"):
                reopened.complete_delegation(delegation_id, "completed", "again")
        finally:
            reopened.close()

    def test_a_second_handle_sees_the_first_handles_writes(self, backend: StorageBackend, open_backend: Opener) -> None:
        other = self._reopen(open_backend)
        try:
            root = backend.create_conversation("shared")
            delegation_id, _ = other.create_delegation(root, "lead", "researcher", "shared task", 3, None)
            backend.complete_delegation(delegation_id, "completed", "shared summary")
            assert [r["delegation_id"] for r in other.search_delegations("shared", 3)] == [delegation_id]
            other.delete_conversation(root)
            with pytest.raises(StorageError):
                backend.load_conversation(root)
            assert re.fullmatch(r"[0-9a-f-]{36}", delegation_id)
        finally:
            other.close()
