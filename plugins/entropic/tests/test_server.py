"""The server: tiers config, which tools exist and why not, the hook spec, the conformance kit."""

from __future__ import annotations

from pathlib import Path

import entropic_mcp_entropic
import pytest
from entropic_mcp import AccessLevel, ConfigError, hookimpl
from entropic_mcp.testing import check_plugin, check_server
from entropic_mcp_entropic import EngineState, EntropicServer
from entropic_support import TIERS, build

ALL = [
    "delegate",
    "pipeline",
    "resume_delegation",
    "followup",
    "todo",
    "complete",
    "phase_change",
    "prune_context",
    "diagnose",
    "inspect",
    "context_inspect",
]
READ = {"followup", "diagnose", "inspect", "context_inspect"}


def configured(**table: object) -> EntropicServer:
    server = EntropicServer()
    server.configure(table)
    return server


def test_all_eleven_tools_listed_in_spec_order_when_tiers_are_configured():
    server = configured(**TIERS)
    assert list(server.tools) == ALL
    assert server.unavailable_tools() == {}


def test_access_levels_read_only_for_the_looking_tools():
    server = configured(**TIERS)
    for name, tool in server.tools.items():
        expected = AccessLevel.READ if name in READ else AccessLevel.WRITE
        assert tool.required_access_level == expected, name
        assert tool.annotations()["readOnlyHint"] is (name in READ)


def test_delegation_tools_absent_without_tiers_and_the_server_says_why():
    server = configured()
    assert "delegate" not in server.tools and "pipeline" not in server.tools
    assert "resume_delegation" not in server.tools
    reasons = server.unavailable_tools()
    assert set(reasons) == {"delegate", "pipeline", "resume_delegation"}
    assert all("[servers.entropic] tiers" in why for why in reasons.values())
    assert "followup" in server.tools


def test_unconfigured_server_has_no_delegation_tools():
    server = EntropicServer()
    assert list(server.tools) == ALL[3:]
    assert set(server.unavailable_tools()) == {"delegate", "pipeline", "resume_delegation"}


def test_target_and_stage_enums_filled_from_tiers_and_max_turns_capped():
    server = configured(tiers=["lead", "researcher"], max_turns_limit=7)
    delegate = server.tools["delegate"].definition.input_schema["properties"]
    assert delegate["target"]["enum"] == ["lead", "researcher"]
    assert delegate["max_turns"]["maximum"] == 7
    stages = server.tools["pipeline"].definition.input_schema["properties"]["stages"]
    assert stages["items"]["enum"] == ["lead", "researcher"]
    assert server.tools["resume_delegation"].definition.input_schema["properties"]["target"]["enum"] == [
        "lead",
        "researcher",
    ]


def test_reconfiguring_replaces_the_enums():
    server = configured(tiers=["a", "b"])
    server.configure({"tiers": ["x", "y", "z"]})
    assert server.tools["delegate"].definition.input_schema["properties"]["target"]["enum"] == ["x", "y", "z"]
    assert list(server.tools) == ALL


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ({"tiers": "lead"}, "tiers: expected a list"),
        ({"tiers": ["lead", ""]}, "must not be empty"),
        ({"tiers": ["lead", "lead"]}, "listed twice: lead"),
        ({"tiers": ["lead"], "requires_context": ["coder"]}, "'coder' not in tiers"),
        ({"tiers": ["lead"], "max_turns_limit": 0}, "max_turns_limit: expected a positive integer"),
        ({"tiers": ["lead"], "max_turns_limit": True}, "max_turns_limit"),
        ({"tier": ["lead"]}, "unknown key(s) 'tier'"),
        ({"tiers": ["lead"], "profiles": {"coder": {}}}, "profiles: 'coder' not in tiers"),
        ({"tiers": ["lead"], "profiles": {"lead": {"model": "x"}}}, "profiles.lead: unknown key(s) model"),
        ({"tiers": ["lead"], "profiles": {"lead": {"max_tokens": 0}}}, "profiles.lead.max_tokens: expected a positive"),
        ({"tiers": ["lead"], "profiles": {"lead": {"tools": "fs.*"}}}, "profiles.lead.tools: expected a list"),
        ({"tiers": ["lead"], "profiles": {"lead": {"priorities": {"cost": 2}}}}, "profiles.lead.priorities"),
        ({"tiers": ["lead"], "profiles": {"lead": {"system_prompt": 3}}}, "profiles.lead.system_prompt"),
        ({"tiers": ["lead"], "delegation_deadline": -1}, "delegation_deadline: expected a positive number"),
        ({"tiers": ["lead"], "without_sampling": "show"}, 'without_sampling: expected "hide" or "directives"'),
    ],
)
def test_bad_config_is_a_config_error_naming_the_key(table, fragment):
    with pytest.raises(ConfigError) as info:
        configured(**table)
    assert "[servers.entropic]" in str(info.value)
    assert fragment in str(info.value)


