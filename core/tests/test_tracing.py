"""OpenTelemetry traces of tool calls (docs/tracing.md): spans, trace context, and no cost when off."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from entropic_mcp import CallContext, _tracing
from entropic_mcp.testing import make_manager
from tracing_server import Traced

pytest.importorskip("opentelemetry.sdk")  # the testing extra installs it; without it there is nothing to see

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A global SDK tracer provider recording into memory, for this test only."""
    yield from recording(TracerProvider())


@pytest.fixture
def unsampled_spans() -> Iterator[InMemorySpanExporter]:
    """The same with a sampler that keeps a call only when its caller's trace is sampled."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    yield from recording(TracerProvider(sampler=ParentBased(ALWAYS_OFF)))


def recording(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    from opentelemetry.util._once import Once

    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved
        _tracing.refresh()


def manager_at(root: Path, **config: Any) -> Any:
    return make_manager(
        root,
        servers=[Traced(root=str(root))],
        config={"permissions": {"default": "deny", "allow": ["traced.echo", "traced.shell"]}, **config},
    )


def call(manager: Any, name: str, args: Any = None, **context: Any) -> Any:
    return anyio.run(manager.call, name, {} if args is None else args, CallContext(**context))


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    found: dict[str, ReadableSpan] = {}
    for span in exporter.get_finished_spans():
        assert span.name not in found, f"two spans named {span.name!r}"
        found[span.name] = span
    return found


def test_a_call_is_one_execute_tool_span_with_a_child_per_stage(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    manager = manager_at(tmp_path, identities={"agent": {"keys": {"traced.*": "READ"}}})
    outcome = call(manager, "traced.echo", {"text": "hi"}, conversation_id="c1", identity="agent")
    assert outcome.kind == "ok"
    found = by_name(spans)
    top = found["execute_tool traced.echo"]
    assert top.parent is None and top.kind == trace.SpanKind.INTERNAL
    assert top.attributes is not None
    assert dict(top.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "traced.echo",
        "entropic_mcp.server": "traced",
        "entropic_mcp.tool": "echo",
        "entropic_mcp.conversation": "c1",
        "entropic_mcp.identity": "agent",
        "entropic_mcp.result_kind": "ok",
        "entropic_mcp.is_error": False,
        "entropic_mcp.permission": "allow",
        "entropic_mcp.pattern": "traced.echo",
    }
    assert top.status.status_code == trace.StatusCode.UNSET
    stages = ["validation", "access keys", "permission", "loop guards", "tool run", "outcome"]
    assert sorted(found) == sorted([top.name, *stages])
    for name in stages:
        span = found[name]
        assert span.parent is not None and span.parent.span_id == top.context.span_id, name
        assert span.context.trace_id == top.context.trace_id
    # stages run in the pipeline's order, each within the call
    starts = [found[name].start_time for name in stages]
    assert starts == sorted(starts)
    assert top.start_time is not None and top.end_time is not None
    assert all(top.start_time <= found[n].start_time and found[n].end_time <= top.end_time for n in stages)  # type: ignore[operator]


def test_traceparent_in_meta_continues_into_the_call(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    manager = manager_at(tmp_path)
    call(manager, "traced.echo", {"text": "hi"}, meta={"traceparent": TRACEPARENT, "tracestate": "vendor=1"})
    for span in spans.get_finished_spans():
        assert format(span.context.trace_id, "032x") == TRACE_ID, span.name
    top = by_name(spans)["execute_tool traced.echo"]
    assert top.parent is not None and format(top.parent.span_id, "016x") == PARENT_ID and top.parent.is_remote
    assert top.context.trace_state.get("vendor") == "1"


def test_the_current_span_wins_over_meta(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    """serve: the MCP SDK's tools/call span is current (it continued _meta already): nest under it."""
    manager = manager_at(tmp_path)
    with trace.get_tracer("test").start_as_current_span("tools/call traced.echo") as server_span:
        call(manager, "traced.echo", {"text": "hi"}, meta={"traceparent": TRACEPARENT})
    top = by_name(spans)["execute_tool traced.echo"]
    assert top.parent is not None and top.parent.span_id == server_span.get_span_context().span_id


