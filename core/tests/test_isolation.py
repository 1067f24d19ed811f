"""Hostile plugin code in-process: BaseException isolation, read-only hook arguments, a plugin's
ConfigError, tool names, NaN, the result ceiling, loop blocking, stdout (issue 21)."""

import asyncio
import copy
import json
import math
import sys
import time
import types

import orjson
import pytest
from entropic_mcp import (
    AccessLevel,
    ConfigError,
    MCPServerBase,
    PluginError,
    PluginLoadWarning,
    Plugins,
    ReplaceArgs,
    ServerManager,
    ToolBase,
    ToolDefinition,
    ToolDefinitionError,
    ToolResult,
    config_from_dict,
    hookimpl,
)
from entropic_mcp._calls import ReadOnlyArguments, frozen
from entropic_mcp._isolation import stops_host
from entropic_mcp._pipeline._deadlines import StepTimer
from entropic_mcp._pipeline._spine import RESULT_CEILING_BYTES, cap_text
from entropic_mcp._stdout import guard_stdout
from entropic_mcp.testing import make_manager


def definition(name, properties=None):
    return ToolDefinition(name=name, description="t", input_schema={"type": "object", "properties": properties or {}})


class Raises(ToolBase):
    definition = definition("raises")
    required_access_level = AccessLevel.READ

    def __init__(self, exc):
        super().__init__()
        self.exc = exc

    def execute(self, args, ctx):
        raise self.exc


class AsyncRaises(Raises):
    definition = definition("async_raises")

    async def execute(self, args, ctx):
        raise self.exc


def server(*tools, name="hostile"):
    made = MCPServerBase(name)
    for tool in tools:
        made.register_tool(tool)
    return made


ALLOW = {"permissions": {"default": "allow"}}


# -- BaseException ------------------------------------------------------------------------------


@pytest.mark.parametrize("exc", [SystemExit(2), KeyboardInterrupt(), type("Own", (BaseException,), {})()])
def test_a_tool_raising_a_base_exception_answers_an_error_naming_it(tmp_path, exc):
    manager = make_manager(tmp_path, config=ALLOW, servers=[server(Raises(exc), AsyncRaises(exc))])
    for name in ("hostile.raises", "hostile.async_raises"):
        outcome = manager.call_sync(name)
        assert outcome.response.is_error and type(exc).__name__ in outcome.response.result, outcome.response.result


def test_cancellation_and_a_real_interrupt_still_stop_the_host(monkeypatch):
    from entropic_mcp import _isolation

    assert stops_host(asyncio.CancelledError()) and stops_host(GeneratorExit())
    assert not stops_host(SystemExit(0)) and not stops_host(KeyboardInterrupt())
    monkeypatch.setattr(_isolation, "_interrupts", 1)
    assert stops_host(KeyboardInterrupt())


def test_a_plugin_exiting_at_import_fails_alone(tmp_path, monkeypatch):
    module = types.ModuleType("entropic_mcp_exit_probe")
    monkeypatch.setitem(sys.modules, "entropic_mcp_exit_probe", module)
    plugins = Plugins(strict=False)

    class Exits:
        @hookimpl
        def entropic_mcp_servers(self, config):
            raise SystemExit(3)

    with pytest.warns(PluginLoadWarning, match="exits.*SystemExit"):
        plugins.register(Exits(), "exits")
        manager = ServerManager.from_config(config_from_dict({}, root=tmp_path), plugins=plugins)
    assert plugins.infos["exits"].status == "failed"
    manager.close()


# -- read-only arguments ------------------------------------------------------------------------


def test_frozen_arguments_read_serialise_and_copy_but_refuse_changes():
    view = frozen({"a": [1, {"b": 2}]})
    assert json.loads(json.dumps(view)) == orjson.loads(orjson.dumps(view)) == {"a": [1, {"b": 2}]}
    plain = copy.deepcopy(view)
    plain["a"].append(3)
    assert type(plain) is dict and view["a"] == [1, {"b": 2}]
    for change in (
        lambda: view.__setitem__("x", 1),
        lambda: view.pop("a"),
        lambda: view["a"].append(1),
        lambda: view["a"][1].update(c=3),
    ):
        with pytest.raises(ReadOnlyArguments):
            change()


class Echo(ToolBase):
    definition = definition("echo", {"text": {"type": "string"}})
    required_access_level = AccessLevel.WRITE

    def execute(self, args, ctx):
        return args.get("text", "")


class Editor:
    """Every call hook that sees the arguments edits them in place."""

    @hookimpl
    def entropic_mcp_approve_tool_call(self, request):
        request.args["text"] = "secret"
        return "allow_once"

    @hookimpl
    def entropic_mcp_after_tool_call(self, call, outcome):
        outcome.args["text"] = "rewritten"


def test_an_approver_editing_the_arguments_is_a_fault_and_what_ran_is_what_was_judged(tmp_path):
    manager = make_manager(tmp_path, config={"permissions": {"default": "ask"}}, servers=[server(Echo())])
    manager.plugins.register(Editor(), "editor")
    outcome = manager.call_sync("hostile.echo", {"text": "harmless"})
    assert outcome.kind == "rejected_permission", outcome.response.result  # the approver faulted: nobody answered
    assert any("editor" in fault and "in place" in fault for fault in outcome.hook_faults), outcome.hook_faults
    assert outcome.args == {"text": "harmless"}


