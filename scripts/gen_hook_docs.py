"""Write docs/hooks.md from entropic_mcp.hookspecs (run after changing a hook spec)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from entropic_mcp import hookspecs

ORDER = [
    "entropic_mcp_add_hookspecs",
    "entropic_mcp_servers",
    "entropic_mcp_storage_backends",
    "entropic_mcp_permission_pattern",
    "entropic_mcp_skip_duplicate_check",
    "entropic_mcp_approve_tool_call",
    "entropic_mcp_approve_outside_root",
    "entropic_mcp_before_tool_call",
    "entropic_mcp_after_tool_call",
    "entropic_mcp_directive_handlers",
]
INTRO = """# Hook reference

Every hook of entropic-mcp is declared in `entropic_mcp.hookspecs`. Implement one by decorating a
function in your plugin module (or a method of a plugin object) with `entropic_mcp.hookimpl`,
using the hook's name and any subset of its arguments. Specs only grow: later versions may add
arguments (an implementation that does not name them keeps working); nothing is renamed or removed.

This page is generated from the specs by `scripts/gen_hook_docs.py`; a test fails when it is out of date.

| hook | kind | purpose |
|---|---|---|
"""


def signature(function) -> str:
    return f"def {function.__name__}{inspect.signature(function)}".replace("'", "")


def kind(function) -> str:
    options = function.entropic_mcp_spec
    return "historic" if options.get("historic") else "firstresult" if options.get("firstresult") else "collected"


def render_doc(doc: str) -> list[str]:
    out: list[str] = []
    section = None
    code = False
    for line in doc.split("\n"):
        if line.strip() == "Example::":
            out += ["**Example**", "", "```python"]
            code = True
            continue
        if code:
            out.append(line[4:] if line.startswith("    ") else line)
            continue
        if line in ("Args:", "Returns:"):
            section = line[:-1]
            out += ["", f"**{'Arguments' if section == 'Args' else 'Returns'}**", ""]
            continue
        if section and line.startswith("        "):
            out[-1] += " " + line.strip()
        elif section and line.startswith("    "):
            text = line.strip()
            match = re.match(r"(\w+): (.*)", text)
            out.append(f"- `{match.group(1)}`: {match.group(2)}" if section == "Args" and match else text)
        else:
            section = None if line.strip() == "" else section
            out.append(line)
    if code:
        while out and not out[-1].strip():
            out.pop()
        out.append("```")
    return out


RULES = """
## What every hook can rely on

- **Arguments are read-only.** `call.args` (before and after hooks), `request.args` (approvers)
  and the `args` of `entropic_mcp_permission_pattern` are a read-only deep copy of the call's
  arguments: a `dict`/`list` you can read, serialise (`json`, `orjson`) and copy
  (`dict(call.args)`, `copy.deepcopy`), but changing it in place raises `ReadOnlyArguments` (a
  `TypeError`), which counts as the hook failing (a gate refuses the call, an approver is
  skipped). The arguments that run are exactly the ones the rules judged; to run a call with
  other arguments, return `ReplaceArgs(args=...)` from `entropic_mcp_before_tool_call`, before
  anything is judged. `entropic-mcp check-plugin` reports a hook that edits in place.
- **`BaseException` is isolated too.** A hook (or a tool, a `configure`, a plugin module being
  imported) that raises `SystemExit` (argparse on a bad value, a stray `sys.exit`),
  `KeyboardInterrupt` or a `BaseException` subclass of its own is handled like any exception,
  attributed to the plugin: only a real stop of the host passes (a Ctrl-C the host itself
  received, cancellation).
- **stdout is not yours.** On stdio, stdout carries MCP; `--json` commands print one JSON
  document there. While plugins import and run, `sys.stdout` is a guard that sends what they
  print to stderr with one warning naming the plugin; log with `logging` instead.
- **Hook names are checked.** An implementation of a hook no spec declares fails the plugin; one
  marked `optionalhook=True` a typo away from an entropic-mcp hook
  (`entropic_mcp_permision_pattern`) is logged at load and reported by `check-plugin`.
- **No hook wrappers.** entropic-mcp calls a hook's implementations one at a time, so that a
  fault is attributed to its plugin and the others keep working; a pluggy wrapper
  (`wrapper=True` or the old `hookwrapper=True`) would be listed and never run. Such a plugin
  fails at registration, with a message saying so (an error in strict mode). Order plain
  implementations with `tryfirst`/`trylast`; to surround a call, pair
  `entropic_mcp_before_tool_call` with `entropic_mcp_after_tool_call`.
"""


def render() -> str:
    lines = [INTRO.rstrip("\n")]
    for name in ORDER:
        function = getattr(hookspecs, name)
        summary = inspect.getdoc(function).split("\n")[0]
        lines.append(f"| [`{name}`](#{name}) | {kind(function)} | {summary} |")
    lines.append(RULES.rstrip("\n"))
    for name in ORDER:
        function = getattr(hookspecs, name)
        lines += ["", f"## {name}", "", "```python", signature(function), "```", "", f"*{kind(function)}*", ""]
        lines += render_doc(inspect.getdoc(function))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    Path(__file__).resolve().parents[1].joinpath("docs", "hooks.md").write_text(render(), encoding="utf-8")
