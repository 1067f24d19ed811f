"""P1 with tracing (docs/tracing.md): what OpenTelemetry costs the in-process call, off and on.

The call is bench_pipeline.py's P1 (an async echo through the whole pipeline: schema, access
keys, permission rules, loop guards, duplicate check, envelope), in a fresh process per run:

- ``absent``: ``opentelemetry`` cannot be imported (a meta path finder blocks it): the extra
  is not installed;
- ``api``: ``opentelemetry.trace`` imported but no tracer provider set (the MCP SDK brings the
  API; serve without ``OTEL_TRACES_EXPORTER``);
- ``sdk``: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` and an exporter that
  does nothing (every span made, ended and handed to an exporter: the cost of tracing itself);
- ``sdk-batch``: the same with a ``BatchSpanProcessor`` (what serve sets up for
  ``OTEL_TRACES_EXPORTER``; the export runs on the processor's thread);
- ``sdk-unsampled``: ``sdk`` with a sampler that keeps no call (what a call left out by
  ``OTEL_TRACES_SAMPLER=parentbased_traceidratio`` costs: its call span only, no stage spans).

``--before SRC`` adds ``before``: the ``absent`` run with ``entropic_mcp`` imported from SRC
(e.g. ``git archive`` of the commit before tracing), to show the untraced call unchanged.

Counted with ``valgrind --tool=callgrind`` (repeatable whatever the load): instructions of a run
of ``CALLS`` calls minus a run of 0, per call. ``--time``: CPU time per call instead, modes
interleaved A B A B over ``ROUNDS`` rounds, median per mode. Target: ``absent`` and ``api`` =
``before``; ``sdk`` ≤ 1.2× ``absent``.

``--floor``: what the SDK itself costs, without entropic-mcp: 1 and 7 bare spans per "call"
(``start_span`` under a parent, ``end``; the same provider, processor and do-nothing exporter as
``sdk``), against the ``absent`` call, by callgrind. It says which ratios any design built on
the official SDK can reach.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved, record, report, spread

CALLS = 300
TIMED_CALLS = 3000
ROUNDS = 5

WORKER = r"""
import sys, tempfile, time
mode, calls = sys.argv[1], int(sys.argv[2])
if mode in ("absent", "before"):
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Block())
elif mode == "api":
    import opentelemetry.trace
else:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult)

    class Nothing(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF) if mode == "sdk-unsampled" else None)
    processor = BatchSpanProcessor if mode == "sdk-batch" else SimpleSpanProcessor
    provider.add_span_processor(processor(Nothing()))
    trace.set_tracer_provider(provider)

import anyio
from entropic_mcp import AccessLevel, CallContext, MCPServerBase, ToolBase, ToolDefinition
from entropic_mcp.testing import make_manager

schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

class Echo(ToolBase):
    required_access_level = AccessLevel.READ

    async def execute(self, args, ctx):
        return args["text"]

class Bench(MCPServerBase):
    name = "bench"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.register_tool(Echo(ToolDefinition(name="echo", description="echo", input_schema=schema)))

root = tempfile.mkdtemp()
manager = make_manager(root, servers=[Bench(root=root)], config={
    "permissions": {"default": "ask", "allow": ["bench.*"], "deny": ["bench.echo:never"]},
    "identities": {"agent": {"keys": {"bench.*": "READ"}}},
    "pipeline": {"same_tool_limit": 10**9},
})
traced = type(manager.pipeline).__name__ == "TracedPipeline"
assert traced == mode.startswith("sdk"), (mode, type(manager.pipeline))

async def run():
    await manager.call("bench.echo", {"text": "warm"}, CallContext(conversation_id="w", identity="agent"))
    contexts = [CallContext(conversation_id="c", identity="agent") for _ in range(calls)]
    start = time.process_time()
    for i, ctx in enumerate(contexts):
        outcome = await manager.call("bench.echo", {"text": f"hi {i}"}, ctx)
        assert outcome.kind == "ok", outcome
    return time.process_time() - start

spent = anyio.run(run)
if mode in ("absent", "before"):
    assert not [m for m in sys.modules if m.startswith("opentelemetry")]
print(spent / max(calls, 1))
"""


FLOOR = r"""
import sys
calls, spans = int(sys.argv[1]), int(sys.argv[2])
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

