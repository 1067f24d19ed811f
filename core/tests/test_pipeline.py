import json
import subprocess
import sys
import threading

import anyio
import pytest
from demo_server import DemoServer, OtherServer
from entropic_mcp import CallContext, Refuse, ReplaceArgs, hookimpl, load_config
from entropic_mcp.testing import call, make_manager

ALLOW = {"permissions": {"default": "allow"}}


def manager_for(tmp_path, config=None, plugins=()):
    server = DemoServer(root=tmp_path)
    manager = make_manager(tmp_path, config=config or ALLOW, plugins=plugins, servers=[server])
    return manager, server


def error_of(outcome):
    return json.loads(outcome.response.result)


# -- stage 1: hooks ------------------------------------------------------------------------------


class Gate:
    @hookimpl
    def entropic_mcp_before_tool_call(self, call):
        if call.args.get("text") == "forbidden":
            return Refuse(reason="not this text")
        if call.args.get("text") == "rewrite":
            return ReplaceArgs(args={"text": "rewritten"})
        if call.args.get("text") == "garbage":
            return 42
        return None

    @hookimpl
    def entropic_mcp_after_tool_call(self, call, outcome):
        if outcome.response.result == "shout":
            return "SHOUT"
        return None


def test_before_hook_refusal_is_rejected_hook_and_the_tool_does_not_run(tmp_path):
    manager, server = manager_for(tmp_path, plugins=[Gate()])
    outcome = call(manager, "demo.echo", {"text": "forbidden"})
    assert outcome.kind == "rejected_hook"
    assert error_of(outcome) == {"error": "refused_by_hook", "message": "not this text"}
    assert outcome.response.directives == ()
    assert server.runs == []


def test_before_hook_replaces_arguments_but_never_the_tool(tmp_path):
    manager, server = manager_for(tmp_path, plugins=[Gate()])
    outcome = call(manager, "demo.echo", {"text": "rewrite"})
    assert outcome.response.result == "rewritten"
    assert server.runs[0][0] == "echo"


def test_a_hook_answer_of_the_wrong_type_refuses_the_call_and_names_the_plugin(tmp_path, caplog):
    manager, server = manager_for(tmp_path, plugins=[Gate()])
    outcome = call(manager, "demo.echo", {"text": "garbage"})
    assert outcome.kind == "rejected_hook"
    assert error_of(outcome)["error"] == "refused_by_hook"
    assert "wrong type (int)" in error_of(outcome)["message"]
    assert server.runs == []
    assert any("entropic_mcp_before_tool_call" in fault for fault in outcome.hook_faults)
    assert "returned int" in caplog.text


def test_after_hook_rewrites_the_result_text(tmp_path):
    manager, _ = manager_for(tmp_path, plugins=[Gate()])
    assert call(manager, "demo.echo", {"text": "shout"}).response.result == "SHOUT"


# -- stage 2: normalisation ---------------------------------------------------------------------


@pytest.mark.parametrize("raw", [None, "", "   ", "null", "[1]", "junk", [1], 42])
def test_non_object_arguments_become_empty_and_the_tool_reports_what_is_missing(tmp_path, raw):
    manager, server = manager_for(tmp_path)
    outcome = call(manager, "demo.echo", raw)
    assert outcome.kind == "rejected_schema"
    assert error_of(outcome)["message"].startswith("Missing required argument: text")
    assert server.runs == []


@pytest.mark.parametrize("args", [{"text": "a\ud800b"}, {"text": "ok", "\udcff": 1}, {"text": ["x", "\udfff"]}])
def test_a_lone_surrogate_is_an_invalid_args_envelope_not_an_exception(tmp_path, args):
    manager, server = manager_for(tmp_path)
    outcome = call(manager, "demo.echo", args)
    assert outcome.kind == "rejected_schema"
    assert error_of(outcome)["error"] == "invalid_args" and "surrogate" in error_of(outcome)["message"]
    assert server.runs == []
    json.dumps(outcome.to_record())  # history and audit can still store it


def test_json_text_arguments_are_parsed(tmp_path):
    manager, _ = manager_for(tmp_path)
    assert call(manager, "demo.echo", '{"text": "from text"}').response.result == "from text"


# -- stage 3: loop guards ---------------------------------------------------------------------------