def test_a_malformed_traceparent_starts_a_new_trace(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    manager = manager_at(tmp_path)
    outcome = call(manager, "traced.echo", {"text": "hi"}, meta={"traceparent": "00-nonsense-01"})
    assert outcome.kind == "ok"
    top = by_name(spans)["execute_tool traced.echo"]
    assert top.parent is None and format(top.context.trace_id, "032x") != TRACE_ID


def test_a_program_a_tool_runs_is_a_span_under_tool_run(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    manager = manager_at(tmp_path, sandbox={"mode": "off"})
    outcome = call(manager, "traced.shell")
    assert outcome.response.result == "exit 0", outcome
    found = by_name(spans)
    process = found["run true"]
    assert process.parent is not None and process.parent.span_id == found["tool run"].context.span_id
    assert process.attributes is not None
    assert process.attributes["process.executable.name"] == "true"
    assert process.attributes["process.exit.code"] == 0
    assert isinstance(process.attributes["process.pid"], int)


def test_a_refusal_marks_its_stage_and_the_call(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    manager = manager_at(tmp_path)
    outcome = call(manager, "traced.note")
    assert outcome.kind == "rejected_permission"
    found = by_name(spans)
    assert "tool run" not in found and "loop guards" not in found
    permission = found["permission"]
    assert permission.attributes is not None and permission.attributes["entropic_mcp.refusal"] == "permission_denied"
    assert permission.status.status_code == trace.StatusCode.ERROR
    top = found["execute_tool traced.note"]
    assert top.attributes is not None
    assert top.attributes["entropic_mcp.result_kind"] == "rejected_permission"
    assert top.attributes["error.type"] == "rejected_permission"
    assert top.attributes["entropic_mcp.is_error"] is True
    assert top.status.status_code == trace.StatusCode.ERROR


def test_invalid_arguments_end_in_the_validation_span(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    manager = manager_at(tmp_path)
    outcome = call(manager, "traced.echo", {"wrong": 1})
    assert outcome.kind == "rejected_schema"
    validation = by_name(spans)["validation"]
    assert validation.attributes is not None and validation.attributes["entropic_mcp.refusal"] == "invalid_args"


def test_a_call_the_sampler_leaves_out_makes_no_spans(tmp_path: Path, unsampled_spans: InMemorySpanExporter) -> None:
    manager = manager_at(tmp_path, sandbox={"mode": "off"})
    assert call(manager, "traced.shell").response.result == "exit 0"
    assert call(manager, "traced.echo", {"wrong": 1}).kind == "rejected_schema"
    assert unsampled_spans.get_finished_spans() == ()
    # a caller whose trace is sampled (flags 01) gets the whole tree: the sampler follows it
    assert call(manager, "traced.shell", meta={"traceparent": TRACEPARENT}).kind == "ok"
    names = {span.name for span in unsampled_spans.get_finished_spans()}
    assert names == {
        "execute_tool traced.shell",
        "validation",
        "permission",
        "loop guards",
        "tool run",
        "run true",
        "outcome",
    }


def test_no_tracer_provider_means_the_plain_pipeline(tmp_path: Path) -> None:
    """The API alone (the MCP SDK brings it) is not a provider: no traced pipeline, no spans."""
    from entropic_mcp._pipeline._spine import CallPipeline

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    manager = manager_at(tmp_path)
    assert type(manager.pipeline) is CallPipeline and _tracing.tracer is None
    assert call(manager, "traced.echo", {"text": "hi"}).kind == "ok"


BLOCKED = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None
sys.meta_path.insert(0, Block())
"""

ABSENT = """
import json, logging, sys, tempfile, anyio
logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(message)s")
from entropic_mcp import CallContext, _tracing
from entropic_mcp._pipeline._spine import CallPipeline
from entropic_mcp.testing import make_manager
sys.path.insert(0, sys.argv[1])
from tracing_server import Traced
root = tempfile.mkdtemp()
manager = make_manager(root, servers=[Traced(root=root)], config={"permissions": {"allow": ["traced.*"]},
                       "sandbox": {"mode": "off"}})
kinds = [anyio.run(manager.call, name, args, CallContext()).kind
         for name, args in [("traced.echo", {"text": "hi"}), ("traced.shell", {})]]
made = _tracing.configure_from_env({"OTEL_TRACES_EXPORTER": "console"})
print(json.dumps({"kinds": [str(k) for k in kinds], "plain": type(manager.pipeline) is CallPipeline,
                  "made": made is not None,
                  "otel": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")}))
"""


def test_without_opentelemetry_nothing_imports_it_and_calls_work(tmp_path: Path) -> None:
    """The extra absent (opentelemetry blocked from importing): calls and programs run, untraced."""
    script = tmp_path / "absent.py"
    script.write_text(BLOCKED + ABSENT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert result == {"kinds": ["ok", "ok"], "plain": True, "made": False, "otel": []}
    # asking for traces without the SDK is one clear line, and serve goes on untraced
    assert lines[:-1] == [
        "WARNING OTEL_TRACES_EXPORTER=console asks for traces but the OpenTelemetry SDK is not installed: "
        "pip install 'entropic-mcp[otel]' (serving without traces)"
    ]


def test_importing_entropic_mcp_does_not_import_opentelemetry() -> None:
    code = "import sys, entropic_mcp, entropic_mcp.toolkit, entropic_mcp.testing; " + (
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_serve_provider_from_the_environment_writes_json_lines(tmp_path: Path) -> None:
    """configure_from_env in a fresh process: the spans file gets every span as it ends."""
    path = tmp_path / "spans.jsonl"
    code = textwrap.dedent(
        f"""
        import sys, tempfile, anyio
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from entropic_mcp import CallContext, _tracing
        from entropic_mcp.testing import make_manager
        from tracing_server import Traced
        provider = _tracing.configure_from_env({{"ENTROPIC_MCP_TRACES_FILE": {str(path)!r},
                                                "OTEL_TRACES_EXPORTER": "none"}})
        assert provider is not None
        root = tempfile.mkdtemp()
        manager = make_manager(root, servers=[Traced(root=root)], config={{"permissions": {{"allow": ["traced.*"]}}}})
        anyio.run(manager.call, "traced.echo", {{"text": "hi"}}, CallContext())
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=tmp_path)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    names = {record["name"] for record in records}
    assert {"execute_tool traced.echo", "validation", "permission", "tool run", "outcome"} <= names
    top = next(r for r in records if r["name"] == "execute_tool traced.echo")
    assert top["resource"]["attributes"]["service.name"] == "entropic-mcp"
    assert top["attributes"]["entropic_mcp.result_kind"] == "ok"


def test_an_unknown_exporter_name_is_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from entropic_mcp._traced import provider_from

    provider, problems = provider_from(["nonesuch"], "")
    assert provider is None
    assert len(problems) == 1 and problems[0].startswith("OTEL_TRACES_EXPORTER names 'nonesuch', which no installed")
    assert "console" in problems[0]
