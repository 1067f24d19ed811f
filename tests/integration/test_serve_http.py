"""`entropic-mcp serve --transport http`: a real subprocess, the official SDK client, both eras, security."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import (
    BASE_CONFIG,
    ENTROPIC_MCP,
    HTTPServe,
    connect,
    group_alive,
    serve_env,
    served_names,
    start_http,
    stop,
    wait_until,
    write_project,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

HTTP_ERAS = ("2026-07-28", "2025-11-25", "2025-06-18")
KIND = "entropic-mcp/kind"
TOKEN = "t0k3n-for-the-integration-tests"


@pytest.mark.parametrize("era", HTTP_ERAS)
async def test_list_and_call_over_http(http_serve: HTTPServe, era: str) -> None:
    async with connect(http_serve.url, era) as peer:
        names = [tool.name for tool in await peer.list_all()]
        assert names == served_names("_")
        echoed = await peer.call("probe.echo", {"text": "over http"})
        assert echoed.content[0].text == "over http" and echoed.meta[KIND] == "ok"
        failed = await peer.call("probe.fail")
        assert failed.is_error is True and failed.meta.get("entropic-mcp/directives", []) == []
        first = (await peer.call("probe.info")).structured_content["conversation"]
        second = (await peer.call("probe.info")).structured_content["conversation"]
        assert first == second
        tagged = await peer.call("probe.info", meta={"entropic-mcp/conversation": "mine"})
        assert tagged.structured_content["conversation"] == "mine"
    if era != "2026-07-28":
        assert first.startswith("http-session-")
        async with connect(http_serve.url, era) as other:
            assert (await other.call("probe.info")).structured_content["conversation"] != first
            # The first client's session ended when it disconnected: its state was released.
            ended = json.loads((await other.call("probe.ended")).content[0].text)["ended"]
            assert first in ended


@pytest.mark.parametrize("era", HTTP_ERAS)
async def test_ask_over_http_through_the_input_request_mechanism(
    http_serve: HTTPServe, project: Path, era: str
) -> None:
    from mcp_types import ElicitResult

    async def elicit(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"decision": "allow_once"})

    async with connect(http_serve.url, era, elicitation=elicit) as peer:
        allowed = await peer.call("probe.note", {"text": era})
    assert allowed.is_error is False
    assert (project / "notes.txt").read_text() == f"{era}\n"
    async with connect(http_serve.url, era) as peer:
        refused = await peer.call("probe.note", {"text": "again"})
    assert refused.is_error is True and "allow = [" in json.loads(refused.content[0].text)["message"]


@pytest.mark.parametrize("era", HTTP_ERAS)
async def test_client_vanishing_mid_call_leaves_the_server_serving(tmp_path: Path, era: str) -> None:
    # 2026-07-28: closing the response stream cancels the call. Handshake era: a dropped stream is
    # not a cancellation (spec), so the orphaned call ends at its timeout; both leave no process.
    project = write_project(tmp_path / "p", BASE_CONFIG + '[pipeline]\ntool_timeouts = {"probe.sleep" = 3}\n')
    served = start_http(project)
    try:
        await _vanish(served, project / "pgid", era)
    finally:
        stop(served.process)


async def _vanish(http_serve: HTTPServe, marker: Path, era: str) -> None:

    async def call_then_vanish() -> None:
        async with connect(http_serve.url, era) as peer:
            await peer.call("probe.sleep", {"seconds": 60, "pgid_file": str(marker)})

    async with anyio.create_task_group() as tg:
        tg.start_soon(call_then_vanish)
        while not marker.exists():
            await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    pgid = int(marker.read_text())
    assert await anyio.to_thread.run_sync(lambda: wait_until(lambda: not group_alive(pgid), 15))
    async with connect(http_serve.url, era) as peer:
        assert (await peer.call("probe.echo", {"text": "next"})).content[0].text == "next"
    assert http_serve.process.poll() is None


def _post(url: str, headers: dict[str, str]) -> Any:
    import httpx2

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    return httpx2.post(url, json=body, headers={"accept": "application/json, text/event-stream", **headers}, timeout=10)


def test_foreign_origin_is_rejected(http_serve: HTTPServe) -> None:
    assert _post(http_serve.url, {"origin": "https://evil.example"}).status_code == 403
    assert _post(http_serve.url, {"origin": "http://localhost:6274"}).status_code == 200
    assert _post(http_serve.url, {}).status_code == 200


def test_foreign_host_header_is_rejected_on_loopback(http_serve: HTTPServe) -> None:
    assert _post(http_serve.url, {"host": "attacker.example"}).status_code == 421


def test_non_loopback_without_token_refuses_to_start(project: Path) -> None:
    result = subprocess.run(
        [str(ENTROPIC_MCP), "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "0"],
        cwd=project,
        env=serve_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert "ENTROPIC_MCP_TOKEN" in result.stderr


async def test_token_is_required_when_set(project: Path) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    served = start_http(project, "--host", "0.0.0.0", env={"ENTROPIC_MCP_TOKEN": TOKEN})
    try:
        url = served.url.replace("0.0.0.0", "127.0.0.1")
        assert _post(url, {}).status_code == 401
        assert _post(url, {"authorization": "Bearer wrong-token-wrong-token"}).status_code == 401
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                echoed = await client.call_tool("probe.echo", {"text": "authorised"})
        assert echoed.content[0].text == "authorised"
    finally:
        stop(served.process)


@pytest.mark.parametrize("era", HTTP_ERAS)
async def test_cancelled_call_over_http_kills_its_process_group(http_serve: HTTPServe, project: Path, era: str) -> None:
    marker = project / f"pgid-cancel-{era}"
    async with connect(http_serve.url, era) as peer:
        await _cancel_sleep(peer, marker)
        assert (await peer.call("probe.echo", {"text": "after cancel"})).content[0].text == "after cancel"


async def _cancel_sleep(peer: Any, marker: Path) -> None:
    """Start a long probe.sleep, cancel it once running, and see its process group gone."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.call, "probe.sleep", {"seconds": 60, "pgid_file": str(marker)})
        while not marker.exists():
            await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    pgid = int(marker.read_text())
    assert await anyio.to_thread.run_sync(lambda: wait_until(lambda: not group_alive(pgid)))


