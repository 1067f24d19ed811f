"""The result cap a tool fits its answer under."""

from __future__ import annotations

from typing import Any

__all__ = ["result_limit"]


def result_limit(ctx: Any) -> int:
    """The pipeline's ``max_result_bytes`` for this call; 0 when there is none (a direct call).

    A result over the cap is cut by the pipeline, mid-JSON; a tool that knows the cap fits its
    result under it, keeping the note that says how to get the rest.
    """
    services = getattr(ctx, "services", None)
    cap = getattr(services, "result_limit", None) if services is not None else None
    if cap is None:
        config = getattr(getattr(ctx, "manager", None), "config", None)
        cap = getattr(getattr(config, "pipeline", None), "max_result_bytes", 0)
    if callable(cap):
        cap = cap()
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else 0
