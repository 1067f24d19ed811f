import types

import pytest
from demo_server import DemoServer
from entropic_mcp import MCPServerBase, ServerResponse, ToolBase, ToolDefinition, ToolResult, hookimpl
from entropic_mcp.testing import ConformanceError, check_plugin, check_server


class Strict(ToolBase):
    definition = ToolDefinition(
        name="strict",
        description="",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )

    def execute(self, args, ctx):
        return str(args["n"] + 1)


class RaisesOutsideTheBarrier(MCPServerBase):
    """A server that overrides execute and lets junk arguments escape."""

    name = "leaky"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.register_tool(Strict())

    async def execute(self, tool_name, raw_args, ctx=None):
        return ServerResponse(result=str(raw_args["n"]))


class NonEnvelope(MCPServerBase):
    name = "garbage"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.register_tool(Strict())

    async def execute(self, tool_name, raw_args, ctx=None):
        return {"result": "not an envelope"}


class ErrorWithDirectives(MCPServerBase):
    name = "steering"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.register_tool(Strict())

    async def execute(self, tool_name, raw_args, ctx=None):
        response = ServerResponse(result="x", is_error=True)
        object.__setattr__(response, "directives", ({"type": "stop_processing"},))
        return response


@pytest.mark.parametrize(
    ("server_class", "problem"),
    [
        (RaisesOutsideTheBarrier, "execute raised"),
        (NonEnvelope, "not a ServerResponse"),
        (ErrorWithDirectives, "an error carries directives"),
    ],
)
def test_check_server_fails_on_broken_servers(tmp_path, server_class, problem):
    with pytest.raises(ConformanceError, match=problem):
        check_server(server_class(root=tmp_path), examples=5)


def test_check_server_passes_a_good_server(tmp_path):
    server = DemoServer(root=tmp_path)
    for name in ("slow", "slow_sync", "boom"):  # tools that sleep as long as told, or always raise
        del server._tools[name]
    assert check_server(server, examples=10) == []


def test_check_server_reports_configure_accepting_anything(tmp_path):
    class Lax(MCPServerBase):
        name = "lax"

        def configure(self, config):
            pass

    problems = check_server(Lax(root=tmp_path), examples=2, raise_on_failure=False)
    assert problems == [
        "lax: the server has no tools (register_tool in __init__)",
        "lax: configure accepted an unknown key",
    ]


def test_check_plugin_builds_the_servers_of_a_module(tmp_path):
    module = types.ModuleType("leaky_plugin")

    @hookimpl
    def entropic_mcp_servers(config):
        return RaisesOutsideTheBarrier(root=config.root)

    module.entropic_mcp_servers = entropic_mcp_servers
    problems = check_plugin(module, root=tmp_path, examples=5, raise_on_failure=False)
    assert any("execute raised" in p for p in problems)


def test_check_plugin_reports_a_plugin_that_implements_nothing():
    module = types.ModuleType("empty_plugin")
    with pytest.raises(ConformanceError, match="implements no hook"):
        check_plugin(module, examples=2)


def test_a_plugin_that_serves_no_tools_but_offers_a_storage_backend_passes():
    from entropic_mcp.storage import StorageBackendSpec
    from entropic_mcp.testing import MemoryStorage

    module = types.ModuleType("memory_store_plugin")

    @hookimpl
    def entropic_mcp_storage_backends():
        return StorageBackendSpec(name="memory-test", factory=lambda config: MemoryStorage())

    module.entropic_mcp_storage_backends = entropic_mcp_storage_backends
    details = {}
    assert check_plugin(module, examples=2, details=details) == []
    assert details == {"hooks": ["entropic_mcp_storage_backends"], "servers": []}


def test_a_servers_hook_that_returns_nothing_is_reported():
    module = types.ModuleType("serverless_plugin")

    @hookimpl
    def entropic_mcp_servers(config):
        return []

    module.entropic_mcp_servers = entropic_mcp_servers
    with pytest.raises(ConformanceError, match="hook entropic_mcp_servers .*: returned no server"):
        check_plugin(module, examples=2)


