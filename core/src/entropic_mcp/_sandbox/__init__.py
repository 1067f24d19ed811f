"""The OS sandbox under every program the tools start (bubblewrap namespaces and mounts).

The rules decide whether a command runs; the sandbox bounds what a running command can do:
write only under the project root and a private ``/tmp``, never change the policy files or
read what the deny rules and ``.entropicignore`` name, reach no network unless allowed, and
leave no process behind (a PID namespace that dies with its first process and with the server).
See docs/sandbox.md and the decision record in docs/decisions.md.
"""

from __future__ import annotations

from ._blocked import blocked_note
from ._bwrap import Found, find
from ._sandbox import (
    OFF,
    HostSandbox,
    Prepared,
    Sandbox,
    external_sandbox,
    install,
    installed,
    sandbox_for,
    uninstall,
)

__all__ = [
    "OFF",
    "Found",
    "HostSandbox",
    "Prepared",
    "Sandbox",
    "blocked_note",
    "external_sandbox",
    "find",
    "install",
    "installed",
    "sandbox_for",
    "uninstall",
]
