"""Traces from a real `entropic-mcp serve` over stdio: the client's traceparent continues into
the call's spans (docs/tracing.md). serve writes its spans to ENTROPIC_MCP_TRACES_FILE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import connect, stdio_params, write_project

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

pytest.importorskip("opentelemetry.sdk")  # the testing extra installs it

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"

CONFIG = """\
[entropic_mcp]
plugins = ["probe", "bash"]
[storage]
backend = "none"
[permissions]
default = "deny"
allow = ["probe.echo", "bash.execute:*"]
"""

STAGES = {"validation", "permission", "loop guards", "tool run", "outcome"}


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in spans if s["parent_id"] == parent["context"]["span_id"]}


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_serve_continues_the_clients_traceparent(tmp_path: Path, era: str) -> None:
    project = write_project(tmp_path / "project", CONFIG)
    spans_file = tmp_path / "spans.jsonl"
    env = {"ENTROPIC_MCP_TRACES_FILE": str(spans_file), "OTEL_SERVICE_NAME": "traced-serve"}
    async with connect(stdio_params(project, env), era) as peer:
        echoed = await peer.call(
            "probe.echo", {"text": "hi"}, meta={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "t=1"}
        )
        assert echoed.is_error is False
        ran = await peer.call("bash.execute", {"command": "true"}, meta={"traceparent": f"00-{TRACE_ID}-{'1' * 16}-01"})
        assert ran.is_error is False, ran
    spans = read_spans(spans_file)
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"traced-serve"}

    # The MCP SDK's server span continues the client's context; the call span nests under it.
    server = next(s for s in spans if s["name"] == "tools/call probe.echo")
    assert server["kind"] == "SpanKind.SERVER" and server["parent_id"] == f"0x{PARENT_ID}"
    assert server["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert server["attributes"]["mcp.method.name"] == "tools/call"
    call = children(spans, server)["execute_tool probe.echo"]
    assert call["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert "key=t, value=1" in call["context"]["trace_state"]
    assert call["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert call["attributes"]["entropic_mcp.server"] == "probe"
    assert call["attributes"]["entropic_mcp.result_kind"] == "ok"
    assert call["attributes"]["entropic_mcp.conversation"].startswith("stdio-")
    assert set(children(spans, call)) >= STAGES

    # bash's command is a span of its own, under the tool run, in the second call's trace.
    bash_server = next(s for s in spans if s["name"] == "tools/call bash.execute")
    assert bash_server["parent_id"] == f"0x{'1' * 16}"
    bash_call = children(spans, bash_server)["execute_tool bash.execute"]
    tool_run = children(spans, bash_call)["tool run"]
    programs = [s for s in spans if s["parent_id"] == tool_run["context"]["span_id"] and s["name"].startswith("run ")]
    assert len(programs) == 1, [s["name"] for s in spans]
    assert programs[0]["attributes"]["process.exit.code"] == 0
    assert programs[0]["context"]["trace_id"] == f"0x{TRACE_ID}"
