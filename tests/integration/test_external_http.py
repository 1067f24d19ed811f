"""An external server over Streamable HTTP: a real ``entropic-mcp serve --transport http`` behind a
bearer token, reached from another ServerManager through the pool with ``url`` and ``headers``."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import BASE_CONFIG, start_http, stop, write_project

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "external-http-test-token-0123456789"


def remote_manager(tmp_path: Path, url: str, token: str):
    from entropic_mcp import ServerManager
    from entropic_mcp._config import config_from_dict

    data = {
        "entropic_mcp": {"plugins": []},
        "storage": {"backend": "none"},
        "permissions": {"default": "allow"},
        "external": {
            "remote": {
                "url": url,
                "headers": {"Authorization": f"Bearer {token}"},
                "connect_timeout_seconds": 15,
                "backoff_initial_seconds": 30,
            }
        },
    }
    return ServerManager.from_config(config_from_dict(data, root=tmp_path), load_entry_points=False)


@pytest.fixture
def remote(tmp_path):
    project = write_project(tmp_path / "remote", BASE_CONFIG + '[serve]\ntool_names = "underscored"\n')
    served = start_http(project, env={"ENTROPIC_MCP_TOKEN": TOKEN})
    try:
        yield served
    finally:
        stop(served.process)


async def test_a_streamable_http_server_is_listed_and_called_with_its_headers(tmp_path, remote):
    manager = remote_manager(tmp_path, remote.url, TOKEN)
    try:
        names = [tool["name"] for tool in manager.list_tools()]
        assert "remote.probe__echo" in names
        outcome = await manager.call("remote.probe__echo", {"text": "over http"})
        assert outcome.response.to_dict() == {"result": "over http", "directives": [], "is_error": False}
    finally:
        manager.close()


async def test_a_wrong_token_is_a_discovery_failure_not_a_tool(tmp_path, remote, caplog):
    manager = remote_manager(tmp_path, remote.url, "wrong-token-wrong-token-000")
    try:
        assert manager.list_tools() == []
        pool = manager.servers["remote"].pool
        assert pool.state == "disconnected"
        assert "tools.discovery_failed" in caplog.text
        down = await manager.execute("remote.probe__echo", {"text": "x"})
        assert down.is_error  # never listed: an unknown tool, not a call that reached the server
    finally:
        manager.close()