def test_identical_failure_is_refused_the_third_time_before_it_runs(tmp_path):
    manager, server = manager_for(tmp_path)
    kinds = [call(manager, "demo.fail", {"x": 1}).kind for _ in range(3)]
    assert kinds == ["error", "error", "rejected_loop"]
    assert len(server.runs) == 2
    assert "failed 2 times in a row" in error_of(call(manager, "demo.fail", {"x": 1}))["message"]
    assert call(manager, "demo.fail", {"x": 2}).kind == "error"  # other arguments still run


@pytest.mark.parametrize("code", ["server_disconnected", "server_busy", "todo_busy"])
def test_a_failure_that_says_retry_later_is_never_refused_as_a_loop(tmp_path, code):
    manager, server = manager_for(tmp_path)
    kinds = [call(manager, "demo.fail", {"x": 1, "code": code}).kind for _ in range(5)]
    assert kinds == ["error"] * 5 and len(server.runs) == 5
    call(manager, "demo.fail", {"x": 1})  # a lasting failure of the same call still counts from here
    call(manager, "demo.fail", {"x": 1})
    assert call(manager, "demo.fail", {"x": 1}).kind == "rejected_loop"


def test_error_results_are_never_served_from_a_cache(tmp_path):
    manager, server = manager_for(tmp_path)
    call(manager, "demo.fail", {"x": 1})
    assert call(manager, "demo.fail", {"x": 1}).kind == "error"
    assert len(server.runs) == 2


def test_a_success_on_the_same_server_clears_the_failure_record(tmp_path):
    manager, server = manager_for(tmp_path)
    call(manager, "demo.fail", {"x": 1})
    call(manager, "demo.fail", {"x": 1})
    assert call(manager, "demo.echo", {"text": "look"}).kind == "ok"
    assert call(manager, "demo.fail", {"x": 1}).kind == "error"
    assert len([r for r in server.runs if r[0] == "fail"]) == 3


def test_a_successful_write_anywhere_clears_the_failure_record(tmp_path):
    from entropic_mcp import MCPServerBase, ToolBase
    from entropic_mcp import ToolDefinition as TD

    class Touch(ToolBase):
        definition = TD(name="touch", description="", input_schema={"type": "object"})

        def execute(self, args, ctx):
            return "touched"

    class Shell(MCPServerBase):
        name = "shell"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Touch())

    manager = make_manager(tmp_path, config=ALLOW, servers=[DemoServer(root=tmp_path), Shell(root=tmp_path)])
    call(manager, "demo.fail", {"x": 1})
    call(manager, "demo.fail", {"x": 1})
    assert call(manager, "demo.fail", {"x": 1}).kind == "rejected_loop"
    assert call(manager, "shell.touch", {}).kind == "ok"
    assert call(manager, "demo.fail", {"x": 1}).kind == "error"


def test_a_different_error_code_restarts_the_count(tmp_path):
    from entropic_mcp import AccessLevel, MCPServerBase, ToolBase, ToolResult
    from entropic_mcp import ToolDefinition as TD

    codes = iter(["read_before_write", "file_changed", "file_changed", "file_changed"])

    class Flaky(ToolBase):
        definition = TD(name="write", description="", input_schema={"type": "object"})
        required_access_level = AccessLevel.WRITE

        def execute(self, args, ctx):
            return ToolResult.error(next(codes), "try again")

    class Fs(MCPServerBase):
        name = "fs"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Flaky())

    manager = make_manager(tmp_path, config=ALLOW, servers=[Fs(root=tmp_path)])
    kinds = [call(manager, "fs.write", {"content": "A"}).kind for _ in range(4)]
    assert kinds == ["error", "error", "error", "rejected_loop"]


def test_same_tool_spiral_is_refused_until_another_tool_is_called(tmp_path):
    manager, _ = manager_for(tmp_path, config={**ALLOW, "pipeline": {"same_tool_limit": 3}})
    kinds = [call(manager, "demo.write", {"path": str(i)}).kind for i in range(4)]
    assert kinds == ["ok", "ok", "ok", "rejected_loop"]
    assert call(manager, "demo.write", {"path": "refused"}).kind == "rejected_loop"  # refusals do not reset it
    call(manager, "demo.empty", {})
    assert call(manager, "demo.write", {"path": "again"}).kind == "ok"


def test_read_tools_never_count_toward_the_spiral(tmp_path):
    manager, _ = manager_for(tmp_path, config={**ALLOW, "pipeline": {"same_tool_limit": 3}})
    assert {call(manager, "demo.echo", {"text": str(i)}).kind for i in range(20)} == {"ok"}


