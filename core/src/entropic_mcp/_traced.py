"""The spans of a traced call (docs/tracing.md); imported only when a tracer provider is set.

One span per tool call, ``execute_tool {tool}`` (the OpenTelemetry GenAI convention for running
a tool), with a child span per pipeline stage and, under ``tool run``, one per program a tool
starts through ``toolkit.run_process``. Under ``serve`` the call span is a child of the MCP SDK's
``tools/call {tool}`` server span, which continues the ``traceparent`` the client sent in
``_meta``; a call made in-process continues the current span, else ``ctx.meta["traceparent"]``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode

from ._kinds import ResultKind
from ._pipeline._spine import CallPipeline, _Call, _Refused

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

    from ._config import PipelineConfig
    from ._context import CallContext
    from ._envelope import ServerResponse
    from ._pipeline._outcome import CallOutcome
    from ._pipeline._rules import Verdict
    from .toolkit._output import ProcessResult

_T = TypeVar("_T")

#: Attributes of the call span beyond the GenAI ones.
SERVER = "entropic_mcp.server"
TOOL = "entropic_mcp.tool"
CONVERSATION = "entropic_mcp.conversation"
IDENTITY = "entropic_mcp.identity"
RESULT_KIND = "entropic_mcp.result_kind"
IS_ERROR = "entropic_mcp.is_error"
PERMISSION = "entropic_mcp.permission"
PATTERN = "entropic_mcp.pattern"
#: On a stage span that refused the call: the refusal's code (``permission_denied``, ...).
REFUSAL = "entropic_mcp.refusal"

_TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def _parent(ctx: CallContext) -> Any:
    """The context to start the call span in: the current span's, else the caller's ``_meta``."""
    meta = ctx.meta
    if meta and "traceparent" in meta and not trace.get_current_span().get_span_context().is_valid:
        carrier = {key: meta[key] for key in _TRACE_KEYS if isinstance(meta.get(key), str)}
        extracted = propagate.extract(carrier)
        if trace.get_current_span(extracted).get_span_context().is_valid:
            return extracted
    return None


def _fail(span: Any, exc: BaseException) -> None:
    if isinstance(exc, _Refused):
        span.set_attribute(REFUSAL, exc.code)
        span.set_status(Status(StatusCode.ERROR, exc.code))
    elif isinstance(exc, Exception):
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
    else:  # cancelled: not the tool's failure
        span.set_attribute(REFUSAL, "cancelled")


class TracedPipeline(CallPipeline):
    """The pipeline with spans: each stage of ``CallPipeline`` wrapped, nothing else changed."""

    def __init__(self, config: PipelineConfig, *, tracer: Any, **collaborators: Any) -> None:
        super().__init__(config, **collaborators)
        self.tracer = tracer

    async def run(self, name: str, raw_args: object, ctx: CallContext) -> CallOutcome:
        server, _, tool = name.partition(".")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            SERVER: server,
            TOOL: tool,
            CONVERSATION: ctx.conversation_id,
        }
        if ctx.identity is not None:
            attributes[IDENTITY] = ctx.identity
        parent = _parent(ctx)
        span = self.tracer.start_span(f"execute_tool {name}", context=parent, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        try:
            outcome = await super().run(name, raw_args, ctx)
        except BaseException as exc:
            _fail(span, exc)
            if not isinstance(exc, Exception):
                span.set_attribute(RESULT_KIND, str(ResultKind.CANCELLED))
            raise
        else:
            kind = str(outcome.kind)
            error = outcome.response.is_error
            span.set_attributes({RESULT_KIND: kind, IS_ERROR: error})
            if outcome.permission is not None:
                span.set_attribute(PERMISSION, outcome.permission)
            if outcome.pattern is not None:
                span.set_attribute(PATTERN, outcome.pattern)
            if error:
                # The MCP conventions' error.type for a result with isError; a refusal names its kind.
                span.set_attribute("error.type", "tool_error" if outcome.kind == ResultKind.ERROR else kind)
                span.set_status(Status(StatusCode.ERROR))
            return outcome
        finally:
            otel_context.detach(token)
            span.end()

    def _stage(self, name: str, step: Callable[..., _T], *args: Any) -> _T:
        if not trace.get_current_span().is_recording():
            return step(*args)  # a call the sampler left out: its stages are left out too
        span = self.tracer.start_span(name)
        try:
            return step(*args)
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            span.end()

    def _before_hooks(self, call: _Call, raw_args: object) -> None:
        self._stage("before hooks", super()._before_hooks, call, raw_args)

    def _normalise(self, call: _Call) -> None:
        # normalising and the schema are one stage: validation
        if not trace.get_current_span().is_recording():
            return super()._normalise(call)
        call.span = span = self.tracer.start_span("validation")
        try:
            super()._normalise(call)
        except BaseException as exc:
            _fail(span, exc)
            span.end()
            raise

    def _schema(self, call: _Call) -> None:
        span = call.span
        if span is None:
            return super()._schema(call)
        try:
            super()._schema(call)
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            span.end()

    def _access(self, call: _Call) -> None:
        self._stage("access keys", super()._access, call)

    def _permission(self, call: _Call) -> Verdict | None:
        return self._stage("permission", super()._permission, call)

    async def _ask(self, call: _Call, verdict: Verdict) -> None:
        span, token = self._current("approval")
        try:
            await super()._ask(call, verdict)
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            if call.permission is not None:
                span.set_attribute(PERMISSION, call.permission)
            otel_context.detach(token)
            span.end()

    def _loop_guards(self, call: _Call) -> None:
        self._stage("loop guards", super()._loop_guards, call)

    async def _dispatch(self, call: _Call) -> ServerResponse:
        # The current span while the tool runs: programs it starts and calls it makes nest under it.
        span, token = self._current("tool run")
        try:
            response = await super()._dispatch(call)
            if response.is_error:
                span.set_status(Status(StatusCode.ERROR))
            return response
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            otel_context.detach(token)
            span.end()

    def _current(self, name: str) -> tuple[Any, Any]:
        """A stage span made the current one (a non-recording call's own span stays current)."""
        current = trace.get_current_span()
        span = self.tracer.start_span(name) if current.is_recording() else current
        return span, otel_context.attach(trace.set_span_in_context(span))

    def _result(self, call: _Call, response: ServerResponse) -> CallOutcome:
        return self._stage("outcome", super()._result, call, response)


# -- programs started through toolkit.run_process -------------------------------------------------


def start_process(tracer: Any, argv: Sequence[str], pid: int, started: float) -> Any:
    """A span for a program run, begun when its run began (``started``: time.monotonic())."""
    name = os.path.basename(argv[0]) if argv else "?"
    begun = time.time_ns() - int((time.monotonic() - started) * 1e9)
    return tracer.start_span(
        f"run {name}", start_time=begun, attributes={"process.executable.name": name, "process.pid": pid}
    )


def end_process(span: Any, result: ProcessResult | None, exc: BaseException | None) -> None:
    if result is not None:
        if result.exit_code is not None:
            span.set_attribute("process.exit.code", result.exit_code)
        if result.timed_out or result.cancelled or result.stopped_at_cap:
            span.set_attributes(
                {
                    "entropic_mcp.process.timed_out": result.timed_out,
                    "entropic_mcp.process.cancelled": result.cancelled,
                    "entropic_mcp.process.stopped_at_cap": result.stopped_at_cap,
                }
            )
        if result.timed_out:
            span.set_attribute("error.type", "timeout")
            span.set_status(Status(StatusCode.ERROR, "timeout"))
    elif exc is not None:
        _fail(span, exc)
    span.end()


# -- serve's provider from the environment --------------------------------------------------------


def provider_from(names: Sequence[str], path: str) -> tuple[TracerProvider | None, list[str]]:
    """A tracer provider exporting to the ``OTEL_TRACES_EXPORTER`` names and the spans file."""
    from importlib.metadata import entry_points

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    problems: list[str] = []
    processors: list[Any] = []
    found = {point.name: point for point in entry_points(group="opentelemetry_traces_exporter")}
    for name in names:
        point = found.get(name)
        if point is None:
            known = ", ".join(sorted(found)) or "none"
            problems.append(
                f"OTEL_TRACES_EXPORTER names {name!r}, which no installed package provides (installed: {known}); "
                "for otlp: pip install opentelemetry-exporter-otlp"
            )
            continue
        try:
            processors.append(BatchSpanProcessor(point.load()()))
        except Exception as exc:
            problems.append(f"the {name!r} span exporter could not be started ({type(exc).__name__}: {exc})")
    if path:
        try:
            processors.append(SimpleSpanProcessor(_json_lines_exporter(path)))
        except OSError as exc:
            problems.append(f"ENTROPIC_MCP_TRACES_FILE={path}: cannot open it for writing ({exc.strerror or exc})")
    if not processors:
        return None, problems
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "entropic-mcp"}))  # neither OTEL_ variable names it
    provider = TracerProvider(resource=resource)
    for processor in processors:
        provider.add_span_processor(processor)
    return provider, problems


def _json_lines_exporter(path: str) -> Any:
    """An exporter appending every span, as the SDK's JSON on one line, to ``path`` as it ends."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonLinesExporter(SpanExporter):
        def __init__(self) -> None:
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115  (open until shutdown)

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            for span in spans:
                self._file.write(span.to_json(indent=None) + "\n")
            self._file.flush()
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            self._file.close()

    return JsonLinesExporter()