def test_served_client_lists_and_calls_through_mcp(tmp_path):
    import anyio
    from entropic_mcp.testing import make_manager, served_client

    manager = make_manager(tmp_path, config={"permissions": {"default": "allow"}}, servers=[DemoServer(root=tmp_path)])

    async def main():
        async with served_client(manager) as client:
            listing = await client.list_tools()
            names = [tool.name for tool in listing.tools]
            result = await client.call_tool("demo.echo", {"text": "over mcp"})
            refused = await client.call_tool("demo.write", {"path": "a", "status": "done"})
            return names, result, refused

    names, result, refused = anyio.run(main)
    assert "demo_echo" in names and "demo_write" in names  # served names match model APIs' pattern
    assert result.is_error is False and result.content[0].text == "over mcp"
    assert result.meta["entropic-mcp/kind"] == "ok"
    assert result.meta["entropic-mcp/directives"] == [
        {"type": "context_anchor", "key": "echo:over mcp", "content_from": "result"}
    ]  # the anchor of the result itself is not sent twice
    assert refused.is_error is True and refused.meta["entropic-mcp/kind"] == "rejected_schema"


# -- the broken weather plugins (core/tests/broken_plugins): each fault reported by plugin, hook and file --

BROKEN_SITE = __import__("pathlib").Path(__file__).parent / "broken_plugins"

#: variant -> (what names the place, the file and line, what the fault is)
BROKEN = {
    "import_error": (
        "import of entry point",
        "weather_import_error/__init__.py:3",
        "No module named 'weather_api_client'",
    ),
    "raising_servers": ("hook entropic_mcp_servers", "weather_raising_servers/__init__.py:7", "raised RuntimeError"),
    "raising_pattern": (
        "hook entropic_mcp_permission_pattern",
        "weather_raising_pattern/__init__.py:",
        "raised KeyError",
    ),
    "raising_duplicate_hook": (
        "hook entropic_mcp_skip_duplicate_check",
        "weather_raising_duplicate_hook/__init__.py:",
        "raised ValueError",
    ),
    "misspelled_hook": (
        "hook entropic_mcp_server ",
        "weather_misspelled_hook/__init__.py:7",
        "did you mean entropic_mcp_servers",
    ),
    "servers_wrong_type": (
        "hook entropic_mcp_servers",
        "weather_servers_wrong_type/__init__.py:7",
        "returned str, not an MCPServerBase",
    ),
    "servers_class": ("hook entropic_mcp_servers", "weather_servers_class/__init__.py:", "did you mean an instance"),
    "pattern_wrong_type": (
        "hook entropic_mcp_permission_pattern",
        "weather_pattern_wrong_type/__init__.py:",
        "returned 42 (int)",
    ),
    "duplicate_check_wrong_type": (
        "hook entropic_mcp_skip_duplicate_check",
        "weather_duplicate_check_wrong_type/__init__.py:",
        "returned 'yes' (str)",
    ),
    "duplicate_server": (
        "hook entropic_mcp_servers",
        "weather_duplicate_server/__init__.py:7",
        "two servers named 'w_duplicate_server'",
    ),
    "first_party_name": (
        "hook entropic_mcp_servers",
        "weather_first_party_name/__init__.py:7",
        "'git' is also registered by plugin 'git'",
    ),
    "invalid_schema": (
        "server w_invalid_schema.forecast",
        "weather_invalid_schema/tools/forecast.json",
        "inputSchema.properties.city.minLength",
    ),
    "missing_tool_file": ("hook entropic_mcp_servers", "weather_missing_tool_file/tools/forecast.json", "not found"),
    "malformed_tool_file": (
        "hook entropic_mcp_servers",
        "weather_malformed_tool_file/tools/forecast.json",
        "invalid JSON",
    ),
    "raising_tool": ("server w_raising_tool.forecast", "weather_raising_tool/__init__.py:8", "raised ConnectionError"),
    "garbage_tool": ("server w_garbage_tool.forecast", "weather_garbage_tool/__init__.py:8", "returned set"),
    "blocking_tool": (
        "server w_blocking_tool.forecast",
        "weather_blocking_tool/__init__.py:",
        "did not return within 0.3 s",
    ),
    "pattern_for_others": (
        "hook entropic_mcp_permission_pattern",
        "weather_pattern_for_others/__init__.py:",
        "for server 'kit_probe_other', which is not the plugin's",
    ),
    "no_hooks": ("entropic_mcp_servers", "weather_no_hooks/__init__.py:6", "not marked @hookimpl"),
    "raising_configure": (
        "configure",
        "weather_raising_configure/__init__.py:8",
        "raised ValueError: units must be set",
    ),
}