def test_the_default_spiral_limit_lets_a_long_run_of_shell_commands_through(tmp_path):
    manager, _ = manager_for(tmp_path)
    assert {call(manager, "demo.write", {"path": str(i)}).kind for i in range(30)} == {"ok"}


# -- stage 4: schema --------------------------------------------------------------------------------


def test_schema_messages_name_the_argument(tmp_path):
    manager, server = manager_for(tmp_path)
    wrong_enum = call(manager, "demo.write", {"path": "a", "status": "done"})
    assert wrong_enum.kind == "rejected_schema"
    assert error_of(wrong_enum)["error"] == "invalid_args"
    assert (
        'Invalid value for \'status\': "done". Must be one of: ["pending","in_progress","completed"]'
        in error_of(wrong_enum)["message"]
    )
    wrong_type = call(manager, "demo.echo", {"text": "x", "n": "many"})
    assert "Type mismatch for 'n': expected integer" in error_of(wrong_type)["message"]
    unknown = call(manager, "demo.echo", {"text": "x", "bogus": 1})
    assert "'bogus'" in error_of(unknown)["message"]
    assert server.runs == []


def test_numbers_are_coerced_to_strings_where_the_schema_says_string_and_nothing_else(tmp_path):
    manager, _ = manager_for(tmp_path)
    assert call(manager, "demo.echo", {"text": 42}).response.result == "42"
    assert call(manager, "demo.echo", {"text": "x", "n": "3"}).kind == "rejected_schema"


# -- stage 5: access keys ---------------------------------------------------------------------------


def test_access_keys_best_match_wins_and_the_refusal_names_the_level(tmp_path):
    config = {
        **ALLOW,
        "identities": {
            "reader": {"keys": {"demo.*": "READ", "demo.write": "WRITE"}},
            "nobody": {"keys": {}},
            "star": {"keys": {"*": "READ"}},
        },
    }
    manager, server = manager_for(tmp_path, config=config)
    assert call(manager, "demo.write", {"path": "a"}, identity="reader").kind == "ok"
    assert call(manager, "demo.echo", {"text": "a"}, identity="reader").kind == "ok"
    denied = call(manager, "demo.boom", {}, identity="reader")
    assert denied.kind == "rejected_access"
    assert "holds READ" in error_of(denied)["message"] and "needs WRITE" in error_of(denied)["message"]
    assert "delegate" not in error_of(denied)["message"]  # no tool here can hand the work on
    assert call(manager, "demo.echo", {"text": "b"}, identity="nobody").kind == "rejected_access"
    assert call(manager, "demo.echo", {"text": "c"}, identity="star").kind == "ok"
    assert call(manager, "demo.write", {"path": "c"}, identity="unregistered").kind == "ok"


def test_access_keys_grant_revoke_and_grant_from_within_the_granters_level(tmp_path):
    from entropic_mcp import AccessKeyError

    manager, _ = manager_for(tmp_path, config={**ALLOW, "identities": {"lead": {"keys": {"demo.*": "READ"}}}})
    keys = manager.access_keys
    keys.register("child", {})
    assert call(manager, "demo.echo", {"text": "a"}, identity="child").kind == "rejected_access"
    keys.grant_from("lead", "child", "demo.echo", "READ")
    assert call(manager, "demo.echo", {"text": "b"}, identity="child").kind == "ok"
    with pytest.raises(AccessKeyError):
        keys.grant_from("lead", "child", "demo.write", "WRITE")
    keys.revoke("child", "demo.echo")
    assert call(manager, "demo.echo", {"text": "c"}, identity="child").kind == "rejected_access"


# -- stage 6: duplicates ----------------------------------------------------------------------------


def test_a_repeated_read_runs_every_time_and_is_flagged_then_stopped(tmp_path):
    manager, server = manager_for(tmp_path)
    outcomes = [call(manager, "demo.echo", {"text": "same"}) for _ in range(3)]
    assert [o.kind for o in outcomes] == ["ok", "ok", "ok"]
    assert len(server.runs) == 3
    assert outcomes[0].response.result == "same"
    assert outcomes[1].response.result.startswith("[duplicate_call] Tool 'demo.echo' was already called")
    assert outcomes[1].response.result.endswith("\n\nsame")
    assert "STOP" in outcomes[2].response.result and "3 times" in outcomes[2].response.result
    assert [o.consecutive_duplicates for o in outcomes] == [0, 1, 2]


