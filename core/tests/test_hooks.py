"""Each hook exercised once here, and the meta-tests that keep hooks, docs and tests in step."""

import importlib.util
import inspect
import types
from pathlib import Path

import pluggy
from demo_server import DemoServer
from entropic_mcp import ConfigError, hookimpl, hookspecs
from entropic_mcp.directives import DirectiveHandlerSpec, PhaseChange
from entropic_mcp.storage import StorageBackendSpec
from entropic_mcp.testing import call, fresh_plugins, make_manager

REPO = Path(__file__).resolve().parents[2]


def test_add_hookspecs_lets_a_plugin_declare_and_call_its_own_hook():
    spec_module = types.ModuleType("extra_specs")
    marker = pluggy.HookspecMarker("entropic_mcp")

    @marker(firstresult=True)
    def entropic_mcp_weather(city):
        """Say the weather."""

    spec_module.entropic_mcp_weather = entropic_mcp_weather

    class Declares:
        @hookimpl
        def entropic_mcp_add_hookspecs(self, plugin_manager):
            plugin_manager.add_hookspecs(spec_module)

    class Answers:
        @hookimpl
        def entropic_mcp_weather(self, city):
            return f"sunny in {city}"

    plugins = fresh_plugins(Declares(), Answers())
    assert plugins.infos["test-plugin-1"].status == "active"
    assert plugins.hook.entropic_mcp_weather(city="Oslo") == "sunny in Oslo"


def test_permission_pattern_hook_overrides_the_server(tmp_path):
    class ToolLevel:
        @hookimpl
        def entropic_mcp_permission_pattern(self, server, tool, args):
            return "demo.write:anything" if tool == "write" else None

    manager = make_manager(
        tmp_path,
        plugins=[ToolLevel()],
        servers=[DemoServer(root=tmp_path)],
        config={"permissions": {"default": "deny", "allow": ["demo.write:anything"]}},
    )
    assert manager.permission_pattern("demo.write", {"path": "x"}) == "demo.write:anything"
    assert call(manager, "demo.write", {"path": "x"}).kind == "ok"
    assert manager.permission_pattern("demo.echo", {"text": "x"}) == "demo.echo"


def test_storage_backends_hook_offers_a_backend_by_name(tmp_path):
    opened = []

    class Backend:
        @hookimpl
        def entropic_mcp_storage_backends(self):
            from entropic_mcp.testing import MemoryStorage

            return StorageBackendSpec(name="memory", factory=lambda config: opened.append(config) or MemoryStorage())

    manager = make_manager(tmp_path, plugins=[Backend()], config={"storage": {"backend": "memory"}})
    assert manager.storage is not None and len(opened) == 1
    missing = make_manager(tmp_path, config={"storage": {"backend": "postgres"}})
    try:
        missing.storage
    except ConfigError as exc:
        assert "pip install entropic-mcp-postgres" in str(exc) and "memory" not in str(exc)
    else:
        raise AssertionError("an unknown backend must be a config error")


def test_directive_handlers_hook_fills_the_processor(tmp_path):
    seen = []

    class Host:
        @hookimpl
        def entropic_mcp_directive_handlers(self):
            return [DirectiveHandlerSpec(type="phase_change", handler=lambda d, ctx: seen.append(d.phase))]

    manager = make_manager(tmp_path, plugins=[Host()])
    result = manager.directive_processor().process([PhaseChange(phase="review")])
    assert seen == ["review"] and result.unhandled == ()


# -- meta ---------------------------------------------------------------------------------------------

HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("entropic_mcp_"))


def test_every_hook_has_a_docstring_following_the_template():
    for name in HOOKS:
        doc = inspect.getdoc(getattr(hookspecs, name))
        assert "Called by" in doc and "Returns:" in doc and "Example::" in doc, name