@pytest.fixture
def broken_site(monkeypatch):
    monkeypatch.syspath_prepend(str(BROKEN_SITE))
    return BROKEN_SITE


def test_the_working_weather_plugin_passes(broken_site):
    assert check_plugin("weather", examples=10, call_timeout=5) == []


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_each_broken_plugin_is_reported_by_plugin_hook_and_file(broken_site, variant):
    place, location, fault = BROKEN[variant]
    problems = check_plugin(
        f"weather_{variant}", examples=8, call_timeout=0.3, raise_on_failure=False, taken={"git": "git"}
    )
    assert problems, f"weather_{variant} passed the check"
    matching = [p for p in problems if place in p and location in p and fault in p]
    assert matching, "\n".join(problems)
    assert all(p.startswith(f"plugin 'weather_{variant}': ") for p in problems)


def test_the_committed_variants_are_every_fault_the_issue_names():
    packages = {
        p.name.removeprefix("weather_") for p in BROKEN_SITE.iterdir() if p.is_dir() and p.name.startswith("weather_")
    }
    assert packages - {"ok", "plugins-1.0.dist-info"} == set(BROKEN)
    assert len(BROKEN) >= 18


# -- argument generation ----------------------------------------------------------------------

SCHEMAS = [
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 3}}, "required": ["n"]},
    {
        "type": "object",
        "properties": {"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}},
        "required": ["x"],
    },
    {"type": "object", "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 4}}, "required": ["s"]},
    {"type": "object", "properties": {"p": {"type": "string", "pattern": "^[a-z]+\\.py$"}}, "required": ["p"]},
    {"type": "object", "properties": {"e": {"enum": ["a", "b", 3]}, "c": {"const": "fixed"}}, "required": ["e", "c"]},
    {
        "type": "object",
        "properties": {"l": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2}},
        "required": ["l"],
    },
    {
        "type": "object",
        "properties": {"u": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 5}]}},
        "required": ["u"],
    },
    {
        "type": "object",
        "properties": {"o": {"oneOf": [{"type": "string", "maxLength": 0}, {"type": "boolean"}]}},
        "required": ["o"],
    },
    {
        "type": "object",
        "properties": {"t": {"type": ["string", "null"], "default": None}},
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"nested": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}},
        "required": ["nested"],
    },
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[next(iter(s["properties"])) for s in SCHEMAS])
def test_the_built_in_generator_only_makes_schema_valid_arguments(schema):
    import jsonschema_rs
    from entropic_mcp.testing import schema_strategy
    from entropic_mcp.testing._strategies import draw_values

    values = draw_values(schema_strategy(schema), 40)
    validator = jsonschema_rs.validator_for(schema)
    assert values and all(validator.is_valid(v) for v in values), [v for v in values if not validator.is_valid(v)]


def test_arguments_are_generated_when_hypothesis_jsonschema_fails(monkeypatch):
    from entropic_mcp.testing import _strategies, valid_arguments

    monkeypatch.setattr(_strategies, "library_strategy", lambda schema: __import__("hypothesis").strategies.integers())
    valid, problems = valid_arguments(SCHEMAS[0], 10)
    assert problems == [] and {v["n"] for v in valid} <= {1, 2, 3} and valid


def test_a_schema_no_argument_satisfies_is_a_reported_problem(tmp_path):
    class Impossible(ToolBase):
        definition = ToolDefinition(
            name="impossible",
            description="",
            input_schema={
                "type": "object",
                "properties": {"s": {"type": "string", "minLength": 5, "maxLength": 2}},
                "required": ["s"],
            },
        )

        def execute(self, args, ctx):
            return "never"

    class Server(MCPServerBase):
        name = "impossible"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Impossible())

    problems = check_server(Server(root=tmp_path), examples=5, raise_on_failure=False)
    assert any("could not generate schema-valid arguments" in p and "minLength 5 > maxLength 2" in p for p in problems)