def test_a_repeat_with_a_new_answer_is_not_flagged(tmp_path):
    (tmp_path / "f").write_text("A")
    manager, server = manager_for(tmp_path)
    first = call(manager, "demo.echo", {"text": "x"})
    assert first.consecutive_duplicates == 0
    server.get_tool("echo").suffix = "changed"
    second = call(manager, "demo.echo", {"text": "x"})
    assert second.consecutive_duplicates == 0 and "[duplicate_call]" not in second.response.result


def test_writes_are_never_deduplicated(tmp_path):
    manager, server = manager_for(tmp_path)
    outcomes = [call(manager, "demo.write", {"path": "a", "status": "pending"}) for _ in range(5)]
    assert {o.kind for o in outcomes} == {"ok"}
    assert all(o.consecutive_duplicates == 0 for o in outcomes)
    assert len(server.runs) == 5


def test_argument_key_order_does_not_matter_for_duplicates(tmp_path):
    manager, _ = manager_for(tmp_path)
    call(manager, "demo.echo", {"text": "a", "n": 1})
    assert call(manager, "demo.echo", {"n": 1, "text": "a"}).consecutive_duplicates == 1


def test_duplicates_are_per_conversation_and_identity(tmp_path):
    manager, server = manager_for(tmp_path)
    call(manager, "demo.echo", {"text": "a"}, conversation="one")
    assert call(manager, "demo.echo", {"text": "a"}, conversation="two").consecutive_duplicates == 0
    assert call(manager, "demo.echo", {"text": "a"}, conversation="one", identity="other").consecutive_duplicates == 0
    assert call(manager, "demo.echo", {"text": "a"}, conversation="one").consecutive_duplicates == 1
    assert len(server.runs) == 4


def test_skip_duplicate_check_hook_of_the_servers_own_plugin(tmp_path):
    class Repeatable:
        @hookimpl
        def entropic_mcp_skip_duplicate_check(self, server, tool):
            return True if tool == "echo" else None

    manager, server = manager_for(tmp_path, plugins=[Repeatable()])
    for _ in range(3):
        assert call(manager, "demo.echo", {"text": "a"}).consecutive_duplicates == 0
    assert len(server.runs) == 3


# -- stage 7: permissions ---------------------------------------------------------------------------


class Approver:
    def __init__(self, answer):
        self.answer = answer
        self.requests = []

    @hookimpl
    def entropic_mcp_approve_tool_call(self, request):
        self.requests.append(request)
        return self.answer


def test_deny_beats_allow_whatever_their_breadth(tmp_path):
    manager, server = manager_for(
        tmp_path,
        config={
            "permissions": {
                "default": "allow",
                "allow": ["demo.write:secrets/public.txt"],
                "deny": ["demo.write:secrets/*"],
            }
        },
    )
    assert call(manager, "demo.write", {"path": "secrets/public.txt"}).kind == "rejected_permission"
    manager, server = manager_for(
        tmp_path, config={"permissions": {"default": "ask", "allow": ["demo.*"], "deny": ["demo.write:secrets/key"]}}
    )
    assert call(manager, "demo.write", {"path": "secrets/key"}).kind == "rejected_permission"
    assert call(manager, "demo.write", {"path": "other"}).kind == "ok"
    assert call(manager, "demo.echo", {"text": "x"}).kind == "ok"


def test_no_approver_denies_and_names_the_rule_to_add(tmp_path):
    manager, server = manager_for(tmp_path, config={"permissions": {"default": "ask"}})
    outcome = call(manager, "demo.write", {"path": "a.txt"})
    assert outcome.kind == "rejected_permission"
    assert 'allow = ["demo.write:a.txt"]' in error_of(outcome)["message"]
    assert server.runs == []


def test_a_part_that_was_not_understood_is_never_allowed_and_no_rule_is_suggested(tmp_path):
    from entropic_mcp.toolkit.paths import PermissionPart

    server = DemoServer(root=tmp_path)
    server.permission_parts = lambda tool, args: [
        PermissionPart(names=("demo.write", "demo.write:x"), store="demo.write:x", understood=False)
    ]
    manager = make_manager(tmp_path, config={"permissions": {"allow": ["demo.*"]}}, servers=[server])
    outcome = call(manager, "demo.write", {"path": "x"})
    assert outcome.kind == "rejected_permission"
    assert "no rule can allow it" in error_of(outcome)["message"]
    assert "allow = [" not in error_of(outcome)["message"]


