"""Guard state in a shared StateStore: two workers count exactly as one (issue 27)."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from entropic_mcp._config import PipelineConfig
from entropic_mcp._errors import StateConflict
from entropic_mcp._pipeline._guards import NAMESPACE, Guards


class DictStore:
    """A StateStore in a dict, with the version rule of the real backends."""

    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], tuple[Any, int]] = {}
        self.saves = 0
        self.fail = False

    def load_state(self, namespace: str, key: str) -> tuple[Any, int]:
        if self.fail:
            raise OSError("store unreachable")
        value, version = self.docs.get((namespace, key), (None, 0))
        return orjson.loads(orjson.dumps(value)), version

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        if self.fail:
            raise OSError("store unreachable")
        stored = self.docs.get((namespace, key), (None, 0))[1]
        if stored != version:
            raise StateConflict(f"stored version {stored}")
        self.saves += 1
        if value is None:
            self.docs.pop((namespace, key), None)
            return 0
        self.docs[(namespace, key)] = (orjson.loads(orjson.dumps(value)), version + 1)
        return version + 1

    def prune_states(self, namespace: str, older_than: float) -> int:
        return 0


def call(guards: Guards, name: str, args: dict[str, Any], text: str, *, failed: bool = False, write: bool = False):
    """What the pipeline does around one call: the check, then (unless refused) the record."""
    key = name + "\x00" + orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    state = guards.state("conv", None)
    refusal = guards.refusal(state, key, name, write=write)
    if refusal is not None:
        return "refused"
    repeats = guards.ran(state, key, name, text, failed=failed, write=write, flag=not write and not failed)
    guards.save(state)  # what the pipeline does after the call, in a worker thread
    return repeats


def workers(n: int, store: DictStore | None) -> list[Guards]:
    if store is None:
        return [Guards(PipelineConfig())]
    return [Guards(PipelineConfig(), lambda: store) for _ in range(n)]


def scenario(guards: list[Guards]) -> list[Any]:
    """Round robin over the workers: repeats, identical failures, a 60-call WRITE spiral."""
    turn = itertools.cycle(guards)
    out: list[Any] = []
    for _ in range(4):
        out.append(call(next(turn), "fs.read", {"path": "a"}, "same text"))
    for _ in range(4):
        out.append(call(next(turn), "bash.run", {"cmd": "false"}, '{"error": "exit_1"}', failed=True))
    for i in range(60):
        out.append(call(next(turn), "fs.write", {"path": f"f{i}"}, "ok", write=True))
    return out


def test_two_workers_on_a_shared_store_count_as_one_worker() -> None:
    alone = scenario(workers(1, None))
    assert alone[:4] == [0, 1, 2, 3]  # the second identical answer is flagged, the third says STOP
    assert alone[4:8] == [0, 0, "refused", "refused"]  # refused at the third identical failure
    assert alone[8:].index("refused") == 50  # the 51st WRITE in a row
    store = DictStore()
    assert scenario(workers(2, store)) == alone
    assert scenario(workers(4, DictStore())) == alone
    assert list(store.docs) == [(NAMESPACE, "conv")]


def test_a_change_saved_meanwhile_by_another_worker_is_not_lost() -> None:
    store = DictStore()
    first, second = workers(2, store)
    key = "bash.run\x00{}"
    a = first.state("conv", None)
    b = second.state("conv", None)  # both loaded version 0
    first.ran(a, key, "bash.run", '{"error": "x"}', failed=True, write=False, flag=False)
    second.ran(b, key, "bash.run", '{"error": "x"}', failed=True, write=False, flag=False)
    first.save(a)
    second.save(b)  # conflicts with the first save: applied again to the stored document
    assert second.refusal(second.state("conv", None), key, "bash.run", write=False) is not None


def test_ending_the_conversation_deletes_its_shared_state() -> None:
    store = DictStore()
    (guards,) = workers(1, store)
    call(guards, "fs.read", {"path": "a"}, "text")
    assert store.docs
    guards.end_conversation("conv")
    assert not store.docs


def test_an_unreachable_store_lets_calls_run_uncounted() -> None:
    store = DictStore()
    store.fail = True
    (guards,) = workers(1, store)
    assert [call(guards, "bash.run", {}, '{"error": "x"}', failed=True) for _ in range(4)] == [0, 0, 0, 0]


@pytest.mark.parametrize(("backend", "shared"), [("none", False), ("tinydb", False), ("postgres", True)])
def test_only_a_store_of_several_processes_holds_guard_state(backend: str, shared: bool, tmp_path: Any) -> None:
    from entropic_mcp import ServerManager, config_from_dict

    config = config_from_dict({"storage": {"backend": backend, "path": "store"}}, root=tmp_path)
    guards = ServerManager(config).pipeline.guards
    assert (guards._store_of is not None) is shared


def test_the_spiral_fires_when_calls_are_shown_under_served_names(tmp_path: Any) -> None:
    """serve shows portable names (fs_write): the spiral still counts the one tool's run."""
    import anyio
    from entropic_mcp import AccessLevel, CallContext, MCPServerBase, ToolBase, ToolDefinition
    from entropic_mcp.testing import make_manager

    class Write(ToolBase):
        required_access_level = AccessLevel.WRITE

        def execute(self, args: dict[str, Any], ctx: Any) -> str:
            return "written"

    server = MCPServerBase("fs", root=tmp_path)
    server.register_tool(Write(ToolDefinition(name="write", description="w", input_schema={"type": "object"})))
    manager = make_manager(
        tmp_path, servers=[server], config={"permissions": {"default": "allow"}, "pipeline": {"same_tool_limit": 3}}
    )

    async def run() -> list[str]:
        kinds = []
        for i in range(5):
            ctx = CallContext(conversation_id="c", tool_names=lambda name: name.replace(".", "_"))
            outcome = await manager.call("fs.write", {"n": i}, ctx)
            kinds.append(str(outcome.kind))
        return kinds

    kinds = anyio.run(run)
    assert kinds == ["ok", "ok", "ok", "rejected_loop", "rejected_loop"]


