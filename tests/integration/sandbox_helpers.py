"""Shared by the sandbox integration tests: results as data, and processes found by a marker in
their command line (the sandbox's processes live in PID namespaces: their ids mean nothing here)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any


def result_of(result: Any) -> dict[str, Any]:
    """A tool result's JSON text as a dict (``{"text": ...}`` when it is not a JSON object)."""
    text = "".join(block.text for block in result.content if getattr(block, "type", "") == "text")
    try:
        data = json.loads(text)
    except ValueError:
        return {"text": text}
    return data if isinstance(data, dict) else {"text": text}


def alive_with(marker: str) -> list[int]:
    """Running (not zombie) processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def gone(marker: str, within: float = 10.0) -> bool:
    """Whether every process with ``marker`` is gone within ``within`` seconds."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not alive_with(marker):
            return True
        time.sleep(0.05)  # a bounded look at the process table, not synchronisation
    return False


def kill_marked(marker: str) -> None:
    """Kill the processes a test itself started with ``marker`` (its mode = "off" runs)."""
    for pid in alive_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
