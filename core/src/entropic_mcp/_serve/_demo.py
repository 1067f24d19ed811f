"""``entropic-mcp demo``: a real ``entropic-mcp serve`` driven by the official MCP client, narrated."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

PLUGINS = ("filesystem", "bash", "git", "entropic")

DEMO_CONFIG = """\
# Written by `entropic-mcp demo`: every first-party plugin, the embedded default store.
[entropic_mcp]
plugins = ["filesystem", "bash", "git", "entropic"]

[permissions]
default = "ask"
allow_read = true
allow = ["filesystem.write_file", "bash.execute", "entropic.todo"]
"""


def serve_command() -> list[str]:
    script = Path(sys.executable).with_name("entropic-mcp")
    if script.exists():
        return [str(script), "serve"]
    return [sys.executable, "-c", "from entropic_mcp.cli import main; main()", "serve"]


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " …"


class Narrator:
    def __init__(self) -> None:
        self.step = 0
        self.failures: list[str] = []

    def show(self, title: str, detail: str, ok: bool) -> None:
        self.step += 1
        mark = click.style("ok  ", fg="green") if ok else click.style("FAIL", fg="red")
        click.echo(f"{mark} {self.step}. {title}")
        click.echo(f"        {detail}")
        if not ok:
            self.failures.append(title)


async def _drive(project: Path, narrator: Narrator) -> None:
    from mcp import Client, StdioServerParameters
    from mcp_types import ElicitResult

    env = {k: v for k, v in os.environ.items() if not k.startswith("ENTROPIC_MCP_")}
    command = serve_command()
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(project), env=env)

    async def user(context: Any, params: Any) -> ElicitResult:
        """The demo's scripted user: allows tool calls once, refuses paths outside the project."""
        answer = "deny_once" if "outside the project root" in params.message else "allow_once"
        click.echo(f"        the server asks the user: {_short(params.message, 160)}")
        click.echo(f"        the user answers: {answer}")
        return ElicitResult(action="accept", content={"decision": answer})

    async with Client(params, elicitation_callback=user) as client:
        click.echo(f"connected over stdio with the official MCP SDK client; protocol {client.protocol_version}\n")
        tools = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        names = [tool.name for tool in tools]
        servers = [p for p in PLUGINS if any(n.startswith(p + "_") for n in names)]
        narrator.show(
            "tools/list",
            f"{len(names)} tools from {', '.join(servers)}: {', '.join(names[:8])}, …",
            servers == list(PLUGINS),  # served as <server>_<tool> (tool_names = "portable")
        )

        async def call(title: str, name: str, args: dict[str, Any], expect: Callable[[Any, str], bool]) -> Any:
            result = await client.call_tool(name, args)
            text = getattr(result.content[0], "text", "") if result.content else ""
            kind = (result.meta or {}).get("entropic-mcp/kind")
            ok = expect(result, text)
            narrator.show(
                f"{title}: {name} {json.dumps(args)}", f"isError={result.is_error} kind={kind} → {_short(text)}", ok
            )
            return result

        await call(
            "write a file",
            "filesystem.write_file",
            {"path": "hello.txt", "content": "Hello from entropic-mcp!\n"},
            lambda r, t: not r.is_error,
        )
        await call(
            "read it back",
            "filesystem.read_file",
            {"path": "hello.txt"},
            lambda r, t: not r.is_error and "Hello from entropic-mcp!" in t,
        )
        await call("git status", "git.status", {}, lambda r, t: not r.is_error and "hello.txt" in t)
        await call(
            "run a shell command",
            "bash.execute",
            {"command": "echo demo-says-hi"},
            lambda r, t: not r.is_error and "demo-says-hi" in t,
        )
        await call(
            'a rule says "ask": the user is asked, allows it once',
            "filesystem.edit_file",
            {"path": "hello.txt", "old_string": "Hello", "new_string": "Hi"},
            lambda r, t: not r.is_error,
        )
        await call(
            "a path outside the project: the user is asked, refuses",
            "filesystem.read_file",
            {"path": "/etc/passwd"},
            lambda r, t: (
                r.is_error and "outside_root_rejected" in t and not (r.meta or {}).get("entropic-mcp/directives")
            ),
        )
        todo = await call(
            "keep a todo list",
            "entropic.todo",
            {"action": "add", "content": "try entropic-mcp in my editor"},
            lambda r, t: not r.is_error and "try entropic-mcp" in t,
        )
        directives = (todo.meta or {}).get("entropic-mcp/directives") or []
        click.echo(f"        directives for the host in _meta: {[d.get('type') for d in directives]}")


def run_demo(*, keep: bool = False) -> int:
    """0 when every step did what it should."""
    import anyio

    missing = [name for name in PLUGINS if importlib.util.find_spec(f"entropic_mcp_{name}") is None]
    if missing:
        click.echo(
            "the demo needs every first-party plugin; missing: "
            + ", ".join(f"entropic-mcp-{name}" for name in missing)
            + f"\ninstall with: pip install {' '.join(f'entropic-mcp-{n}' for n in missing)}",
            err=True,
        )
        return 1
    project = Path(tempfile.mkdtemp(prefix="entropic-mcp-demo-")).resolve()
    narrator = Narrator()
    try:
        (project / "entropic-mcp.toml").write_text(DEMO_CONFIG, encoding="utf-8")
        if shutil.which("git"):
            subprocess.run(["git", "init", "-q", str(project)], check=True)
        click.echo(f"entropic-mcp demo — project {project}")
        click.echo(f"starting: {' '.join(serve_command())} (all first-party plugins, embedded tinydb store)")
        anyio.run(_drive, project, narrator)
    except Exception as exc:  # the demo reports, it does not trace back
        click.echo(f"\nthe demo stopped: {type(exc).__name__}: {exc}", err=True)
        return 1
    finally:
        if keep:
            click.echo(f"\nkept the project directory: {project}")
        else:
            shutil.rmtree(project, ignore_errors=True)
    if narrator.failures:
        click.echo(f"\n{len(narrator.failures)} step(s) did not do what they should: {'; '.join(narrator.failures)}")
        return 1
    click.echo(
        f"\nall {narrator.step} steps behaved as expected. Point your MCP client at `entropic-mcp serve` next "
        "(see docs/serving.md)."
    )
    return 0