def test_ask_rule_asks_even_when_an_allow_rule_matches(tmp_path):
    approver = Approver("deny_once")
    manager, server = manager_for(
        tmp_path, config={"permissions": {"allow": ["demo.*"], "ask": ["demo.write"]}}, plugins=[approver]
    )
    assert call(manager, "demo.write", {"path": "a"}).kind == "rejected_permission"
    assert approver.requests[0].tool == "demo.write"
    assert server.runs == []


def test_allow_read_and_auto_approve(tmp_path):
    manager, _ = manager_for(tmp_path, config={"permissions": {"allow_read": True, "deny": ["demo.echo:*"]}})
    assert call(manager, "demo.empty", {}).kind == "ok_empty"
    assert call(manager, "demo.write", {"path": "a"}).kind == "rejected_permission"
    manager, _ = manager_for(tmp_path, config={"permissions": {"auto_approve": True, "deny": ["demo.write:x"]}})
    assert call(manager, "demo.write", {"path": "a"}).kind == "ok"
    assert call(manager, "demo.write", {"path": "x"}).kind == "rejected_permission"


def test_always_allow_writes_one_rule_and_the_next_call_is_not_asked(tmp_path):
    (tmp_path / "entropic-mcp.toml").write_text('[permissions]\ndefault = "ask"\n')
    config = load_config(tmp_path / "entropic-mcp.toml")
    from entropic_mcp import ServerManager
    from entropic_mcp.testing import fresh_plugins

    approver = Approver("always_allow")
    manager = ServerManager(config, plugins=fresh_plugins(approver), servers=[DemoServer(root=tmp_path)])
    assert call(manager, "demo.write", {"path": "a.txt"}).kind == "ok"
    assert call(manager, "demo.write", {"path": "b.txt"}).kind == "ok"
    assert call(manager, "demo.write", {"path": "a.txt", "status": "pending"}).kind == "ok"
    assert [r.pattern for r in approver.requests] == ["demo.write:a.txt", "demo.write:b.txt"]
    local = (tmp_path / "entropic-mcp.local.toml").read_text()
    assert local.count("demo.write:a.txt") == 1
    reloaded = load_config(tmp_path / "entropic-mcp.toml")
    assert reloaded.permissions.allow == ("demo.write:a.txt", "demo.write:b.txt")


def test_always_deny_persists_and_denies_from_then_on(tmp_path):
    (tmp_path / "entropic-mcp.toml").write_text("")
    config = load_config(tmp_path / "entropic-mcp.toml")
    from entropic_mcp import ServerManager
    from entropic_mcp.testing import fresh_plugins

    approver = Approver("always_deny")
    manager = ServerManager(config, plugins=fresh_plugins(approver), servers=[DemoServer(root=tmp_path)])
    assert call(manager, "demo.write", {"path": "a"}).kind == "rejected_permission"
    assert call(manager, "demo.write", {"path": "a", "status": "pending"}).kind == "rejected_permission"
    assert len(approver.requests) == 1
    assert load_config(tmp_path / "entropic-mcp.toml").permissions.deny == ("demo.write:a",)


def test_feedback_of_a_denial_reaches_the_model(tmp_path):
    from entropic_mcp import ApprovalDecision

    manager, _ = manager_for(
        tmp_path,
        config={"permissions": {"default": "ask"}},
        plugins=[Approver(ApprovalDecision(answer="deny_once", feedback="use b.txt"))],
    )
    assert "use b.txt" in error_of(call(manager, "demo.write", {"path": "a"}))["message"]