class Nothing(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(Nothing()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("floor")
attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "bench.echo"}

def call():
    root = tracer.start_span("tools/call bench.echo", attributes=attributes)
    parent = trace.set_span_in_context(root)
    for _ in range(spans - 1):
        tracer.start_span("stage", context=parent).end()
    root.end()

call()
for _ in range(calls):
    call()
"""


def _floor_instructions(calls: int, spans: int) -> int:
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-c",
            FLOOR,
            str(calls),
            str(spans),
        ],
        capture_output=True,
        text=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(done.stderr[-2000:])
    return int(found.group(1))


def floor() -> None:
    call = (_instructions("absent", CALLS, None) - _instructions("absent", 0, None)) / CALLS
    rows, records = [], []
    for spans in (1, 7):
        cost = (_floor_instructions(CALLS, spans) - _floor_instructions(0, spans)) / CALLS
        ratio = (call + cost) / call
        rows.append((f"floor {spans} span(s)", f"{cost:,.0f} instructions", f"call {call:,.0f}", f"{ratio:.2f}×", ""))
        records.append(
            {
                "id": "P1",
                "what": f"tracing floor: {spans} bare SDK span(s) a call (SimpleSpanProcessor, an exporter that does "
                f"nothing; no entropic-mcp code), added to the untraced call (callgrind, {CALLS} calls)",
                "peer": f"{call:,.0f} instructions",
                "ours": f"{call + cost:,.0f} instructions ({cost:,.0f} in the SDK)",
                "ratio": f"{ratio:.2f}×",
                "target": "≤ 1.2× (issue 28)",
                "met": "**no** (the SDK alone)" if ratio > 1.2 else "yes",
            }
        )
    report("bench_tracing --floor", rows)
    record("P1-tracing-floor", records, script="bench/bench_tracing.py --floor")


def _env(mode: str, before: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if mode == "before" and before:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [before, env.get("PYTHONPATH", "")]))
    return env


def _instructions(mode: str, calls: int, before: str | None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={log}",
                sys.executable,
                "-c",
                WORKER,
                mode,
                str(calls),
            ],
            capture_output=True,
            text=True,
            env=_env(mode, before),
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError("callgrind printed no total")
        return int(found.group(1))


def _cpu(mode: str, before: str | None) -> float:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, mode, str(TIMED_CALLS)],
        capture_output=True,
        text=True,
        check=True,
        env=_env(mode, before),
    )
    return float(done.stdout.strip().splitlines()[-1])


WHAT = {
    "before": "tracing: the commit before it (no tracing code), in-process async echo",
    "absent": "tracing: the otel extra absent (opentelemetry not importable)",
    "api": "tracing: opentelemetry's API imported, no tracer provider (what the MCP SDK brings)",
    "sdk": "tracing: the SDK, SimpleSpanProcessor, an exporter that does nothing (7 spans a call)",
    "sdk-batch": "tracing: the same with a BatchSpanProcessor (what serve sets up)",
    "sdk-unsampled": "tracing: the SDK with a sampler that keeps no call (its call span only)",
}
TARGETS = {"absent": 1.0, "api": 1.0, "sdk": 1.2, "sdk-batch": 1.2}


def main() -> None:
    if "--floor" in sys.argv:
        floor()
        return
    before = None
    if "--before" in sys.argv:
        before = sys.argv[sys.argv.index("--before") + 1]
    modes = (["before"] if before else []) + ["absent", "api", "sdk", "sdk-batch", "sdk-unsampled"]
    callgrind = shutil.which("valgrind") is not None and "--time" not in sys.argv
    if callgrind:
        costs = {m: (_instructions(m, CALLS, before) - _instructions(m, 0, before)) / CALLS for m in modes}
        shown = {m: f"{costs[m]:,.0f} instructions" for m in modes}
    else:
        samples = interleaved({m: (lambda m=m: _cpu(m, before)) for m in modes}, ROUNDS)
        costs = {m: statistics.median(s) for m, s in samples.items()}
        shown = {m: f"{spread([v * 1e6 for v in s])} µs CPU" for m, s in samples.items()}
    base_mode = "before" if before else "absent"
    base = costs[base_mode]
    rows, records = [], []
    for mode in modes:
        ratio = costs[mode] / base
        # The base row is what the others are measured against: no target of its own.
        limit = None if mode == base_mode else TARGETS.get(mode)
        target = "" if limit is None else ("= before (±1 %)" if limit == 1.0 else f"≤ {limit}×")
        met = "—" if limit is None else ("yes" if ratio <= limit + (0.01 if limit == 1.0 else 0) else "**no**")
        rows.append((f"P1 {mode}", shown[mode], base_mode, f"{ratio:.2f}×", target))
        records.append(
            {
                "id": "P1",
                "what": f"{WHAT[mode]} ({'callgrind, ' + str(CALLS) + ' calls' if callgrind else 'CPU time, ABAB'})",
                "peer": shown[base_mode] if mode != base_mode else "—",
                "ours": shown[mode],
                "ratio": f"{ratio:.2f}×",
                "target": target or "—",
                "met": met,
            }
        )
    unit = "callgrind instructions" if callgrind else "CPU time"
    print(f"measured {time.strftime('%Y-%m-%d %H:%M')} in {unit}")
    report("bench_tracing", rows)
    record("P1-tracing", records, script="bench/bench_tracing.py")


if __name__ == "__main__":
    main()