def _read(guards: Guards, n: int) -> Any:
    return call(guards, "fs.read", {"path": f"p{n}"}, f"text of p{n}")


@pytest.mark.parametrize("store", [None, "shared"])
def test_an_answer_is_remembered_for_the_last_max_remembered_answers_calls_alike(store: str | None) -> None:
    """Memory and store forget at the same call: one worker and N give the same flags."""
    from entropic_mcp._pipeline._guards import MAX_REMEMBERED_ANSWERS

    (guards,) = workers(1, DictStore() if store else None)
    for n in range(MAX_REMEMBERED_ANSWERS):
        _read(guards, n)
    assert _read(guards, 0) == 1  # 63 others since: still remembered, flagged
    for n in range(1, MAX_REMEMBERED_ANSWERS + 1):
        _read(guards, 1000 + n)
    assert _read(guards, 0) == 0  # 64 others since: forgotten


def test_the_shared_document_stays_under_the_toast_threshold() -> None:
    """512 answers made a 25 KB document, compressed and stored out of line on every call."""
    store = DictStore()
    (guards,) = workers(1, store)
    for n in range(1000):
        _read(guards, n)
        call(guards, f"srv{n % 100}.tool", {"n": n}, '{"error": "boom"}', failed=True)
    ((value, _),) = store.docs.values()
    assert len(orjson.dumps(value)) < 2000
    assert _read(guards, 999) == 1


def test_guard_state_is_heuristic_and_nothing_else_is() -> None:
    from entropic_mcp.storage import HEURISTIC_NAMESPACES

    assert frozenset({NAMESPACE}) == HEURISTIC_NAMESPACES


# -- awaited on the event loop (an AsyncStateStore: PostgreSQL) ----------------------------------