def test_concurrent_writers_of_the_local_file_leave_it_well_formed(tmp_path):
    from entropic_mcp._pipeline._rules import persist_rules

    local = tmp_path / "entropic-mcp.local.toml"
    script = (
        "import sys; from pathlib import Path; from entropic_mcp._pipeline._rules import persist_rules\n"
        "for i in range(30): persist_rules(Path(sys.argv[1]), 'allow', [f'other.tool:{i}'])\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(local)])
    for i in range(30):
        persist_rules(local, "allow", [f"demo.tool:{i}"])
        import tomllib

        tomllib.loads(local.read_text())  # a reader never sees half a file
    assert child.wait(timeout=60) == 0
    rules = tomllib.loads(local.read_text())["permissions"]["allow"]
    assert len(rules) == 60 and len(set(rules)) == 60


# -- stage 8: dispatch ------------------------------------------------------------------------------


def test_timeout_returns_partial_output_with_kind_timeout(tmp_path):
    manager, _ = manager_for(tmp_path, config={**ALLOW, "pipeline": {"tool_timeouts": {"demo.slow": 0.05}}})
    outcome = call(manager, "demo.slow", {"seconds": 10})
    assert outcome.kind == "timeout"
    assert error_of(outcome)["error"] == "timeout"
    assert error_of(outcome)["output"] == "started"


def test_sync_tool_sees_cancellation_on_timeout(tmp_path):
    manager, server = manager_for(tmp_path, config={**ALLOW, "pipeline": {"tool_timeouts": {"demo.slow_sync": 0.05}}})
    assert call(manager, "demo.slow_sync", {"seconds": 10}).kind == "timeout"
    for _ in range(500):
        if server.runs:
            break
        threading.Event().wait(0.01)
    assert server.runs[-1][0] == "slow_sync_cancelled"


def test_cancelled_call_is_recorded_as_cancelled(tmp_path):
    manager, _ = manager_for(tmp_path)

    async def main():
        with anyio.move_on_after(0.05):
            await manager.call("demo.slow", {"seconds": 10}, CallContext(conversation_id="c"))

    anyio.run(main)
    assert manager.pipeline.history[-1]["kind"] == "cancelled"


def test_a_slow_sync_tool_does_not_block_other_calls(tmp_path):
    manager, _ = manager_for(tmp_path)

    async def main():
        order = []
        async with anyio.create_task_group() as tg:

            async def slow():
                await manager.call("demo.slow_sync", {"seconds": 0.5}, CallContext(conversation_id="a"))
                order.append("slow")

            async def fast():
                await manager.call("demo.echo", {"text": "x"}, CallContext(conversation_id="b"))
                order.append("fast")

            tg.start_soon(slow)
            tg.start_soon(fast)
        return order

    assert anyio.run(main) == ["fast", "slow"]


def test_tool_that_raises_gets_the_barrier_text_and_no_anchor(tmp_path):
    manager, _ = manager_for(tmp_path)
    outcome = call(manager, "demo.boom", {})
    assert outcome.kind == "error"
    assert outcome.response.to_dict() == {
        "result": "Error: tool 'demo.boom' failed: kaboom",
        "directives": [],
        "is_error": True,
    }


# -- stage 9: cap and kinds ---------------------------------------------------------------------------


def test_results_are_capped_at_a_utf8_boundary_with_the_marker(tmp_path):
    manager, _ = manager_for(tmp_path, config={**ALLOW, "pipeline": {"max_result_bytes": 1001}})
    result = call(manager, "demo.big", {"size": 5000}).response.result
    head, _, marker = result.partition("\n[... truncated, ")
    assert head == "é" * 500
    assert marker == f"{10000 - 1000} more bytes]"


def test_cap_zero_disables_it(tmp_path):
    manager, _ = manager_for(tmp_path, config={**ALLOW, "pipeline": {"max_result_bytes": 0}})
    assert len(call(manager, "demo.big", {"size": 50000}).response.result) == 50000


def test_kinds_ok_empty_and_unknowns(tmp_path):
    manager, _ = manager_for(tmp_path)
    assert call(manager, "demo.empty", {}).kind == "ok_empty"
    unknown_tool = call(manager, "demo.nope", {})
    assert (unknown_tool.kind, error_of(unknown_tool)["error"]) == ("error", "unknown_tool")
    unknown_server = call(manager, "nope.echo", {})
    assert error_of(unknown_server)["error"] == "unknown_server"
    assert "unknown server 'nope'" in error_of(unknown_server)["message"]


# -- stage 10: history ------------------------------------------------------------------------------


def test_history_keeps_argument_names_never_values(tmp_path):
    manager, _ = manager_for(tmp_path)
    call(manager, "demo.echo", {"text": "secret-value"})
    entry = manager.pipeline.history[-1]
    assert entry["arg_names"] == ["text"]
    assert "secret-value" not in json.dumps(entry)
    assert manager.pipeline.metrics["demo.echo"] == {"ok": 1}


# -- batches ---------------------------------------------------------------------------------------


def test_batch_runs_in_order_caps_the_count_and_reports_the_surplus(tmp_path):
    manager, server = manager_for(tmp_path, config={**ALLOW, "pipeline": {"max_tool_calls_per_turn": 3}})
    calls = [("demo.echo", {"text": str(i)}) for i in range(5)]
    batch = anyio.run(manager.execute_batch, calls)
    assert [o.response.result for o in batch.outcomes] == ["0", "1", "2"]
    assert batch.surplus == ("demo.echo", "demo.echo")


def test_batch_runs_delegation_last_and_stops_after_stop_processing(tmp_path):
    from entropic_mcp import MCPServerBase, ToolBase, ToolResult
    from entropic_mcp import ToolDefinition as TD
    from entropic_mcp.directives import StopProcessing

    class Delegate(ToolBase):
        definition = TD(name="delegate", description="", input_schema={"type": "object"})
        runs_last = True

        def execute(self, args, ctx):
            return ToolResult(text="delegated", directives=[StopProcessing()])

    class Entropic(MCPServerBase):
        name = "entropic"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Delegate())

    manager = make_manager(tmp_path, config=ALLOW, servers=[DemoServer(root=tmp_path), Entropic(root=tmp_path)])
    batch = anyio.run(
        manager.execute_batch,
        [("entropic.delegate", {}), ("demo.write", {"path": "a"}), ("entropic.delegate", {"x": 1})],
    )
    assert [o.name for o in batch.outcomes] == ["demo.write", "entropic.delegate"]
    assert batch.stopped == "stop_processing"
    assert batch.surplus == ("entropic.delegate",)