def test_duplicate_check_skipped_for_directive_tools_only():
    server = configured(**TIERS)
    assert server.skip_duplicate_check("delegate") is True
    assert server.skip_duplicate_check("pipeline") is True
    assert server.skip_duplicate_check("todo") is True
    assert server.skip_duplicate_check("followup") is False
    assert server.skip_duplicate_check("diagnose") is False
    assert server.skip_duplicate_check("nope") is False


def test_plugin_registers_the_server_configured_from_its_table(tmp_path: Path):
    manager = build(tmp_path)
    assert manager.providers["entropic"] == "entropic_mcp_entropic"
    assert [t["name"] for t in manager.list_tools()] == [f"entropic.{n}" for n in ALL]


def test_plugin_declares_the_engine_state_hook(tmp_path: Path):
    class Provider:
        @hookimpl
        def entropic_mcp_engine_state(self, conversation_id, identity):
            return EngineState(state={"phase": "plan"})

    manager = build(tmp_path, plugins=(Provider(),))
    caller = manager.plugins.hook.entropic_mcp_engine_state
    assert caller.spec is not None and caller.spec.opts["firstresult"] is True
    assert caller(conversation_id="c", identity=None).state == {"phase": "plan"}


def test_hookspec_docstring_follows_the_core_template():
    from entropic_mcp_entropic import hookspecs

    doc = hookspecs.entropic_mcp_engine_state.__doc__
    for part in ("Called by", "Args:", "Returns:", "first non-None result wins", "Example::"):
        assert part in doc


def test_engine_state_rejects_malformed_messages():
    with pytest.raises(TypeError):
        EngineState(messages="not a list")
    with pytest.raises(TypeError):
        EngineState(state=["not", "a", "mapping"])


def test_conformance_kit_passes_with_tiers(tmp_path: Path):
    server = EntropicServer(root=tmp_path)
    server.configure(TIERS)
    check_server(server, examples=10)


def test_conformance_kit_passes_without_tiers(tmp_path: Path):
    check_server(EntropicServer(root=tmp_path), examples=10)


def test_check_plugin_passes():
    check_plugin(entropic_mcp_entropic)


def test_sampling_plan_carries_each_tiers_profile_with_defaults_for_the_rest():
    server = configured(
        tiers=["lead", "researcher"],
        delegation_deadline=90,
        without_sampling="directives",
        profiles={
            "researcher": {
                "system_prompt": "You research.",
                "model_hints": ["small"],
                "priorities": {"speed": 0.8},
                "tools": ["filesystem.*"],
                "max_tokens": 512,
                "max_turns": 4,
            }
        },
    )
    plan = server.sampling_plan()
    assert plan["deadline"] == 90.0 and plan["without_sampling"] == "directives"
    assert plan["tiers"]["researcher"] == {
        "system_prompt": "You research.",
        "model_hints": ["small"],
        "priorities": {"speed": 0.8},
        "tools": ["filesystem.*"],
        "max_tokens": 512,
        "max_turns": 4,
    }
    assert plan["tiers"]["lead"] == {
        "system_prompt": "",
        "model_hints": [],
        "priorities": {},
        "tools": [],
        "max_tokens": 4096,
        "max_turns": 20,
    }
    assert configured(tiers=["lead"]).sampling_plan()["without_sampling"] == "hide"
