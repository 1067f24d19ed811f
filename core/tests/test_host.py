"""The default delegation handlers (``_delegation``) and the reference host loop (``entropic_mcp.host``).

Driven with a small in-test server whose tools return the directives, so the host is tested
apart from the entropic plugin (whose own tests drive the two together end to end).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from entropic_mcp import (
    CallContext,
    MCPServerBase,
    ServerManager,
    ToolBase,
    ToolDefinition,
    ToolResult,
    config_from_dict,
    hookimpl,
)
from entropic_mcp._delegation import (
    Completion,
    DelegationStarted,
    DirectiveContext,
    PipelineStarted,
    finish_delegation,
    start_delegation,
)
from entropic_mcp.directives import (
    Complete,
    ContextAnchor,
    Delegate,
    DirectiveHandlerSpec,
    InjectContext,
    NotifyPresenter,
    PhaseChange,
    Pipeline,
    PruneMessages,
    StopProcessing,
    UnknownDirective,
)
from entropic_mcp.host import AssistantTurn, Host, ToolCallRequest
from entropic_mcp.storage import StorageError
from entropic_mcp.testing import fresh_plugins

OPEN = {"type": "object"}


class Emit(ToolBase):
    """A tool that returns the directives ``make(args)`` builds."""

    def __init__(self, name: str, make: Any, text: str = "ok") -> None:
        super().__init__(ToolDefinition(name=name, description=name, input_schema=OPEN))
        self.make = make
        self.text = text

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult(text=args.get("text", self.text), directives=self.make(args))


class Orchestra(MCPServerBase):
    name = "orch"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.register_tool(
            Emit(
                "delegate",
                lambda a: [
                    Delegate(
                        target=a["target"],
                        task=a["task"],
                        max_turns=a.get("max_turns", -1),
                        resume_from=a.get("resume_from", ""),
                    ),
                    StopProcessing(),
                ],
            )
        )
        self.register_tool(Emit("pipeline", lambda a: [Pipeline(stages=a["stages"], task=a["task"]), StopProcessing()]))
        self.register_tool(Emit("done", lambda a: [Complete(summary=a["summary"]), StopProcessing()]))
        self.register_tool(Emit("anchor", lambda a: [ContextAnchor(key=a["key"], content=a.get("content", ""))]))
        self.register_tool(Emit("prune", lambda a: [PruneMessages(keep_recent=a.get("keep", 1))]))
        self.register_tool(Emit("phase", lambda a: [PhaseChange(phase=a["phase"])]))
        self.register_tool(Emit("notify", lambda a: [NotifyPresenter(key="k", data=a.get("data"))]))
        self.register_tool(Emit("inject", lambda a: [InjectContext(content=a["content"])]))
        self.register_tool(Emit("weird", lambda a: [UnknownDirective(name="sparkle", fields={"x": 1})]))
        self.register_tool(Emit("echo", lambda a: [], text="echoed"))


def manager_for(
    tmp_path: Path, *, storage: bool = True, plugins: tuple[object, ...] = (), **config: Any
) -> ServerManager:
    data = {
        "storage": {"backend": "tinydb", "path": str(tmp_path / "store")} if storage else {"backend": "none"},
        "permissions": {"default": "allow"},
        **config,
    }
    return ServerManager(
        config_from_dict(data, root=tmp_path), plugins=fresh_plugins(*plugins), servers=[Orchestra(root=tmp_path)]
    )


@pytest.fixture
def manager(tmp_path: Path):
    manager = manager_for(tmp_path)
    yield manager
    manager.close()


class Script:
    def __init__(self, *turns: Any) -> None:
        self.turns = list(turns)
        self.seen: list[list[dict[str, Any]]] = []
        self.tools: list[list[str]] = []

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        self.seen.append(messages)
        self.tools.append([t["name"] for t in tools])
        turn = self.turns.pop(0)
        return turn(messages) if callable(turn) else turn


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in pairs]}


def one(name: str, **args: Any) -> dict[str, Any]:
    return calls((name, args))


# -- the default handlers --------------------------------------------------------------------------------


def test_manager_processor_has_the_default_delegation_handlers(manager):
    assert {"delegate", "pipeline", "complete"} <= set(manager.directive_processor().handlers)
    assert "builtin-delegation" in [info.name for info in manager.plugins.listing(include_builtins=True)]


def test_a_host_plugin_handler_replaces_the_default(tmp_path):
    mine = lambda directive, context: "mine"  # noqa: E731

    class HostHandlers:
        @hookimpl
        def entropic_mcp_directive_handlers(self):
            return DirectiveHandlerSpec(type="delegate", handler=mine)

    manager = manager_for(tmp_path, storage=False, plugins=(HostHandlers(),))
    assert manager.directive_processor().handlers["delegate"] is mine


def test_delegate_handler_creates_a_running_record_and_child_conversation(manager):
    storage = manager.storage
    root = storage.create_conversation("root")
    processor = manager.directive_processor()
    result = processor.process(
        [
            Delegate(
                target="researcher", task="look", max_turns=4, context=[{"path": "a.py", "lines": "", "note": ""}]
            ),
            StopProcessing(),
        ],
        DirectiveContext(conversation_id=root, identity="lead", manager=manager),
    )
    assert result.stopped
    [(kind, started)] = result.handled
    assert kind == "delegate" and isinstance(started, DelegationStarted) and started.persisted
    record = storage.load_delegation_with_messages(started.delegation_id)
    assert record["status"] == "running" and record["target_tier"] == "researcher"
    assert record["child_conversation_id"] == started.child_conversation_id
    assert storage.load_conversation(started.child_conversation_id)["messages"] == []


def test_delegate_handler_with_an_unknown_parent_raises_storage_error(manager):
    with pytest.raises(StorageError):
        manager.directive_processor().process(
            [Delegate(target="r", task="t")], DirectiveContext(conversation_id="nope", manager=manager)
        )


def test_handlers_need_a_conversation(manager):
    with pytest.raises(TypeError, match="conversation_id"):
        manager.directive_processor().process([Delegate(target="r", task="t")])


def test_delegate_handler_without_storage_returns_unpersisted_ids(tmp_path):
    manager = manager_for(tmp_path, storage=False)
    [(_, started)] = (
        manager.directive_processor()
        .process([Delegate(target="r", task="t")], DirectiveContext(conversation_id="c", manager=manager))
        .handled
    )
    assert started.persisted is False and started.delegation_id != started.child_conversation_id


def test_resume_from_loads_the_earlier_child_messages(manager):
    storage = manager.storage
    root = storage.create_conversation("root")
    first = start_delegation(storage, parent_id=root, delegating_tier="lead", target="r", task="t1")
    storage.save_messages(
        first.child_conversation_id, [{"role": "user", "content": "t1"}, {"role": "assistant", "content": "found x"}]
    )
    finish_delegation(storage, first.delegation_id, "completed", "found x")
    [(_, started)] = (
        manager.directive_processor()
        .process(
            [Delegate(target="r", task="t2", resume_from=first.delegation_id)],
            DirectiveContext(conversation_id=root, identity="lead", storage=storage),
        )
        .handled
    )
    assert [m["content"] for m in started.seed_messages] == ["t1", "found x"]
    assert started.resume_from == first.delegation_id and started.delegation_id != first.delegation_id


def test_resume_from_an_unknown_delegation_raises(manager):
    root = manager.storage.create_conversation("root")
    with pytest.raises(StorageError):
        start_delegation(
            manager.storage, parent_id=root, delegating_tier="lead", target="r", task="t", resume_from="missing"
        )


def test_complete_handler_finishes_the_conversations_own_delegation(manager):
    storage = manager.storage
    root = storage.create_conversation("root")
    started = start_delegation(storage, parent_id=root, delegating_tier="lead", target="r", task="t")
    ctx = CallContext(
        conversation_id=started.child_conversation_id,
        identity="r",
        meta={"delegation_id": started.delegation_id},
        manager=manager,
    )
    [(_, done)] = manager.directive_processor().process([Complete(summary="all good")], ctx).handled
    assert isinstance(done, Completion) and done.recorded and done.delegation_id == started.delegation_id
    record = storage.load_delegation_with_messages(started.delegation_id)
    assert (record["status"], record["summary"]) == ("completed", "all good")
    with pytest.raises(StorageError):  # a second completion is refused, not ignored
        finish_delegation(storage, started.delegation_id, "failed", "again")


def test_complete_with_a_gap_stores_the_gap_in_the_summary(manager):
    storage = manager.storage
    root = storage.create_conversation("root")
    started = start_delegation(storage, parent_id=root, delegating_tier="lead", target="r", task="t")
    manager.directive_processor().process(
        [Complete(summary="half", coverage_gap=True, gap_description="tests unread")],
        DirectiveContext(conversation_id="x", delegation_id=started.delegation_id, storage=storage),
    )
    assert "Coverage gap: tests unread" in storage.load_delegation_with_messages(started.delegation_id)["summary"]


def test_complete_in_a_root_conversation_records_nothing(manager):
    [(_, done)] = (
        manager.directive_processor()
        .process([Complete(summary="s")], DirectiveContext(conversation_id="root", storage=manager.storage))
        .handled
    )
    assert done.recorded is False and done.delegation_id is None


def test_pipeline_handler_returns_the_plan(manager):
    [(_, plan)] = (
        manager.directive_processor()
        .process([Pipeline(stages=["a", "b"], task="t")], DirectiveContext(conversation_id="c", identity="lead"))
        .handled
    )
    assert plan == PipelineStarted(stages=("a", "b"), task="t", parent_conversation_id="c", delegating_tier="lead")


def test_finish_delegation_only_knows_completed_and_failed(manager):
    with pytest.raises(ValueError, match="completed"):
        finish_delegation(manager.storage, "x", "done", "s")
    assert finish_delegation(None, "x", "failed", "s") is False


# -- the model's turn -----------------------------------------------------------------------------------------


def test_turns_accept_strings_mappings_and_the_openai_shape():
    assert AssistantTurn.coerce("hi") == AssistantTurn(content="hi")
    turn = AssistantTurn.coerce(
        {
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "orch.echo", "arguments": '{"a": 1}'}}
            ],
        }
    )
    assert turn.tool_calls == (ToolCallRequest(id="c1", name="orch.echo", arguments='{"a": 1}'),)
    with pytest.raises(TypeError, match="AssistantTurn"):
        AssistantTurn.coerce(42)
    with pytest.raises(TypeError, match="name"):
        AssistantTurn.coerce({"tool_calls": [{"arguments": {}}]})


# -- the host loop ------------------------------------------------------------------------------------------


def test_a_plain_answer_ends_the_conversation(manager):
    result = Host(manager, Script("the answer is 4")).run_sync("2+2?")
    assert (result.status, result.summary, result.turns) == ("answered", "the answer is 4", 1)
    stored = manager.storage.load_conversation(result.conversation_id)
    assert [m["role"] for m in stored["messages"]] == ["system", "user", "assistant"]
    assert all(m["identity"] == "lead" and m["tokens"] >= 1 for m in stored["messages"])


def test_async_models_are_awaited(manager):
    async def model(messages, tools):
        await anyio.sleep(0)
        return one("orch.done", summary="async done")

    assert Host(manager, model).run_sync("x").summary == "async done"


def test_delegation_runs_a_child_under_the_target_identity_and_completes_the_record(manager):
    child = Script(one("orch.done", summary="child found it"))
    lead = Script(
        one("orch.delegate", target="researcher", task="dig"),
        lambda messages: one("orch.done", summary=messages[-1]["content"]),
    )
    result = Host(manager, {"lead": lead, "researcher": child}).run_sync("go")
    [delegation] = result.delegations
    assert delegation.status == "completed" and delegation.summary == "child found it"
    assert delegation.result is not None and delegation.result.identity == "researcher"
    record = manager.storage.load_delegation_with_messages(delegation.delegation_id)
    assert record["status"] == "completed" and record["delegating_tier"] == "lead"
    assert "child found it" in result.summary


def test_a_child_that_answers_without_complete_is_completed_with_its_text(manager):
    lead = Script(one("orch.delegate", target="r", task="t"), one("orch.done", summary="ok"))
    result = Host(manager, {"lead": lead, "r": Script("plain findings")}).run_sync("go")
    record = manager.storage.load_delegation_with_messages(result.delegations[0].delegation_id)
    assert (record["status"], record["summary"]) == ("completed", "plain findings")


def test_delegation_max_turns_is_the_childs_limit(manager):
    child = Script(*[one("orch.echo", n=i) for i in range(3)])
    lead = Script(one("orch.delegate", target="r", task="t", max_turns=3), one("orch.done", summary="ok"))
    result = Host(manager, {"lead": lead, "r": child}, max_turns=10).run_sync("go")
    assert result.delegations[0].status == "failed" and result.delegations[0].result.turns == 3


def test_the_root_stops_at_max_turns(manager):
    result = Host(manager, Script(*[one("orch.echo", n=i) for i in range(2)]), max_turns=2).run_sync("go")
    assert result.status == "max_turns" and not result.ok and "2 turns" in result.summary


def test_delegations_nest_only_to_max_depth(manager):
    nested = Script(one("orch.delegate", target="c", task="deeper"), one("orch.done", summary="b done"))
    lead = Script(one("orch.delegate", target="b", task="t"), one("orch.done", summary="a done"))
    result = Host(manager, {"lead": lead, "b": nested}, max_depth=1).run_sync("go")
    inner = result.delegations[0].result.delegations[0]
    assert inner.status == "failed" and "at most 1 deep" in inner.summary
    assert manager.storage.load_delegation_with_messages(inner.delegation_id)["status"] == "failed"


def test_a_child_model_that_raises_leaves_the_record_failed(manager):
    def broken(messages, tools):
        raise RuntimeError("model crashed")

    lead = Script(one("orch.delegate", target="r", task="t"))
    with pytest.raises(RuntimeError, match="model crashed"):
        Host(manager, {"lead": lead, "r": broken}).run_sync("go")
    [delegation] = manager.storage.list_delegations()
    assert delegation["status"] == "failed" and "model crashed" in delegation["summary"]


def test_resume_from_seeds_the_child(manager):
    first = Script(one("orch.echo", note="first run"), one("orch.done", summary="first"))
    lead1 = Script(one("orch.delegate", target="r", task="t1"), one("orch.done", summary="ok"))
    earlier = Host(manager, {"lead": lead1, "r": first}).run_sync("one").delegations[0]
    second = Script(one("orch.done", summary="second"))
    lead2 = Script(
        one("orch.delegate", target="r", task="t2", resume_from=earlier.delegation_id), one("orch.done", summary="ok")
    )
    Host(manager, {"lead": lead2, "r": second}).run_sync("two")
    contents = [m["content"] for m in second.seen[0]]
    assert contents.index("t1") < contents.index("echoed") < contents.index("t2")


def test_pipeline_stage_failure_stops_the_pipeline(manager):
    lead = Script(
        one("orch.pipeline", stages=["a", "b"], task="t"), lambda m: one("orch.done", summary=m[-1]["content"])
    )
    failing = Script(*[one("orch.echo", n=i) for i in range(2)])
    b = Script()
    result = Host(manager, {"lead": lead, "a": failing, "b": b}, max_turns=2).run_sync("go")
    assert [d.target for d in result.delegations] == ["a"] and b.seen == []
    assert "pipeline stopped at 'a'" in result.summary


def test_anchors_are_pinned_in_the_leading_system_message_and_removed_with_empty_content(manager):
    model = Script(
        one("orch.anchor", key="plan", content="step 1"),
        one("orch.echo"),
        one("orch.anchor", key="plan", content=""),
        one("orch.done", summary="s"),
    )
    result = Host(manager, model).run_sync("go")
    seen = model.seen[1]
    assert seen[0]["role"] == "system" and "[plan]\nstep 1" in seen[0]["content"]
    assert [m["role"] for m in seen[1:]].count("system") == 0  # never one mid-conversation
    assert all("[plan]" not in m["content"] for m in model.seen[3])
    assert result.anchors == {}


def test_anchors_are_one_per_key_bounded_and_never_a_second_copy_of_a_page(manager):
    from entropic_mcp.host import MAX_ANCHORS

    steps = [one("orch.anchor", key=f"k{i}", content=f"v{i}") for i in range(MAX_ANCHORS + 4)]
    steps += [one("orch.anchor", key="k5", content="newer"), one("orch.done", summary="s")]
    model = Script(*steps)
    result = Host(manager, model, max_turns=len(steps) + 1).run_sync("go")
    assert len(result.anchors) == MAX_ANCHORS
    assert "k0" not in result.anchors and list(result.anchors)[-1] == "k5" and result.anchors["k5"] == "newer"
    last_view = model.seen[-1]
    assert last_view[0]["content"].count("[k5]") == 1


def test_prune_stubs_old_tool_results_and_snapshots_first(manager):
    model = Script(
        one("orch.echo", a=1), one("orch.echo", a=2), one("orch.prune", keep=1), one("orch.done", summary="s")
    )
    result = Host(manager, model).run_sync("go")
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert [m.get("pruned", False) for m in tool_messages] == [True, True, False, False]
    assert tool_messages[0]["content"].startswith("[pruned:")
    assert manager.storage.stats()["snapshots"] == 1


def test_phase_presenter_inject_and_unknown_directives(manager):
    shown = []
    model = Script(
        calls(
            ("orch.phase", {"phase": "execute"}),
            ("orch.notify", {"data": [1]}),
            ("orch.inject", {"content": "remember X"}),
            ("orch.weird", {}),
        ),
        one("orch.done", summary="s"),
    )
    result = Host(manager, model, presenter=lambda key, data: shown.append((key, data))).run_sync("go")
    assert result.phase == "execute" and shown == [("k", [1])]
    assert any(m["content"] == "remember X" and m["role"] == "user" for m in result.messages)
    assert [d.to_dict() for d in result.unhandled] == [{"type": "sparkle", "x": 1}]


def test_calls_after_a_stop_are_answered_as_not_run(manager):
    model = Script(calls(("orch.done", {"summary": "s"}), ("orch.echo", {"late": True})))
    result = Host(manager, model).run_sync("go")
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert tool_messages[1]["is_error"] and "not_run" in tool_messages[1]["content"]
    assert {m["tool_call_id"] for m in tool_messages} == {c["id"] for c in result.messages[2]["tool_calls"]}


def test_without_storage_everything_stays_in_memory(tmp_path):
    manager = manager_for(tmp_path, storage=False)
    lead = Script(one("orch.delegate", target="r", task="t"), one("orch.done", summary="ok"))
    result = Host(manager, {"lead": lead, "r": Script(one("orch.done", summary="found"))}).run_sync("go")
    assert result.ok and result.delegations[0].persisted is False
    assert not (tmp_path / "store").exists()


def test_tools_offered_follow_the_identitys_access_keys(tmp_path):
    manager = manager_for(tmp_path, storage=False, identities={"viewer": {"keys": {"orch.echo": "READ"}}})
    model = Script("bye")
    Host(manager, {"viewer": model}).run_sync("x", identity="viewer")
    assert model.tools[0] == ["orch.echo"]


def test_a_missing_model_for_an_identity_is_a_clear_error(manager):
    lead = Script(one("orch.delegate", target="ghost", task="t"))
    with pytest.raises(KeyError, match="no model for identity 'ghost'"):
        Host(manager, {"lead": lead}).run_sync("go")


def test_a_delegation_the_store_refuses_is_reported_to_the_model(manager):
    lead = Script(
        one("orch.delegate", target="r", task="t", resume_from="no-such-delegation"),
        lambda messages: one("orch.done", summary=messages[-1]["content"]),
    )
    result = Host(manager, {"lead": lead}).run_sync("go")
    assert result.delegations == () and len(result.errors) == 1
    assert result.summary.startswith("[host] directives of orch.delegate could not be carried out")