def test_batch_stops_after_the_stop_duplicate_message(tmp_path):
    manager, server = manager_for(tmp_path)
    calls = [("demo.echo", {"text": "a"})] * 6
    batch = anyio.run(manager.execute_batch, calls)
    assert batch.stopped == "duplicate_stop"
    assert len(batch.outcomes) == 3 and len(server.runs) == 3
    assert batch.surplus == ("demo.echo",) * 3


def test_identical_reads_in_one_batch_are_flagged_as_in_sequence(tmp_path):
    manager, server = manager_for(tmp_path)
    batch = anyio.run(manager.execute_batch, [("demo.echo", {"text": "a"}), ("demo.echo", {"text": "a"})])
    assert [o.consecutive_duplicates for o in batch.outcomes] == [0, 1]
    assert len(server.runs) == 2


def test_a_stop_reports_every_call_that_ran_beside_it(tmp_path):
    from entropic_mcp import AccessLevel, MCPServerBase, ToolBase, ToolResult
    from entropic_mcp import ToolDefinition as TD
    from entropic_mcp.directives import StopProcessing

    class Stop(ToolBase):
        definition = TD(name="stop", description="", input_schema={"type": "object"})
        required_access_level = AccessLevel.READ

        def execute(self, args, ctx):
            return ToolResult(text="stopping", directives=[StopProcessing()])

    class Control(MCPServerBase):
        name = "control"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Stop())

    manager = make_manager(tmp_path, config=ALLOW, servers=[DemoServer(root=tmp_path), Control(root=tmp_path)])
    demo = manager.servers["demo"]
    batch = anyio.run(manager.execute_batch, [("control.stop", {}), ("demo.echo", {"text": "ran"})])
    assert batch.stopped == "stop_processing"
    assert [o.name for o in batch.outcomes] == ["control.stop", "demo.echo"]  # it ran: it is reported
    assert batch.surplus == ()
    assert len(demo.runs) == 1
    again = call(manager, "demo.echo", {"text": "ran"}, conversation="default")
    assert again.kind == "ok"


# -- isolation under load -------------------------------------------------------------------------


def test_fifty_conversations_in_parallel_never_share_state(tmp_path):
    manager, server = manager_for(tmp_path, config={**ALLOW, "pipeline": {"same_tool_limit": 1000}})
    errors = []

    def worker(n):
        try:
            for i in range(20):
                outcome = call(manager, "demo.write", {"path": f"p{i}"}, conversation=f"conv-{n}")
                if outcome.kind != "ok":
                    errors.append((n, i, outcome.kind))
                look = call(manager, "demo.echo", {"text": f"p{i}"}, conversation=f"conv-{n}")
                again = call(manager, "demo.echo", {"text": f"p{i}"}, conversation=f"conv-{n}")
                if look.consecutive_duplicates != 0 or again.consecutive_duplicates != 1:
                    errors.append((n, i, "dup", look.consecutive_duplicates, again.consecutive_duplicates))
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len([r for r in server.runs if r[0] == "write"]) == 50 * 20
    by_conversation = {}
    for _, args, conversation in (r for r in server.runs if r[0] == "write"):
        by_conversation.setdefault(conversation, []).append(args["path"])
    assert all(paths == [f"p{i}" for i in range(20)] for paths in by_conversation.values())


