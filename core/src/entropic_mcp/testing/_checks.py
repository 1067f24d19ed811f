"""Conformance checks for servers and plugins: ``check_server`` and ``check_plugin``."""

from __future__ import annotations

import asyncio
import tempfile
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._access import AccessLevel
from .._config import PluginConfig, config_from_dict
from .._context import CallContext
from .._directives import Directive
from .._envelope import ServerResponse
from .._errors import ConfigError
from .._manager import ServerManager
from .._plugins import Plugins
from .._server import MCPServerBase
from .._tools import TOOL_NAME, ToolBase, ToolDefinition


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return {"x": {"y": value}}


#: Argument values no tool should choke on: non-objects, junk types, NUL, huge, lone surrogates, deep.
JUNK: tuple[Any, ...] = (
    None,
    "",
    "   ",
    "null",
    "junk",
    "[1]",
    "42",
    42,
    3.5,
    True,
    [],
    [1],
    {"": None},
    {"\x00": "\x00"},
    {"path": "\x00"},
    {"a" * 300: "b" * 100_000},
    {"x": "\udcff\udc80"},
    _deep(200),
)
CALL_LIMIT_SECONDS = 20.0


class ConformanceError(AssertionError):
    """A server or plugin broke the contract; the message lists every problem."""


def _check_envelope(response: object, where: str) -> list[str]:
    if not isinstance(response, ServerResponse):
        return [f"{where}: returned {type(response).__name__}, not a ServerResponse"]
    problems = []
    if not isinstance(response.result, str):
        problems.append(f"{where}: result is not a string")
    if response.is_error and response.directives:
        problems.append(f"{where}: an error carries directives")
    if not all(isinstance(d, Directive) for d in response.directives):
        problems.append(f"{where}: a directive is not a Directive record")
    try:
        response.to_json()
    except Exception as exc:  # the envelope must always serialise
        problems.append(f"{where}: envelope does not serialise: {exc}")
    return problems