def test_a_tool_that_stops_when_cancelled_is_still_reported_with_the_cancel_seen(tmp_path):
    seen = []

    class Patient(ToolBase):
        definition = ToolDefinition(name="patient", description="", input_schema={"type": "object"})

        def execute(self, args, ctx):
            ctx.cancelled.wait()
            seen.append(ctx.cancelled.is_set())
            return "stopped"

    class Server(MCPServerBase):
        name = "patient"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Patient())

    problems = check_server(Server(root=tmp_path), examples=3, call_timeout=0.2, raise_on_failure=False)
    assert seen == [True]
    assert any("did not return within 0.2 s" in p and "ctx.cancelled was set and it stopped" in p for p in problems)


def test_an_async_tool_is_cancelled_at_the_limit(tmp_path):
    import asyncio

    cancelled = []

    class Sleeper(ToolBase):
        definition = ToolDefinition(name="sleeper", description="", input_schema={"type": "object"})

        async def execute(self, args, ctx):
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(ctx.cancelled.is_set())
                raise
            return "woke"

    class Server(MCPServerBase):
        name = "sleeper"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Sleeper())

    problems = check_server(Server(root=tmp_path), examples=3, call_timeout=0.2, raise_on_failure=False)
    assert cancelled == [True]
    assert any("sleeper.sleeper" in p and "did not return within" in p for p in problems)


def test_the_kit_says_how_to_install_hypothesis_when_it_is_missing(monkeypatch):
    import sys

    from entropic_mcp.testing import valid_arguments

    monkeypatch.setitem(sys.modules, "hypothesis", None)
    with pytest.raises(ImportError, match=r"pip install entropic-mcp\[testing\]"):
        valid_arguments(SCHEMAS[0], 3)


def _services_plugin(seen):
    """A plugin whose tool and before-call hook use ctx.services and fail loudly when a service lies."""
    import pluggy

    marker = pluggy.HookspecMarker("entropic_mcp")
    module = types.ModuleType("services_plugin")

    @marker
    def entropic_mcp_services_probe(tool):
        """Answer for a tool (a hook this plugin declares)."""

    specs = types.ModuleType("services_plugin_specs")
    specs.entropic_mcp_services_probe = entropic_mcp_services_probe

    class Look(ToolBase):
        definition = ToolDefinition(
            name="look", description="", input_schema={"type": "object", "properties": {"n": {"type": "integer"}}}
        )

        def __init__(self, server):
            super().__init__()
            self.server = server

        def execute(self, args, ctx):
            services = ctx.services
            if services.settings("svc") != self.server.table:
                raise RuntimeError(f"settings {dict(services.settings('svc'))} != configured {self.server.table}")
            if services.root != self.server.root:
                raise RuntimeError(f"root {services.root} != {self.server.root}")
            if services.storage is None:
                raise RuntimeError("no storage although [storage] configures one")
            if services.call_hook("entropic_mcp_services_probe", tool="look") != ["answered"]:
                raise RuntimeError("the plugin's own hook is not reachable")
            if services.result_limit != 4321:
                raise RuntimeError(f"result_limit {services.result_limit}")
            if services.path_refused("read", "secret.txt") is None:
                raise RuntimeError("the deny rule on secret* is not seen")
            services.history(), services.metrics()
            seen.append(ctx.conversation_id)
            return "ok"

    class Svc(MCPServerBase):
        name = "svc"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.table = {}
            self.register_tool(Look(self))

        def configure(self, config):
            unknown = set(config) - {"colour"}
            if unknown:
                from entropic_mcp import ConfigError

                raise ConfigError(f"unknown keys {sorted(unknown)}")
            self.table = dict(config)

    @hookimpl
    def entropic_mcp_add_hookspecs(plugin_manager):
        plugin_manager.add_hookspecs(specs)

    @hookimpl
    def entropic_mcp_services_probe(tool):
        return "answered"

    @hookimpl
    def entropic_mcp_servers(config):
        return Svc(root=config.root)

    @hookimpl
    def entropic_mcp_before_tool_call(call):
        if call.server == "svc" and call.context.services.settings("svc") != {"colour": "blue"}:
            raise RuntimeError("the hook's call context has no host behind it")
        return None

    module.entropic_mcp_add_hookspecs = entropic_mcp_add_hookspecs
    module.entropic_mcp_services_probe = entropic_mcp_services_probe
    module.entropic_mcp_servers = entropic_mcp_servers
    module.entropic_mcp_before_tool_call = entropic_mcp_before_tool_call
    return module


