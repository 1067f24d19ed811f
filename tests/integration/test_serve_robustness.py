"""Bad input on the stdio wire: every line is answered or dropped, and the next request is served."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import BASE_CONFIG, ENTROPIC_MCP, serve_env, write_project

pytestmark = pytest.mark.integration

INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


class RawClient:
    """Lines in, lines out, against a real `entropic-mcp serve` subprocess."""

    def __init__(self, project: Path) -> None:
        self.process = subprocess.Popen(
            [str(ENTROPIC_MCP), "serve"],
            cwd=project,
            env=serve_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def send(self, line: bytes | str | dict[str, Any]) -> None:
        data = json.dumps(line).encode() if isinstance(line, dict) else line.encode() if isinstance(line, str) else line
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "serve closed stdout; stderr: " + self.process.stderr.read().decode()  # type: ignore[union-attr]
        return json.loads(line)

    def close(self) -> tuple[int, str]:
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        code = self.process.wait(15)
        return code, self.process.stderr.read().decode()  # type: ignore[union-attr]


@pytest.fixture
def raw(tmp_path: Path) -> Any:
    client = RawClient(write_project(tmp_path, BASE_CONFIG + "[serve]\nmax_message_bytes = 4096\n"))
    client.send(INIT)
    assert client.receive()["result"]["protocolVersion"] == "2025-06-18"
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield client
    if client.process.poll() is None:
        client.process.kill()
        client.process.wait()
    for pipe in (client.process.stdin, client.process.stdout, client.process.stderr):
        if pipe is not None and not pipe.closed:
            pipe.close()


def test_malformed_lines_are_answered_and_the_next_request_is_served(raw: RawClient) -> None:
    raw.send("this is not json")
    assert raw.receive() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: not JSON"},
    }
    raw.send('{"jsonrpc": "2.0", "id": 7, "method": 12}')
    assert raw.receive()["error"]["code"] == -32600 and True
    raw.send("[1, 2, 3]")
    assert raw.receive()["error"]["code"] == -32600
    raw.send(b"\xff\xfe garbage \x00")
    assert raw.receive()["error"]["code"] in (-32700, -32600)
    raw.send({"jsonrpc": "2.0", "id": 8, "method": "no/such/method"})
    assert raw.receive() == {
        "jsonrpc": "2.0",
        "id": 8,
        "error": {"code": -32601, "message": "Method not found", "data": "no/such/method"},
    }
    raw.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": 5, "arguments": "text"}})
    assert raw.receive()["error"]["code"] == -32602
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "tools/call",
            "params": {"name": "probe.echo", "arguments": {"text": "ok"}},
        }
    )
    answer = raw.receive()
    assert answer["id"] == 10 and answer["result"]["content"][0]["text"] == "ok"
    code, stderr = raw.close()
    assert code == 0


def test_oversized_message_is_refused_with_its_id_and_serve_stays_up(raw: RawClient) -> None:
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 11,
            "method": "tools/call",
            "params": {"name": "probe.echo", "arguments": {"text": "x" * 10_000}},
        }
    )
    refused = raw.receive()
    assert refused["id"] == 11 and refused["error"]["code"] == -32600
    assert "max_message_bytes (4096)" in refused["error"]["message"]
    raw.send({"jsonrpc": "2.0", "id": 12, "method": "tools/list"})
    assert raw.receive()["id"] == 12


def test_nothing_but_mcp_reaches_stdout(raw: RawClient) -> None:
    raw.send({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": {"name": "probe.fail", "arguments": {}}})
    answer = raw.receive()
    assert answer["id"] == 13 and answer["result"]["isError"] is True
    code, _ = raw.close()
    assert code == 0
    assert raw.process.stdout is not None and raw.process.stdout.read() == b""