class AsyncDictStore(DictStore):
    """DictStore that can also be awaited; counts which way each operation came."""

    def __init__(self) -> None:
        super().__init__()
        self.ways: list[str] = []

    def load_state(self, namespace: str, key: str) -> tuple[Any, int]:
        self.ways.append("thread")
        return super().load_state(namespace, key)

    def save_state(self, namespace: str, key: str, value: Any, version: int) -> int:
        self.ways.append("thread")
        return super().save_state(namespace, key, value, version)

    async def load_state_async(self, namespace: str, key: str) -> tuple[Any, int]:
        self.ways.append("loop")
        return super().load_state(namespace, key)

    async def save_state_async(self, namespace: str, key: str, value: Any, version: int) -> int:
        self.ways.append("loop")
        return super().save_state(namespace, key, value, version)


async def awaited_call(guards: Guards, name: str, args: dict[str, Any], text: str, **kinds: bool) -> Any:
    """``call`` as the pipeline runs it: ``load`` before, ``flush`` after."""
    failed, write = kinds.get("failed", False), kinds.get("write", False)
    key = name + "\x00" + orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    state = await guards.load("conv", None)
    if guards.refusal(state, key, name, write=write) is not None:
        return "refused"
    repeats = guards.ran(state, key, name, text, failed=failed, write=write, flag=not write and not failed)
    await guards.flush(state)
    return repeats


def test_on_the_loop_n_workers_count_as_one_and_no_call_needs_a_thread_after_the_first() -> None:
    import anyio

    alone = scenario(workers(1, None))
    store = AsyncDictStore()
    guards = workers(2, store)

    async def run() -> list[Any]:
        turn = itertools.cycle(guards)
        out: list[Any] = []
        for _ in range(4):
            out.append(await awaited_call(next(turn), "fs.read", {"path": "a"}, "same text"))
        for _ in range(4):
            out.append(await awaited_call(next(turn), "bash.run", {"cmd": "false"}, '{"error": "exit_1"}', failed=True))
        for i in range(60):
            out.append(await awaited_call(next(turn), "fs.write", {"path": f"f{i}"}, "ok", write=True))
        return out

    assert anyio.run(run) == alone
    # Each worker's first load opens the store in a worker thread; everything after is awaited.
    assert store.ways[:1] == ["thread"] and store.ways.count("thread") == 2
    assert set(store.ways[4:]) == {"loop"}


def test_on_the_loop_a_save_that_lost_the_race_is_applied_to_the_winner_s_document() -> None:
    import anyio

    store = AsyncDictStore()
    first, second = workers(2, store)
    key = "bash.run\x00{}"
    first.state("conv", None), second.state("conv", None)  # opened

    async def run() -> Any:
        a = await first.load("conv", None)
        b = await second.load("conv", None)  # both loaded version 0
        first.ran(a, key, "bash.run", '{"error": "x"}', failed=True, write=False, flag=False)
        second.ran(b, key, "bash.run", '{"error": "x"}', failed=True, write=False, flag=False)
        await first.flush(a)
        await second.flush(b)  # conflicts on the loop: re-applied to the stored document in a thread
        return second.refusal(await second.load("conv", None), key, "bash.run", write=False)

    store.ways.clear()
    assert anyio.run(run) is not None
    assert store.ways.count("thread") == 2  # the conflict round's load and save
    assert store.docs[(NAMESPACE, "conv")][0]["failures"] == {"bash.run#" + f"{_digest_of('{}')}": ["x", 2]}


def _digest_of(args: str) -> str:
    from entropic_mcp._pipeline._guards import shared_key

    return shared_key("bash.run\x00" + args).partition("#")[2]


def test_on_the_loop_an_unreachable_store_lets_calls_run_uncounted() -> None:
    import anyio

    store = AsyncDictStore()
    (guards,) = workers(1, store)
    guards.state("conv", None)
    store.fail = True

    async def run() -> list[Any]:
        return [await awaited_call(guards, "bash.run", {}, '{"error": "x"}', failed=True) for _ in range(4)]

    assert anyio.run(run) == [0, 0, 0, 0]