def test_other_server_and_listing_order(tmp_path):
    manager = make_manager(tmp_path, config=ALLOW, servers=[DemoServer(root=tmp_path), OtherServer(root=tmp_path)])
    names = [t["name"] for t in manager.list_tools()]
    assert names[:2] == ["demo.echo", "demo.write"] and names[-1] == "other.echo"
    assert manager.list_tools() is manager.list_tools()  # cached


def test_the_per_call_outcome_and_envelope_makers_set_every_field():
    import inspect

    import attrs
    from entropic_mcp import ServerResponse
    from entropic_mcp._pipeline._outcome import CallOutcome, made

    names = list(inspect.signature(made).parameters)
    assert [*names, "time"] == [field.name for field in attrs.fields(CallOutcome)]
    outcome = made(*(f"value of {name}" for name in names))
    rebuilt = attrs.evolve(outcome)  # the attrs constructor, reading every field back
    assert rebuilt == outcome and attrs.asdict(rebuilt, recurse=False) == attrs.asdict(outcome, recurse=False)
    response = ServerResponse._make("text", (), False, {"a": 1}, ({"type": "image"},))
    assert attrs.asdict(attrs.evolve(response), recurse=False) == attrs.asdict(response, recurse=False)
    assert ServerResponse._make('{"error": "boom"}', (), True).code == "boom"


def _nesting_manager(tmp_path, inner, inner_args, timeouts):
    """A ``nest.outer`` tool that first calls ``inner`` and then waits 3 s itself; the inner kinds."""
    from entropic_mcp import MCPServerBase, ToolBase
    from entropic_mcp import ToolDefinition as TD

    inner_kinds = []

    class Outer(ToolBase):
        definition = TD(name="outer", description="", input_schema={"type": "object"})

        async def execute(self, args, ctx):
            outcome = await manager.call(inner, inner_args, CallContext(conversation_id="inner"))
            inner_kinds.append(outcome.kind)
            await anyio.sleep(3)
            return "slept"

    class Nest(MCPServerBase):
        name = "nest"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Outer())

    manager = make_manager(
        tmp_path,
        config={**ALLOW, "pipeline": {"tool_timeouts": timeouts}},
        servers=[DemoServer(root=tmp_path), Nest(root=tmp_path)],
    )
    return manager, inner_kinds


def test_a_nested_call_keeps_the_outer_calls_deadline(tmp_path):
    manager, inner_kinds = _nesting_manager(tmp_path, "demo.echo", {"text": "inner"}, {"nest.outer": 0.1})
    assert call(manager, "nest.outer", {}).kind == "timeout"
    assert inner_kinds == ["ok"]


def test_an_outer_call_keeps_its_deadline_after_a_nested_call_that_waited(tmp_path):
    # The inner call arms its deadline before the outer one does (each arms when it first waits).
    manager, inner_kinds = _nesting_manager(
        tmp_path, "demo.slow", {"seconds": 0.05}, {"nest.outer": 0.3, "demo.slow": 5}
    )
    assert call(manager, "nest.outer", {}).kind == "timeout"
    assert inner_kinds == ["ok"]


def test_a_nested_call_that_waits_keeps_its_own_deadline(tmp_path):
    manager, inner_kinds = _nesting_manager(
        tmp_path, "demo.slow", {"seconds": 10}, {"nest.outer": 0.6, "demo.slow": 0.1}
    )
    assert call(manager, "nest.outer", {}).kind == "timeout"
    assert inner_kinds == ["timeout"]


def test_every_outcome_is_written_whole_to_the_audit_trail(tmp_path):
    from entropic_mcp.testing import MemoryStorage

    storage = MemoryStorage()
    from entropic_mcp import ServerManager, config_from_dict
    from entropic_mcp.testing import fresh_plugins

    manager = ServerManager(
        config_from_dict(ALLOW, root=tmp_path),
        plugins=fresh_plugins(),
        servers=[DemoServer(root=tmp_path)],
        storage=storage,
    )
    call(manager, "demo.echo", {"text": "audited"})
    call(manager, "demo.nope", {})
    assert storage.stats()["tool_calls"] == 2


def test_the_default_store_is_opened_for_the_audit_trail(tmp_path):
    from entropic_mcp import ServerManager, config_from_dict
    from entropic_mcp.testing import fresh_plugins

    config = config_from_dict({**ALLOW, "storage": {"backend": "tinydb", "path": "store"}}, root=tmp_path)
    manager = ServerManager(config, plugins=fresh_plugins(), servers=[DemoServer(root=tmp_path)])
    call(manager, "demo.echo", {"text": "audited"})
    assert manager.storage.stats()["tool_calls"] == 1
    manager.close()