def test_oversized_body_is_refused(tmp_path: Path) -> None:
    import httpx2

    project = write_project(tmp_path / "small", BASE_CONFIG + "[serve]\nmax_message_bytes = 2048\n")
    served = start_http(project)
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"padding": "x" * 5000}}
        answer = httpx2.post(
            served.url, json=body, timeout=10, headers={"accept": "application/json, text/event-stream"}
        )
        assert answer.status_code == 413
        assert _post(served.url, {}).status_code == 200
    finally:
        stop(served.process)


def _maps(pid: int) -> str:
    with open(f"/proc/{pid}/maps") as fh:
        return fh.read()


@pytest.mark.parametrize("loop", ["auto", "asyncio"])
async def test_event_loop_setting(tmp_path: Path, loop: str) -> None:
    """uvloop by default where installed; the standard loop on request, with calls and cancellation intact."""
    project = write_project(tmp_path / loop, BASE_CONFIG + f'[serve]\nevent_loop = "{loop}"\n')
    served = start_http(project)
    try:
        assert ("uvloop" in _maps(served.process.pid)) is (loop == "auto")
        async with connect(served.url, "2026-07-28") as peer:
            assert (await peer.call("probe.echo", {"text": loop})).content[0].text == loop
            await _cancel_sleep(peer, project / "pgid")
    finally:
        stop(served.process)


def test_only_the_mcp_path_is_served(http_serve: HTTPServe) -> None:
    import httpx2

    other = http_serve.url.removesuffix("/mcp") + "/elsewhere"
    answer = httpx2.post(other, json={}, timeout=10)
    assert answer.status_code == 404 and "/mcp" in answer.text
    assert _post(http_serve.url + "/", {}).status_code == 200


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _modern_call(tool: str, arguments: dict[str, Any], **meta: Any) -> tuple[dict[str, str], bytes]:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": {**MODERN_META, **meta}},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    return headers, json.dumps(body).encode()


def test_modern_calls_answer_json_and_stream_only_when_progress_is_asked(http_serve: HTTPServe) -> None:
    import httpx2

    headers, body = _modern_call("probe.echo", {"text": "plain"})
    plain = httpx2.post(http_serve.url, content=body, headers=headers, timeout=10)
    assert plain.status_code == 200 and plain.headers["content-type"].startswith("application/json")
    assert plain.json()["result"]["content"][0]["text"] == "plain"
    # A body that arrives in several pieces is read whole before the call is routed.
    headers, body = _modern_call("probe.echo", {"text": "in pieces"})
    chunked = httpx2.post(http_serve.url, content=iter([body[:20], body[20:]]), headers=headers, timeout=10)
    assert chunked.status_code == 200 and chunked.json()["result"]["content"][0]["text"] == "in pieces"
    headers, body = _modern_call("probe.sleep", {"seconds": 0.6}, progressToken="tok-1")
    streamed = httpx2.post(http_serve.url, content=body, headers=headers, timeout=10)
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")]
    assert any(e.get("method") == "notifications/progress" for e in events)
    assert events[-1]["id"] == 7 and events[-1]["result"]["isError"] is False


def test_modern_call_is_cancelled_when_the_client_closes_the_request(http_serve: HTTPServe, project: Path) -> None:
    import socket
    from urllib.parse import urlsplit

    import httpx2

    marker = project / "pgid-closed"
    headers, body = _modern_call("probe.sleep", {"seconds": 60, "pgid_file": str(marker)})
    url = urlsplit(http_serve.url)
    head = f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        assert wait_until(marker.exists)
    # The connection closed under the waiting request: the call is cancelled, its process group killed.
    pgid = int(marker.read_text())
    assert wait_until(lambda: not group_alive(pgid))
    headers, body = _modern_call("probe.echo", {"text": "still serving"})
    after = httpx2.post(http_serve.url, content=body, headers=headers, timeout=10)
    assert after.json()["result"]["content"][0]["text"] == "still serving"


def test_modern_oversized_body_is_refused(tmp_path: Path) -> None:
    import httpx2

    project = write_project(tmp_path / "small", BASE_CONFIG + "[serve]\nmax_message_bytes = 2048\n")
    served = start_http(project)
    try:
        headers, body = _modern_call("probe.echo", {"text": "x" * 5000})
        assert httpx2.post(served.url, content=body, headers=headers, timeout=10).status_code == 413
        streamed = httpx2.post(served.url, content=iter([body[:1500], body[1500:]]), headers=headers, timeout=10)
        assert streamed.status_code == 413
        headers, body = _modern_call("probe.echo", {"text": "small"})
        assert httpx2.post(served.url, content=body, headers=headers, timeout=10).status_code == 200
    finally:
        stop(served.process)
