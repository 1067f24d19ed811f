"""entropic_mcp.serve: serving a manager from a program of your own, through the official MCP client."""

import json
import sys
from pathlib import Path

import anyio
import entropic_mcp.serve as public
from entropic_mcp.testing import make_manager

BROKEN_SITE = Path(__file__).parent / "broken_plugins"

EMBEDDER = """
from entropic_mcp import ServerManager, load_config
from entropic_mcp.serve import run_stdio

manager = ServerManager.from_config(load_config())
try:
    run_stdio(manager)
finally:
    manager.close()
open("closed", "w").write("the manager was closed after serving")
"""


def test_the_public_module_is_the_embedding_surface():
    assert set(public.__all__) >= {"build_app", "run_stdio", "run_http", "run_stdio_async", "run_http_async", "serve"}


def test_build_app_serves_a_manager_to_an_mcp_client_in_memory(tmp_path, monkeypatch):
    from mcp import Client

    monkeypatch.syspath_prepend(str(BROKEN_SITE))
    import weather_ok

    manager = make_manager(tmp_path, plugins=[weather_ok], config={"permissions": {"default": "allow"}})
    app = public.build_app(manager)

    async def main():
        async with Client(app.server) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            result = await client.call_tool("weather.forecast", {"city": "Oslo"})
            return names, result

    try:
        names, result = anyio.run(main)
    finally:
        manager.close()
    assert names == ["weather_forecast"]
    assert result.is_error is False and json.loads(result.content[0].text)["city"] == "Oslo"


def test_run_stdio_embedded_in_a_program_serves_until_the_client_leaves(tmp_path):
    import os

    from mcp import Client, StdioServerParameters

    (tmp_path / "entropic-mcp.toml").write_text(
        '[entropic_mcp]\nplugins = ["weather"]\n[storage]\nbackend = "none"\n[permissions]\ndefault = "allow"\n'
    )
    script = tmp_path / "embedder.py"
    script.write_text(EMBEDDER)
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(script)],
        cwd=str(tmp_path),
        env={**os.environ, "PYTHONPATH": str(BROKEN_SITE)},
    )

    async def main():
        async with Client(params, read_timeout_seconds=60) as client:
            return await client.call_tool("weather.forecast", {"city": "Bergen", "days": 2})

    result = anyio.run(main)
    assert json.loads(result.content[0].text) == {"city": "Bergen", "days": 2, "sky": "rain"}
    assert (tmp_path / "closed").exists()  # run_stdio returned when the client left


def _two_tools_server(root):
    from entropic_mcp import AccessLevel, MCPServerBase, ToolBase, ToolDefinition, ToolResult

    def tool(name, output_schema):
        class Counted(ToolBase):
            definition = ToolDefinition(
                name=name,
                description="",
                input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
                output_schema=output_schema,
            )
            required_access_level = AccessLevel.READ

            def execute(self, args, ctx):
                if args.get("n", 0) < 0:
                    return ToolResult.error("negative", "n must not be negative")
                return ToolResult.json({"n": args.get("n", 0), "name": name})

        return Counted()

    class Counts(MCPServerBase):
        name = "counts"

        def __init__(self, **kw):
            super().__init__(**kw)
            schema = {"type": "object", "properties": {"n": {"type": "integer"}, "name": {"type": "string"}}}
            self.register_tool(tool("declared", schema))
            self.register_tool(tool("plain", None))

    return Counts(root=root)


def _calls_through_serve(tmp_path, serve_config):
    from entropic_mcp.testing import served_client

    manager = make_manager(
        tmp_path,
        servers=[_two_tools_server(tmp_path)],
        config={"permissions": {"default": "allow"}, "serve": serve_config},
    )

    async def main():
        async with served_client(manager) as client:
            return {
                (name, n): await client.call_tool(f"counts.{name}", {"n": n})
                for name in ("declared", "plain")
                for n in (1, -1)
            }

    try:
        return anyio.run(main)
    finally:
        manager.close()


def test_structured_content_only_for_tools_declaring_an_output_schema(tmp_path):
    results = _calls_through_serve(tmp_path, {})
    declared = results[("declared", 1)]
    assert declared.structured_content == {"n": 1, "name": "declared"} == json.loads(declared.content[0].text)
    plain = results[("plain", 1)]
    assert plain.structured_content is None and json.loads(plain.content[0].text) == {"n": 1, "name": "plain"}
    for name in ("declared", "plain"):  # failures are text only: no instance of any schema
        failed = results[(name, -1)]
        assert failed.is_error is True and failed.structured_content is None


def test_structured_content_json_sends_every_object_result_structured(tmp_path):
    results = _calls_through_serve(tmp_path, {"structured_content": "json"})
    for name in ("declared", "plain"):
        assert results[(name, 1)].structured_content == {"n": 1, "name": name}
        assert results[(name, -1)].structured_content["error"] == "negative"
