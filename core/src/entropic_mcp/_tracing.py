"""OpenTelemetry traces of tool calls (docs/tracing.md): off, and free, unless a tracer provider is set.

Nothing here imports OpenTelemetry. A tracer provider can only have been set by code that
imported ``opentelemetry.trace``, so when that module is not loaded tracing is off without
importing it; without the ``otel`` extra no call pays for tracing at all. Whether it is on is
worked out once, when a ``ServerManager`` is made: its pipeline is then the traced one
(``_traced.TracedPipeline``) or the plain one, and ``tracer`` is the one flag the process runner
checks per run. The spans themselves are made in ``_traced``, imported only when tracing is on.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._config import PipelineConfig
    from ._pipeline._spine import CallPipeline

log = logging.getLogger("entropic_mcp")

#: The tracer spans are made with when a tracer provider is set; None: tracing is off.
tracer: Any = None

#: The name spans are recorded under (the instrumentation scope).
SCOPE = "entropic_mcp"

#: serve writes every span to this file, one JSON object a line, when it is set (for debugging
#: and tests; OTEL_TRACES_EXPORTER chooses real exporters).
TRACES_FILE_ENV = "ENTROPIC_MCP_TRACES_FILE"


def refresh() -> Any:
    """Look whether a tracer provider is set; the tracer to use, or None (tracing off)."""
    global tracer
    tracer = _find_tracer()
    return tracer


def _find_tracer() -> Any:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None  # the API alone (the MCP SDK brings it): every span would be a no-op
    from ._version import __version__

    found = provider.get_tracer(SCOPE, __version__)
    return None if isinstance(found, (trace.NoOpTracer, trace.ProxyTracer)) else found


def pipeline(config: PipelineConfig, **collaborators: Any) -> CallPipeline:
    """A manager's pipeline (``CallPipeline``'s arguments): the traced one when a tracer provider
    is set, else the plain one."""
    if refresh() is None:
        from ._pipeline._spine import CallPipeline

        return CallPipeline(config, **collaborators)
    from ._traced import TracedPipeline

    return TracedPipeline(config, tracer=tracer, **collaborators)


def configure_from_env(environ: Mapping[str, str] = os.environ) -> Any:
    """serve's start: a tracer provider from the standard ``OTEL_*`` variables, if they ask for one.

    ``OTEL_TRACES_EXPORTER`` names exporters (``console``, ``otlp``, ... as installed; ``none``
    or unset: none) and ``ENTROPIC_MCP_TRACES_FILE`` a JSON-lines file of spans. Resource and
    exporter settings (``OTEL_SERVICE_NAME``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, ...) are the SDK's.
    A provider already set (``opentelemetry-instrument``) is kept. Returns the provider made, or
    None; a setting that cannot be honoured is one warning line, and serve goes on untraced.
    """
    names = [name.strip() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()]
    names = [name for name in names if name != "none"]
    path = environ.get(TRACES_FILE_ENV, "").strip()
    if not names and not path:
        return None
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    asked = ", ".join(
        filter(None, [f"OTEL_TRACES_EXPORTER={','.join(names)}" if names else "", path and TRACES_FILE_ENV])
    )
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider  # noqa: F401  (the SDK is what is missing)
    except ImportError:
        log.warning(
            "%s asks for traces but the OpenTelemetry SDK is not installed: pip install 'entropic-mcp[otel]' "
            "(serving without traces)",
            asked,
        )
        return None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None  # set up already (opentelemetry-instrument, or the embedding program)
    from ._traced import provider_from

    provider, problems = provider_from(names, path)
    for problem in problems:
        log.warning("tracing: %s", problem)
    if provider is not None:
        trace.set_tracer_provider(provider)
    return provider
