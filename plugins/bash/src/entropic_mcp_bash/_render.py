"""Results as the model reads them: the output as plain text, then one short footer line.

JSON wrapping made every newline and quote of a command's output an escape (+14 % tokens on a
pytest failure, and hard to read); ``format: "json"`` keeps the object for hosts that want it.
The object is the ``ToolResult``'s structured value either way, so a host that asks for
structured content (``[serve] structured_content = "json"``) still gets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from entropic_mcp import ToolResult, toolkit

FORMATS = ("text", "json")


def wants_json(args: Mapping[str, Any]) -> bool:
    """True when the call passed ``format: "json"`` (the default is ``"text"``)."""
    return toolkit.choice(args, "format", FORMATS, default="text") == "json"


def duration(ms: int | float) -> str:
    """``12 ms`` under a second, whole seconds (``3 s``) from there: a tenth costs the footer two tokens."""
    return f"{round(ms)} ms" if ms < 1000 else f"{round(ms / 1000)} s"


def footer(data: Mapping[str, Any]) -> str:
    """``[exit 1, 2 s, truncated, cwd src]`` from a result's fields (output excluded): the least
    that says how the command ended, how long it took and whether output was cut."""
    if "status" in data and data.get("status") != "exited":
        parts = [f"{data['status']}"]
    else:
        parts = [f"exit {data['exit_code']}"] if data.get("exit_code") is not None else []
    if "run_id" in data:
        parts.insert(0, f"run {data['run_id']}")
    if "elapsed_ms" in data:
        parts.append(duration(data["elapsed_ms"]))
    if data.get("truncated"):
        parts.append("truncated")  # the marker in the output says where and how much
    if data.get("dropped_bytes"):
        parts.append(f"{data['dropped_bytes']} unread bytes dropped")
    if "cwd" in data:
        parts.append(f"cwd {data['cwd']}")
    line = f"[{', '.join(parts)}]"
    if data.get("note"):
        line += f"\n[note: {data['note']}]"
    return line


def as_text(data: Mapping[str, Any]) -> str:
    """The output, a newline if it lacks one, then the footer; no output says so."""
    output = data.get("output", "")
    if not output:
        return f"(no output)\n{footer(data)}"
    return f"{output}{'' if output.endswith(chr(10)) else chr(10)}{footer(data)}"


def reply(data: dict[str, Any], *, json: bool) -> ToolResult:
    """The result as JSON (``format: "json"``) or as text with a footer; structured either way."""
    text = orjson.dumps(data).decode() if json else as_text(data)
    return ToolResult(text=text, structured=data)