def test_replace_args_is_copied_so_the_hook_cannot_change_it_after_the_decision(tmp_path):
    kept = {"text": "judged"}

    class Replacer:
        @hookimpl
        def entropic_mcp_before_tool_call(self, call):
            return ReplaceArgs(args=kept)

        @hookimpl
        def entropic_mcp_after_tool_call(self, call, outcome):
            return None

    manager = make_manager(tmp_path, config=ALLOW, servers=[server(Echo())])
    manager.plugins.register(Replacer(), "replacer")
    outcome = manager.call_sync("hostile.echo", {"text": "sent"})
    kept["text"] = "changed later"
    assert outcome.response.result == "judged" and outcome.args == {"text": "judged"}


# -- a plugin's ConfigError -------------------------------------------------------------------


class Needy:
    @hookimpl
    def entropic_mcp_servers(self, config):
        raise ConfigError("[servers.needy] api_key is required")


def test_a_plugins_config_error_fails_that_plugin_and_strict_mode_makes_it_fatal(tmp_path):
    plugins = Plugins(strict=False)
    plugins.register(Needy(), "needy")
    with pytest.warns(PluginLoadWarning, match="needy.*api_key is required"):
        manager = ServerManager.from_config(config_from_dict({}, root=tmp_path), plugins=plugins)
    assert plugins.infos["needy"].status == "failed"
    manager.close()
    strict = Plugins(strict=True)
    strict.register(Needy(), "needy")
    with pytest.raises(ConfigError, match="plugin 'needy'.*api_key is required") as info:
        ServerManager.from_config(config_from_dict({}, root=tmp_path), plugins=strict)
    assert isinstance(info.value, PluginError)


# -- names, NaN, size -------------------------------------------------------------------------------


def test_a_tool_name_that_is_not_a_valid_name_is_refused_at_registration():
    class Evil(Echo):
        @property
        def name(self):
            return "evil/../name with space"

    with pytest.raises(ToolDefinitionError, match=r"invalid tool name 'evil/\.\./name with space'"):
        server(Evil())


@pytest.mark.parametrize(("value", "said"), [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")])
def test_non_finite_numbers_are_refused_in_results_and_arguments(tmp_path, value, said):
    with pytest.raises(ValueError, match=f"holds {said} at 'a.b\\[1\\]'"):
        ToolResult.json({"a": {"b": [1.0, value]}})

    class Number(ToolBase):
        definition = definition("number", {"x": {"type": "number"}})
        required_access_level = AccessLevel.READ

        def execute(self, args, ctx):
            return repr(args["x"])

    manager = make_manager(tmp_path, config=ALLOW, servers=[server(Number())])
    outcome = manager.call_sync("hostile.number", {"x": value})
    assert outcome.kind == "rejected_schema" and f"'x' is {said}" in outcome.response.result


def test_a_result_is_cut_at_the_hard_ceiling_with_the_cap_off():
    text = "x" * (RESULT_CEILING_BYTES + 10)
    cut = cap_text(text, 0)
    assert cut.startswith("x" * 100) and len(cut) < RESULT_CEILING_BYTES + 300
    assert "hard ceiling" in cut and "10 more bytes" in cut
    assert cap_text("short", 0) == "short"


# -- loop blocking, stdout ----------------------------------------------------------------------------


def test_the_step_timer_measures_how_long_a_coroutine_held_the_loop():
    async def blocks():
        await asyncio.sleep(0)
        time.sleep(0.2)
        await asyncio.sleep(0)
        return "done"

    async def main():
        timer = StepTimer(blocks())
        return await timer, timer.longest

    value, longest = asyncio.run(main())
    assert value == "done" and longest >= 0.2


def test_what_plugin_code_prints_goes_to_stderr_naming_the_plugin(capsys, monkeypatch):
    from entropic_mcp import _isolation

    monkeypatch.setitem(_isolation._modules, __name__, "printer")
    with guard_stdout() as guard:
        print("hello")
    out, err = capsys.readouterr()
    assert out == "" and "hello" in err and "plugin 'printer' wrote to stdout" in err
    assert guard.seen == {"printer": "hello"}


def test_the_loop_watchdog_names_the_async_tool_while_it_holds_the_loop(tmp_path, caplog):
    from entropic_mcp._serve._watchdog import LoopWatchdog

    class Block(ToolBase):
        definition = definition("block")
        required_access_level = AccessLevel.READ

        async def execute(self, args, ctx):
            time.sleep(0.8)
            return "held"

    manager = make_manager(tmp_path, config=ALLOW, servers=[server(Block())])

    async def main():
        watchdog = LoopWatchdog(threshold=0.3, interval=0.05)
        watchdog.start()
        try:
            await asyncio.sleep(0.1)
            return await manager.call("hostile.block"), watchdog.stalls
        finally:
            watchdog.stop()

    with caplog.at_level("WARNING", logger="entropic_mcp"):
        outcome, stalls = asyncio.run(main())
    assert outcome.response.result == "held" and stalls >= 1
    assert "async tool hostile.block is holding the event loop" in caplog.text
