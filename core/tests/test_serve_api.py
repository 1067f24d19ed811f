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
    assert names == ["weather.forecast"]
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