def _argument_sets(tool: ToolBase, examples: int) -> list[Any]:
    """Arguments generated from the tool's own schema (hypothesis), then the junk corpus."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    generated: list[Any] = []
    schema = dict(tool.definition.input_schema)
    try:
        from hypothesis_jsonschema import from_schema

        strategy = from_schema(schema)
    except Exception:
        strategy = st.dictionaries(
            st.sampled_from(sorted(schema.get("properties", {})) or ["x"]),
            st.none() | st.booleans() | st.integers() | st.text() | st.lists(st.text()),
        )
    strategy = strategy | st.dictionaries(st.text(max_size=8), st.none() | st.integers() | st.text(max_size=40))

    @settings(
        max_examples=examples, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def collect(value: Any) -> None:
        generated.append(value)

    try:
        collect()
    except Exception as exc:
        generated.append({"__generation_failed__": str(exc)})
    return generated + list(JUNK)


async def _fuzz(server: MCPServerBase, examples: int) -> list[str]:
    problems: list[str] = []
    manager = ServerManager(
        config_from_dict({"storage": {"backend": "none"}}, root=server.root), plugins=Plugins(strict=False)
    )
    manager.servers[server.name] = server  # observed, not owned: the caller closes the server
    for name, tool in server.tools.items():
        for index, args in enumerate(_argument_sets(tool, examples)):
            where = f"{server.name}.{name} with {str(args)[:80]!r}"
            ctx = CallContext(conversation_id=f"check-{index % 3}", manager=manager)
            try:
                async with asyncio.timeout(CALL_LIMIT_SECONDS):
                    response = await server.execute(name, args, ctx)
            except TimeoutError:
                problems.append(f"{where}: did not return within {CALL_LIMIT_SECONDS:g} s")
                continue
            except BaseException as exc:
                problems.append(f"{where}: execute raised {type(exc).__name__}: {exc}")
                continue
            problems.extend(_check_envelope(response, where))
    return problems


def check_server(
    server: MCPServerBase,
    *,
    examples: int = 50,
    raise_on_failure: bool = True,
    close: bool = True,
) -> list[str]:
    """Check a server against the contract; return (or raise with) every problem found.

    Tools are called with arguments generated from their schemas and with junk, so root the
    server in a scratch directory. With ``close`` (the default), ``close()`` is checked last.
    """
    problems: list[str] = []
    if not isinstance(server, MCPServerBase):
        raise TypeError(f"check_server expects an MCPServerBase instance, got {type(server).__name__}")
    if not TOOL_NAME.match(server.name or "") or "." in server.name:
        problems.append(f"server name {server.name!r} is not a valid tool prefix")
    listing = server.list_tools()
    if not isinstance(listing, list) or [t.get("name") for t in listing] != list(server.tools):
        problems.append(f"{server.name}: list_tools() does not list the registered tools in order")
    for name, tool in server.tools.items():
        where = f"{server.name}.{name}"
        if not isinstance(tool.definition, ToolDefinition):
            problems.append(f"{where}: definition is not a ToolDefinition")
            continue
        if not isinstance(tool.required_access_level, AccessLevel):
            problems.append(f"{where}: required_access_level is not an AccessLevel")
        try:
            import jsonschema_rs

            jsonschema_rs.meta.validate(dict(tool.definition.input_schema))
        except Exception as exc:
            problems.append(f"{where}: inputSchema is not a valid JSON Schema: {exc}")
        pattern = server.permission_pattern(name, {})
        if not isinstance(pattern, str) or not pattern:
            problems.append(f"{where}: permission_pattern returned {pattern!r}, expected a non-empty str")
        if not isinstance(server.skip_duplicate_check(name), bool):
            problems.append(f"{where}: skip_duplicate_check did not return a bool")
    try:
        server.configure({"__no_such_key__": 1})
        problems.append(f"{server.name}: configure accepted an unknown key")
    except ConfigError:
        pass
    except Exception as exc:
        problems.append(
            f"{server.name}: configure raised {type(exc).__name__} for an unknown key, expected ConfigError"
        )
    problems.extend(asyncio.run(_fuzz(server, examples)))
    if close:
        try:
            server.close()
            server.close()
        except Exception as exc:
            problems.append(f"{server.name}: close() is not idempotent: {exc}")
    if problems and raise_on_failure:
        raise ConformanceError(f"{len(problems)} problem(s):\n" + "\n".join(f"- {p}" for p in problems))
    return problems


def check_plugin(
    module: types.ModuleType | object,
    *,
    root: str | Path | None = None,
    config: Mapping[str, Any] | None = None,
    examples: int = 50,
    raise_on_failure: bool = True,
) -> list[str]:
    """Register ``module`` as a plugin, build its servers, and run ``check_server`` on each."""
    scratch = None
    if root is None:
        scratch = tempfile.TemporaryDirectory(prefix="entropic-mcp-check-")
        root = scratch.name
    try:
        plugins = Plugins(strict=True)
        plugins.register(module, getattr(module, "__name__", "plugin-under-test"))
        plugins.check_unknown_hooks()
        settings = config_from_dict(dict(config or {"storage": {"backend": "none"}}), root=root)
        problems: list[str] = []
        servers = []
        for _, function in plugins.implementations("entropic_mcp_servers"):
            result = function(config=PluginConfig(root=Path(root).resolve(), settings=settings))
            results = [result] if isinstance(result, MCPServerBase) else list(result or [])
            for server in results:
                if not isinstance(server, MCPServerBase):
                    problems.append(f"entropic_mcp_servers returned {type(server).__name__}, not an MCPServerBase")
                    continue
                server.configure(settings.server_table(server.name))
                servers.append(server)
        if not servers:
            problems.append("the plugin registers no server (implement entropic_mcp_servers)")
        for server in servers:
            problems.extend(check_server(server, examples=examples, raise_on_failure=False))
        if problems and raise_on_failure:
            raise ConformanceError(f"{len(problems)} problem(s):\n" + "\n".join(f"- {p}" for p in problems))
        return problems
    finally:
        if scratch is not None:
            scratch.cleanup()