def test_hook_reference_documents_every_hook_with_its_exact_signature():
    spec = importlib.util.spec_from_file_location("gen_hook_docs", REPO / "scripts" / "gen_hook_docs.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert sorted(generator.ORDER) == HOOKS, "add the new hook to scripts/gen_hook_docs.py ORDER"
    page = (REPO / "docs" / "hooks.md").read_text(encoding="utf-8")
    for name in HOOKS:
        assert generator.signature(getattr(hookspecs, name)) in page, f"{name}: run scripts/gen_hook_docs.py"
    assert page == generator.render(), "docs/hooks.md is out of date: run python scripts/gen_hook_docs.py"


def test_every_hook_is_exercised_by_a_test():
    sources = "\n".join(
        path.read_text(encoding="utf-8")
        for pattern in ("core/tests/**/*.py", "plugins/*/tests/**/*.py", "tests/**/*.py")
        for path in REPO.glob(pattern)
    )
    for name in HOOKS:
        assert f"def {name}(" in sources, f"no test implements {name}"


def test_hooks_registered_after_the_manager_was_built_take_effect(tmp_path):
    from entropic_mcp import Refuse
    from entropic_mcp.testing import call

    manager = make_manager(tmp_path, servers=[DemoServer(root=tmp_path)], config={"permissions": {"default": "allow"}})
    assert call(manager, "demo.echo", {"text": "a"}).kind == "ok"

    class Late:
        @hookimpl
        def entropic_mcp_before_tool_call(self, call):
            return Refuse(reason="late gate")

        @hookimpl
        def entropic_mcp_after_tool_call(self, call, outcome):
            return outcome.response.result.upper()

    manager.plugins.register(Late(), "late")
    refused = call(manager, "demo.echo", {"text": "b"})
    assert refused.kind == "rejected_hook" and "LATE GATE" in refused.response.result  # both hooks ran
    manager.plugins.pm.unregister(name="late")
    assert call(manager, "demo.echo", {"text": "c"}).response.result == "c"


def test_a_raising_after_hook_is_recorded_and_the_result_kept(tmp_path, caplog):
    from entropic_mcp.testing import call

    class Broken:
        @hookimpl
        def entropic_mcp_after_tool_call(self, call, outcome):
            raise RuntimeError("observer down")

    manager = make_manager(
        tmp_path, plugins=[Broken()], servers=[DemoServer(root=tmp_path)], config={"permissions": {"default": "allow"}}
    )
    outcome = call(manager, "demo.echo", {"text": "kept"})
    assert outcome.kind == "ok" and outcome.response.result == "kept"
    assert any("observer down" in fault for fault in outcome.hook_faults)
    assert outcome.summary()["hook_faults"] and manager.pipeline.history[-1]["hook_faults"]


def test_a_pattern_hook_answers_only_for_its_own_plugins_servers(tmp_path):
    from entropic_mcp.testing import call

    class Meddler:
        @hookimpl
        def entropic_mcp_permission_pattern(self, server, tool, args):
            return "other.echo"

    manager = make_manager(
        tmp_path,
        plugins=[Meddler()],
        servers=[DemoServer(root=tmp_path)],
        config={"permissions": {"default": "deny", "allow": ["other.echo"]}},
    )
    # An in-process plugin may answer for the host's servers, but only with this tool's own name.
    outcome = call(manager, "demo.write", {"path": "a"})
    assert outcome.kind == "rejected_hook" and outcome.permission == "deny"
    assert "does not name this tool" in outcome.response.result


def _broad_pattern_manager(tmp_path):
    """A plugin answering the tool-level pattern for demo.write, under a deny rule on its own parts."""

    class Broad:
        @hookimpl
        def entropic_mcp_permission_pattern(self, server, tool, args):
            return "demo.write" if tool == "write" else None

    return make_manager(
        tmp_path,
        plugins=[Broad()],
        servers=[DemoServer(root=tmp_path)],
        config={"permissions": {"default": "deny", "allow": ["demo.write"], "deny": ["demo.write:secret*"]}},
    )


def test_deny_rules_still_see_the_servers_own_parts_under_a_pattern_hook(tmp_path):
    manager = _broad_pattern_manager(tmp_path)
    assert call(manager, "demo.write", {"path": "open"}).kind == "ok"
    assert call(manager, "demo.write", {"path": "secret.txt"}).kind == "rejected_permission"


def test_a_pattern_hook_answer_is_judged_once(tmp_path, monkeypatch):
    """The server's own parts are only held against deny rules (each looked at once); the call
    gets one verdict: its answer's, or the refusal its own parts met."""
    manager = _broad_pattern_manager(tmp_path)
    rules = manager.permissions
    verdicts: list[object] = []
    looked: list[str] = []
    judge, refusal, verdict = rules.judge, rules.refusal, rules.verdict

    def judged(parts, **kw):
        verdicts.append(judge(parts, **kw))
        return verdicts[-1]

    def refused(parts, **kw):
        found = refusal(parts, **kw)
        if found is not None:
            verdicts.append(found)
        return found

    monkeypatch.setattr(rules, "judge", judged)
    monkeypatch.setattr(rules, "refusal", refused)
    monkeypatch.setattr(rules, "verdict", lambda part, **kw: looked.append(part.store) or verdict(part, **kw))
    for path, kind in [
        ("open", "ok"),
        ("secret.txt", "rejected_permission"),
        ("open2", "ok"),
        ("secret2", "rejected_permission"),
    ]:
        verdicts.clear()
        looked.clear()
        assert call(manager, "demo.write", {"path": path}).kind == kind
        assert len(verdicts) == 1, (path, verdicts)
        assert looked.count(f"demo.write:{path}") == 1, (path, looked)
