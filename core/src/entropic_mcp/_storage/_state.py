"""The store's contents in memory: tables in TinyDB's layout plus the indexes the protocol's queries need.

Every change is an *operation* — a JSON-able dict built by a ``prepare_*`` method, which validates
it against the current contents and raises ``StorageError`` when it cannot be done — and then
applied by ``apply``. Applying never fails and is deterministic, so replaying a journal of
operations rebuilds the same contents in every process. The TinyDB backend journals each
operation before applying it; the in-memory test backend just applies it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from .._errors import StateConflict, StorageError
from ._records import DEFAULT_SCOPE
from ._rules import checked_copy, validate_messages, validate_prune, validate_state
from ._rules import dumps as dumps
from ._search import SearchIndex, query_words

#: ``states`` holds the StateStore documents (plugin state under a namespace and a key).
TABLES = ("conversations", "messages", "snapshots", "delegations", "states")
SEARCH_FIELDS = ("delegation_id", "target_tier", "task", "summary", "completed_at")


def new_id() -> str:
    return str(uuid.uuid4())


def copy(value: Any) -> Any:
    """A deep copy of JSON data, so callers never share our documents."""
    return orjson.loads(orjson.dumps(value))


# -- tables in TinyDB's layout, changed in place ---------------------------------------------------


class _Rows(dict):  # type: ignore[type-arg]
    """A table's documents keyed by ``str(doc_id)`` (TinyDB's JSON layout), accepting int ids too."""

    __slots__ = ()

    def __getitem__(self, key: object) -> Any:
        return dict.__getitem__(self, str(key))

    def __setitem__(self, key: object, value: Any) -> None:
        dict.__setitem__(self, str(key), value)

    def __delitem__(self, key: object) -> None:
        dict.__delitem__(self, str(key))

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, str(key))

    def get(self, key: object, default: Any = None) -> Any:
        return dict.get(self, str(key), default)

    def pop(self, key: object, *default: Any) -> Any:
        return dict.pop(self, str(key), *default)


class _DocTable:
    """One table: TinyDB's document numbering (the next id after the largest used) and layout.

    TinyDB's own ``Table`` rereads and converts the whole table on every change (O(n) per insert)
    and can only be made incremental by overriding its private methods; this keeps the same
    documents and ids with plain dict operations, so the snapshot is still a file
    ``TinyDB(path, access_mode="r")`` opens, and no TinyDB internals are relied on.
    """

    __slots__ = ("next_id", "rows")

    def __init__(self, rows: _Rows, next_id: int | None = None) -> None:
        self.rows = rows
        self.next_id = next_id if next_id is not None else max(map(int, rows), default=0) + 1

    def insert(self, document: Mapping[str, Any]) -> int:
        doc_id = self.next_id
        self.next_id += 1
        self.rows[doc_id] = dict(document)
        return doc_id

    def update(self, fields: Mapping[str, Any], doc_ids: Sequence[int]) -> None:
        for doc_id in doc_ids:
            self.rows[doc_id].update(fields)

    def remove(self, doc_ids: Sequence[int]) -> None:
        for doc_id in doc_ids:
            del self.rows[doc_id]


# -- argument checks -----------------------------------------------------------------------------


def _now(last: str) -> str:
    # Strictly after the newest stamp already stored, so "newest" is never a tie and never goes
    # backwards when the clock does.
    now = datetime.now(UTC)
    if last:
        floor = datetime.fromisoformat(last) + timedelta(microseconds=1)
        now = max(now, floor)
    return now.isoformat(timespec="microseconds")


# -- the contents ----------------------------------------------------------------------------------


class StoreState:
    """Tables and indexes; ``prepare_*`` validate and build operations, ``apply`` performs them."""

    def __init__(
        self,
        tables: Mapping[str, Mapping[str, Any]] | None = None,
        read_ref: Callable[[Any], list[Any]] | None = None,
        next_ids: Mapping[str, int] | None = None,
    ) -> None:
        # ``read_ref`` loads a message batch kept outside memory (``{"ref": ...}`` documents).
        self._read_ref = read_ref
        memory: dict[str, _Rows] = {}
        for name in TABLES:
            rows = (tables or {}).get(name) or {}
            memory[name] = _Rows(sorted(rows.items(), key=lambda item: int(item[0])))
        self._memory = memory
        # Numbering from the largest id present would reuse ids the writer already used after
        # deletes, so the next ids travel with the snapshot.
        self._tables = {name: _DocTable(memory[name], (next_ids or {}).get(name)) for name in TABLES}
        self.conversations = self._tables["conversations"]
        self.messages = self._tables["messages"]
        self.snapshots = self._tables["snapshots"]
        self.delegations = self._tables["delegations"]
        self.states = self._tables["states"]
        self.last_time = ""
        self._reindex()

    # -- indexes ---------------------------------------------------------------------------------

    def _reindex(self) -> None:
        memory = self._memory
        # Indexes hold TinyDB document ids.
        self._conv: dict[str, int] = {}
        self._msgs: dict[str, list[int]] = {}  # message batches, in order
        self._msg_counts: dict[str, int] = {}
        self._snaps: dict[str, list[int]] = {}
        self._deleg: dict[str, int] = {}
        self._deleg_by_conv: dict[str, set[str]] = {}
        # (scope, target) -> completed delegation ids in completion order; scope None: every scope
        self._completed_by_target: dict[tuple[str | None, str], dict[str, None]] = {}
        self._completion = 0
        # Completed delegation id -> (scope, recency key); a scope's search index is built from
        # these on its first search, so opening a big store (and processes that never search) skip it.
        self._completed: dict[str, tuple[str, tuple[str, int]]] = {}
        self._search_indexes: dict[str | None, SearchIndex] = {}
        self._counts = {"completed": 0, "failed": 0, "running": 0}
        for key, doc in memory["conversations"].items():
            self._conv[doc["conversation_id"]] = int(key)
            self._msgs[doc["conversation_id"]] = []
            self._msg_counts[doc["conversation_id"]] = 0
            self._snaps[doc["conversation_id"]] = []
            self.last_time = max(self.last_time, doc["updated_at"])
        for key, doc in memory["messages"].items():
            self._msgs[doc["conversation_id"]].append(int(key))
            self._msg_counts[doc["conversation_id"]] += doc["count"]
        for key, doc in memory["snapshots"].items():
            self._snaps[doc["conversation_id"]].append(int(key))
        done = []
        for key, doc in memory["delegations"].items():
            self._index_delegation(int(key), doc)
            if doc["status"] != "running":
                done.append((doc["completed_at"], int(key), doc))
        for _, _, doc in sorted(done):
            self._index_completion(doc)
        self._state_docs: dict[tuple[str, str], int] = {
            (doc["namespace"], doc["key"]): int(key) for key, doc in memory["states"].items()
        }

    def _index_delegation(self, doc_id: int, doc: Mapping[str, Any]) -> None:
        self._deleg[doc["delegation_id"]] = doc_id
        self._deleg_by_conv.setdefault(doc["parent_id"], set()).add(doc["delegation_id"])
        self._deleg_by_conv.setdefault(doc["child_conversation_id"], set()).add(doc["delegation_id"])
        self._counts["running"] += 1
        self.last_time = max(self.last_time, doc["created_at"])

    def _index_completion(self, doc: Mapping[str, Any]) -> None:
        self._counts["running"] -= 1
        self._counts[doc["status"]] += 1
        self._completion += 1
        self.last_time = max(self.last_time, doc["completed_at"])
        if doc["status"] == "completed":
            scope = doc.get("scope", DEFAULT_SCOPE)
            for key in ((scope, doc["target_tier"]), (None, doc["target_tier"])):
                self._completed_by_target.setdefault(key, {})[doc["delegation_id"]] = None
            recency = (doc["completed_at"], self._completion)
            self._completed[doc["delegation_id"]] = (scope, recency)
            for index_scope in (scope, None):
                index = self._search_indexes.get(index_scope)
                if index is not None:
                    index.add(doc["delegation_id"], doc["task"], doc["summary"], recency)

    def _search(self, scope: str | None) -> SearchIndex:
        index = self._search_indexes.get(scope)
        if index is None:
            index = SearchIndex()
            rows = self._memory["delegations"]
            for delegation_id, (doc_scope, recency) in self._completed.items():
                if scope is None or doc_scope == scope:
                    doc = rows[self._deleg[delegation_id]]
                    index.add(delegation_id, doc["task"], doc["summary"], recency)
            self._search_indexes[scope] = index
        return index

    def next_ids(self) -> dict[str, int]:
        return {name: table.next_id for name, table in self._tables.items()}

    def dump(self) -> dict[str, dict[str, Any]]:
        """Every table as TinyDB's JSON layout: ``{table: {"<doc id>": document}}``."""
        memory = self._memory
        return {name: memory[name] for name in TABLES}

    # -- lookups ---------------------------------------------------------------------------------

    def _conversation_doc(self, conversation_id: Any, what: str) -> dict[str, Any]:
        doc_id = self._conv.get(conversation_id)
        if doc_id is None:
            raise StorageError(
                f"unknown conversation {conversation_id!r} ({what}); it was never created or has been deleted"
            )
        return self._memory["conversations"][doc_id]

    def _delegation_doc(self, delegation_id: Any) -> dict[str, Any]:
        doc_id = self._deleg.get(delegation_id)
        if doc_id is None:
            raise StorageError(
                f"unknown delegation {delegation_id!r}; it was never created or its conversation was deleted"
            )
        return self._memory["delegations"][doc_id]

    def _conversation_record(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        record = copy(doc)
        record.setdefault("scope", DEFAULT_SCOPE)  # stores written before scopes existed
        record["message_count"] = self._msg_counts[doc["conversation_id"]]
        return record

    def scope_of(self, conversation_id: str) -> str | None:
        doc_id = self._conv.get(conversation_id)
        if doc_id is None:
            return None
        scope: str = self._memory["conversations"][doc_id].get("scope", DEFAULT_SCOPE)
        return scope

    def load_conversation(self, conversation_id: str) -> dict[str, Any]:
        doc = self._conversation_doc(conversation_id, "conversation_id")
        return {"conversation": self._conversation_record(doc), "messages": self._messages_of(conversation_id)}

    def _messages_of(self, conversation_id: str) -> list[Any]:
        rows = self._memory["messages"]
        messages: list[Any] = []
        for doc_id in self._msgs[conversation_id]:
            messages.extend(self._batch(rows[doc_id]))
        return messages

    def _batch(self, doc: Mapping[str, Any]) -> list[Any]:
        if "messages" in doc:
            return copy(doc["messages"])
        if self._read_ref is None:
            raise StorageError("this store keeps messages in segment files, which only the tinydb backend reads")
        return self._read_ref(doc["ref"])

    def list_conversations(self, limit: int, offset: int) -> list[dict[str, Any]]:
        rows = self._memory["conversations"]
        ids = list(self._conv.values())
        page = ids[::-1][offset : offset + limit]
        return [self._conversation_record(rows[doc_id]) for doc_id in page]

    def list_delegations(self, limit: int, offset: int) -> list[dict[str, Any]]:
        rows = self._memory["delegations"]
        ids = list(self._deleg.values())
        return [self._delegation_record(rows[doc_id]) for doc_id in ids[::-1][offset : offset + limit]]

    @staticmethod
    def _delegation_record(doc: Mapping[str, Any]) -> dict[str, Any]:
        record = copy(doc)
        record.setdefault("scope", DEFAULT_SCOPE)  # stores written before scopes existed
        return record

    def load_delegation_with_messages(self, delegation_id: str) -> dict[str, Any]:
        record = self._delegation_record(self._delegation_doc(delegation_id))
        record["messages"] = self._messages_of(record["child_conversation_id"])
        return record

    def latest_delegation_for_target(self, target_tier: str, scope: str | None = None) -> str | None:
        done = self._completed_by_target.get((scope, target_tier))
        return next(reversed(done)) if done else None

    def search_delegations(self, query: str, max_results: int, scope: str | None = None) -> list[dict[str, Any]]:
        rows = self._memory["delegations"]
        found = []
        for delegation_id in self._search(scope).search(query_words(query), max_results):
            doc = rows[self._deleg[delegation_id]]
            found.append({field: doc[field] for field in SEARCH_FIELDS})
        return found

    def load_state(self, namespace: Any, key: Any) -> tuple[Any, int]:
        validate_state(namespace, key)
        doc_id = self._state_docs.get((namespace, key))
        if doc_id is None:
            return None, 0
        doc = self._memory["states"][doc_id]
        return copy(doc["value"]), int(doc["version"])

    def stats(self) -> dict[str, int]:
        return {
            "conversations": len(self._conv),
            "messages": sum(self._msg_counts.values()),
            "snapshots": sum(len(ids) for ids in self._snaps.values()),
            "delegations": len(self._deleg),
            "running_delegations": self._counts["running"],
            "completed_delegations": self._counts["completed"],
            "failed_delegations": self._counts["failed"],
        }

    # -- operations: prepare (validate) ------------------------------------------------------------

    def prepare_create_conversation(self, title: Any, metadata: Any, scope: Any = DEFAULT_SCOPE) -> dict[str, Any]:
        return {
            "op": "create_conversation",
            "conversation_id": new_id(),
            "title": title,
            "metadata": checked_copy(dict(metadata or {}), "metadata"),
            "scope": scope,
            "at": _now(self.last_time),
        }

    def prepare_save_messages(self, conversation_id: Any, messages: Any) -> dict[str, Any]:
        self._conversation_doc(conversation_id, "save_messages")
        return {
            "op": "save_messages",
            "conversation_id": conversation_id,
            "messages": validate_messages(messages, "save_messages"),
            "at": _now(self.last_time),
        }

    def prepare_delete_conversation(self, conversation_id: Any) -> dict[str, Any]:
        self._conversation_doc(conversation_id, "delete_conversation")
        return {"op": "delete_conversation", "conversation_id": conversation_id}

    def prepare_save_snapshot(self, conversation_id: Any, messages: Any) -> dict[str, Any]:
        self._conversation_doc(conversation_id, "save_snapshot")
        return {
            "op": "save_snapshot",
            "snapshot_id": new_id(),
            "conversation_id": conversation_id,
            "messages": validate_messages(messages, "save_snapshot"),
            "at": _now(self.last_time),
        }

    def prepare_create_delegation(
        self, parent_id: Any, delegating_tier: Any, target_tier: Any, task: Any, max_turns: Any, context: Any
    ) -> dict[str, Any]:
        parent = self._conversation_doc(parent_id, "create_delegation parent_id")
        return {
            "op": "create_delegation",
            "delegation_id": new_id(),
            "child_conversation_id": new_id(),
            "parent_id": parent_id,
            "delegating_tier": delegating_tier,
            "target_tier": target_tier,
            "task": task,
            "max_turns": max_turns,
            "context": checked_copy([dict(item) for item in context or ()], "context"),
            "scope": parent.get("scope", DEFAULT_SCOPE),
            "at": _now(self.last_time),
        }

    def prepare_complete_delegation(self, delegation_id: Any, status: Any, summary: Any) -> dict[str, Any]:
        doc = self._delegation_doc(delegation_id)
        if doc["status"] != "running":
            raise StorageError(
                f"delegation {delegation_id!r} was already completed (status {doc['status']!r} at "
                f"{doc['completed_at']}); a delegation is completed once"
            )
        return {
            "op": "complete_delegation",
            "delegation_id": delegation_id,
            "status": status,
            "summary": summary,
            "at": _now(self.last_time),
        }

    def prepare_save_state(self, namespace: Any, key: Any, value: Any, version: Any) -> dict[str, Any]:
        text = validate_state(namespace, key, value, version)
        doc_id = self._state_docs.get((namespace, key))
        current = 0 if doc_id is None else int(self._memory["states"][doc_id]["version"])
        if current != version and not (text is None and doc_id is None):
            raise StateConflict(
                f"state {namespace}/{key} is at version {current}, not {version}: someone saved it meanwhile; "
                "load it again, apply your change to what it holds now, and save again"
            )
        return {
            "op": "save_state",
            "namespace": namespace,
            "key": key,
            "value": None if text is None else orjson.loads(text),
            "version": 0 if text is None else version + 1,
            "at": _now(self.last_time),
        }

    def prepare_prune_states(self, namespace: Any, older_than: Any) -> dict[str, Any]:
        cutoff = (datetime.now(UTC) - timedelta(seconds=validate_prune(namespace, older_than))).isoformat(
            timespec="microseconds"
        )
        rows = self._memory["states"]
        keys = sorted(
            key
            for (doc_namespace, key), doc_id in self._state_docs.items()
            if doc_namespace == namespace and rows[doc_id].get("saved_at", "") < cutoff
        )
        return {"op": "prune_states", "namespace": namespace, "keys": keys}

    # -- operations: apply -------------------------------------------------------------------------

    def apply(self, op: Mapping[str, Any]) -> None:
        getattr(self, "_apply_" + op["op"])(op)
        if "at" in op:
            self.last_time = max(self.last_time, op["at"])

    def _insert_conversation(
        self, conversation_id: str, title: str, metadata: Any, at: str, parent: str | None, scope: str
    ) -> None:
        doc_id = self.conversations.insert(
            {
                "conversation_id": conversation_id,
                "title": title,
                "metadata": metadata,
                "scope": scope,
                "created_at": at,
                "updated_at": at,
                "parent_delegation_id": parent,
            }
        )
        self._conv[conversation_id] = doc_id
        self._msgs[conversation_id] = []
        self._msg_counts[conversation_id] = 0
        self._snaps[conversation_id] = []

    def _apply_create_conversation(self, op: Mapping[str, Any]) -> None:
        scope = op.get("scope", DEFAULT_SCOPE)
        self._insert_conversation(op["conversation_id"], op["title"], op["metadata"], op["at"], None, scope)

    @staticmethod
    def _body(op: Mapping[str, Any]) -> dict[str, Any]:
        """A batch's messages, inline or as a reference to where they are kept."""
        if "messages" in op:
            return {"count": len(op["messages"]), "messages": op["messages"]}
        return {"count": op["count"], "ref": op["ref"]}

    def _apply_save_messages(self, op: Mapping[str, Any]) -> None:
        conversation_id = op["conversation_id"]
        body = self._body(op)
        doc_id = self.messages.insert({"conversation_id": conversation_id, "created_at": op["at"], **body})
        self._msgs[conversation_id].append(doc_id)
        self._msg_counts[conversation_id] += body["count"]
        self.conversations.update({"updated_at": op["at"]}, doc_ids=[self._conv[conversation_id]])

    def _apply_save_snapshot(self, op: Mapping[str, Any]) -> None:
        doc_id = self.snapshots.insert(
            {
                "snapshot_id": op["snapshot_id"],
                "conversation_id": op["conversation_id"],
                "created_at": op["at"],
                **self._body(op),
            }
        )
        self._snaps[op["conversation_id"]].append(doc_id)

    def _apply_create_delegation(self, op: Mapping[str, Any]) -> None:
        child = op["child_conversation_id"]
        title = f"{op['target_tier']}: {op['task'][:80]}"
        metadata = {
            "parent_id": op["parent_id"],
            "delegating_tier": op["delegating_tier"],
            "target_tier": op["target_tier"],
        }
        scope = op.get("scope", DEFAULT_SCOPE)
        self._insert_conversation(child, title, metadata, op["at"], op["delegation_id"], scope)
        doc = {
            "delegation_id": op["delegation_id"],
            "parent_id": op["parent_id"],
            "child_conversation_id": child,
            "delegating_tier": op["delegating_tier"],
            "target_tier": op["target_tier"],
            "task": op["task"],
            "max_turns": op["max_turns"],
            "context": op["context"],
            "scope": scope,
            "status": "running",
            "summary": None,
            "created_at": op["at"],
            "completed_at": None,
        }
        doc_id = self.delegations.insert(doc)
        self._index_delegation(doc_id, doc)

    def _apply_complete_delegation(self, op: Mapping[str, Any]) -> None:
        doc_id = self._deleg[op["delegation_id"]]
        fields = {"status": op["status"], "summary": op["summary"], "completed_at": op["at"]}
        self.delegations.update(fields, doc_ids=[doc_id])
        self._index_completion(self._memory["delegations"][doc_id])

    def _apply_save_state(self, op: Mapping[str, Any]) -> None:
        where = (op["namespace"], op["key"])
        doc_id = self._state_docs.get(where)
        if op["value"] is None:
            if doc_id is not None:
                self.states.remove([doc_id])
                del self._state_docs[where]
        elif doc_id is None:
            self._state_docs[where] = self.states.insert(
                {
                    "namespace": op["namespace"],
                    "key": op["key"],
                    "value": op["value"],
                    "version": op["version"],
                    "saved_at": op.get("at", ""),
                }
            )
        else:
            self.states.update({"value": op["value"], "version": op["version"], "saved_at": op.get("at", "")}, [doc_id])

    def _apply_prune_states(self, op: Mapping[str, Any]) -> None:
        for key in op["keys"]:
            doc_id = self._state_docs.pop((op["namespace"], key), None)
            if doc_id is not None:
                self.states.remove([doc_id])

    def _cascade(self, conversation_id: str) -> tuple[set[str], set[str]]:
        """The conversations and delegations deleting ``conversation_id`` removes.

        A delegation goes with its parent or its child conversation; a delegation that goes takes
        its child conversation (and so, recursively, everything delegated from there).
        """
        rows = self._memory["delegations"]
        conversations: set[str] = set()
        delegations: set[str] = set()
        todo = [conversation_id]
        while todo:
            current = todo.pop()
            if current in conversations:
                continue
            conversations.add(current)
            for delegation_id in self._deleg_by_conv.get(current, ()):
                if delegation_id not in delegations:
                    delegations.add(delegation_id)
                    todo.append(rows[self._deleg[delegation_id]]["child_conversation_id"])
        return conversations, delegations

    def _apply_delete_conversation(self, op: Mapping[str, Any]) -> None:
        conversations, delegations = self._cascade(op["conversation_id"])
        rows = self._memory["delegations"]
        for delegation_id in delegations:
            doc = rows[self._deleg[delegation_id]]
            self._counts[doc["status"]] -= 1
            scope = doc.get("scope", DEFAULT_SCOPE)
            for key in ((scope, doc["target_tier"]), (None, doc["target_tier"])):
                self._completed_by_target.get(key, {}).pop(delegation_id, None)
            if self._completed.pop(delegation_id, None) is not None:
                for index_scope in (scope, None):
                    index = self._search_indexes.get(index_scope)
                    if index is not None:
                        index.remove(delegation_id)
            for conversation_id in (doc["parent_id"], doc["child_conversation_id"]):
                linked = self._deleg_by_conv.get(conversation_id)
                if linked is not None:
                    linked.discard(delegation_id)
                    if not linked:
                        del self._deleg_by_conv[conversation_id]
        self.delegations.remove(doc_ids=[self._deleg.pop(d) for d in delegations])
        message_ids: list[int] = []
        snapshot_ids: list[int] = []
        for conversation_id in conversations:
            message_ids.extend(self._msgs.pop(conversation_id))
            del self._msg_counts[conversation_id]
            snapshot_ids.extend(self._snaps.pop(conversation_id))
        self.messages.remove(doc_ids=message_ids)
        self.snapshots.remove(doc_ids=snapshot_ids)
        self.conversations.remove(doc_ids=[self._conv.pop(c) for c in conversations])