SERVICES_CONFIG = {
    "storage": {"backend": "tinydb"},
    "servers": {"svc": {"colour": "blue"}},
    "pipeline": {"max_result_bytes": 4321},
    "permissions": {"deny": ["filesystem.read:secret*"]},
}


def test_check_plugin_gives_tools_and_hooks_the_services_of_its_config(tmp_path):
    seen = []
    problems = check_plugin(_services_plugin(seen), root=tmp_path, config=SERVICES_CONFIG, examples=3)
    assert problems == [] and seen  # the tool really ran, with every service answering


def test_check_server_gives_tools_the_services_of_the_config_it_is_given(tmp_path):
    from entropic_mcp import Plugins

    seen = []
    module = _services_plugin(seen)
    plugins = Plugins(strict=True)
    plugins.register(module, "services_plugin")
    (server,) = [module.entropic_mcp_servers(config=types.SimpleNamespace(root=tmp_path))]
    server.configure({"colour": "blue"})
    problems = check_server(server, examples=3, config=SERVICES_CONFIG, plugins=plugins, raise_on_failure=False)
    assert problems == [] and seen
    # Without the config the tool sees a host with none of it, and the kit says where it failed.
    bare = check_server(server, examples=2, raise_on_failure=False)
    assert any("settings {} != configured" in p or "no storage" in p for p in bare), bare


def _declaring(answer, output_schema=None):
    """A server with one tool declaring an outputSchema and answering ``answer(args)``."""
    schema = output_schema or {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "label": {"type": "string"}},
        "required": ["n"],
    }

    class Declared(ToolBase):
        definition = ToolDefinition(
            name="count",
            description="",
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            output_schema=schema,
        )

        def execute(self, args, ctx):
            return answer(args)

    class Server(MCPServerBase):
        name = "declared"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Declared())

    return Server


def test_a_tool_answering_instances_of_its_output_schema_passes(tmp_path):
    from entropic_mcp import ToolError

    def answer(args):
        if args["n"] < 0:
            raise ToolError("negative", "n must not be negative")  # failures need not match the schema
        if args["n"] == 0:
            return ToolResult.error("zero", "n must not be zero")
        if args["n"] % 2:
            return '{"n": 1, "label": "odd"}'  # JSON object text counts too
        return ToolResult.json({"n": args["n"]})

    assert check_server(_declaring(answer)(root=tmp_path), examples=20) == []


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (lambda args: "just text", "declares an outputSchema but returned no JSON object"),
        (lambda args: "[1, 2]", "declares an outputSchema but returned no JSON object"),
        (lambda args: ToolResult.json({"label": "no n"}), 'not an instance of its outputSchema .*"n" is a required'),
        (lambda args: ToolResult.json({"n": "one"}), "not an instance of its outputSchema .*n: "),
        (lambda args: '{"n": 1.5}', "not an instance of its outputSchema"),
    ],
)
def test_a_result_that_is_no_instance_of_the_output_schema_is_reported(tmp_path, answer, problem):
    with pytest.raises(ConformanceError, match=problem):
        check_server(_declaring(answer)(root=tmp_path), examples=5)


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "array", "items": {}}, "outputSchema must be an object schema"),
        ({"properties": {}}, "outputSchema must be an object schema"),
        ({"type": "object", "properties": {"n": {"type": "nonsense"}}}, "outputSchema is not a valid JSON Schema"),
    ],
)
def test_an_unusable_output_schema_is_reported(tmp_path, schema, problem):
    server = _declaring(lambda args: {"n": 1}, output_schema=schema)(root=tmp_path)
    problems = check_server(server, examples=2, raise_on_failure=False)
    assert any(problem in p for p in problems), problems
