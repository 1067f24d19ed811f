"""Conformance checks for servers and plugins: ``check_server`` and ``check_plugin``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .._access import AccessLevel
from .._children import command_line, descendants, stop_processes
from .._config import Config, config_from_dict
from .._context import CallContext
from .._directives import Directive
from .._envelope import ServerResponse, ToolResult, structured_object
from .._errors import ConfigError, ToolError
from .._isolation import reraise_host_stop
from .._manager import ServerManager
from .._pipeline._deadlines import LOOP_BLOCK_SECONDS
from .._plugins import Plugins
from .._server import MCPServerBase
from .._tools import TOOL_NAME, ToolBase, ToolDefinition
from ._calls import call_tool
from ._strategies import valid_arguments
from ._where import definition_file, describe, of_function


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
#: Seconds one call may take before the check cancels it and reports the tool.
CALL_LIMIT_SECONDS = 10.0


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


def _tool_where(server: MCPServerBase, name: str, tool: ToolBase) -> str:
    return f"{server.name}.{name} ({of_function(tool.execute)})"


def _short_args(args: object) -> str:
    text = repr(args)
    return text if len(text) <= 120 else text[:117] + "..."


class _Tally:
    """Problems of one tool, one line per kind of fault with how often it happened."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.calls = 0
        self.kinds: dict[str, list[Any]] = {}

    def add(self, kind: str, message: str) -> None:
        entry = self.kinds.setdefault(kind, [0, message])
        entry[0] += 1

    def problems(self) -> list[str]:
        out = []
        for count, message in self.kinds.values():
            suffix = f" [{count} of {self.calls} calls]" if self.calls > 1 else ""
            out.append(f"{self.where}: {message}{suffix}")
        return out


def _judge_value(value: object, args: object, tally: _Tally) -> None:
    if isinstance(value, ToolResult):
        if value.is_error and value.directives:
            tally.add("directives", f"returned an error ToolResult with directives for {_short_args(args)}")
        return
    if type(value) is not str and not isinstance(value, str):
        tally.add(
            f"type:{type(value).__name__}",
            f"returned {type(value).__name__} for schema-valid arguments {_short_args(args)}; "
            "a tool returns a str or a ToolResult (wrap data with ToolResult.json(...))",
        )


def _output_validator(tool: ToolBase) -> Any:
    """A validator for the tool's declared ``outputSchema`` (None: none declared, or unusable)."""
    schema = tool.definition.output_schema
    if schema is None:
        return None
    import jsonschema_rs

    try:
        return jsonschema_rs.validator_for(dict(schema))
    except Exception:  # reported by _check_definitions
        return None


def _judge_output(value: object, args: object, validator: Any, tally: _Tally) -> None:
    """A tool declaring an ``outputSchema`` must answer every success with an instance of it."""
    if isinstance(value, ToolResult):
        if value.is_error:
            return
        data = structured_object(value.structured, value.text)
    elif isinstance(value, str):
        data = structured_object(None, value)
    else:
        return  # a wrong type is reported by _judge_value
    if data is None:
        tally.add(
            "output:not-object",
            f"declares an outputSchema but returned no JSON object for {_short_args(args)}; MCP clients reject "
            "such a result — return ToolResult.json({...}) matching the schema",
        )
        return
    if not validator.is_valid(data):
        error = next(iter(validator.iter_errors(data)))
        at = ".".join(map(str, error.instance_path)) or "the result"
        tally.add(
            "output:invalid",
            f"returned a result that is not an instance of its outputSchema for {_short_args(args)}: "
            f"{at}: {error.message} (MCP clients reject it)",
        )


def _exercise_tool(
    server: MCPServerBase,
    name: str,
    tool: ToolBase,
    valid: list[Any],
    manager: ServerManager,
    limit: float,
) -> list[str]:
    """Call the tool itself with schema-valid arguments: errors and wrong types are faults here."""
    tally = _Tally(_tool_where(server, name, tool))
    output = _output_validator(tool)
    for index, args in enumerate(valid):
        ctx = CallContext(conversation_id=f"check-{index % 3}", manager=manager, deadline=time.monotonic() + limit)
        tally.calls += 1
        outcome = call_tool(tool, dict(args), ctx, limit)
        if outcome.timed_out:
            after = "stopped" if outcome.stopped_when_cancelled else "did not stop either"
            tally.add(
                "timeout",
                f"did not return within {limit:g} s for {_short_args(args)}; ctx.cancelled was set and it {after} "
                "(a long tool checks ctx.cancelled or ctx.remaining())",
            )
            break  # one abandoned thread per tool is enough to show it
        if outcome.loop_held >= LOOP_BLOCK_SECONDS:
            tally.add(
                "loop",
                f"blocked the event loop for {outcome.loop_held:.1f} s without awaiting (time.sleep or blocking I/O "
                "in an async def): under serve every other call waits and no timeout can fire; await anyio.sleep, "
                "or make execute a plain def so it runs in a worker thread",
            )
        if outcome.error is not None:
            if isinstance(outcome.error, ToolError):
                continue  # a typed refusal is an answer
            tally.add(
                f"raised:{type(outcome.error).__name__}",
                f"raised {describe(outcome.error)} for schema-valid arguments {_short_args(args)}; "
                "raise ToolError(code, message) to refuse a call",
            )
            continue
        _judge_value(outcome.value, args, tally)
        if output is not None:
            _judge_output(outcome.value, args, output, tally)
    return tally.problems()


async def _through_execute(
    server: MCPServerBase, name: str, arguments: list[Any], manager: ServerManager, limit: float
) -> list[str]:
    """The server's execute with junk too: it never raises and always answers with an envelope."""
    problems: list[str] = []
    for index, args in enumerate(arguments):
        where = f"{server.name}.{name} with {_short_args(args)[:80]}"
        ctx = CallContext(conversation_id=f"check-{index % 3}", manager=manager, deadline=time.monotonic() + limit)
        ctx.validated = True  # the junk goes to the tool as is, as if it had passed a schema
        try:
            async with asyncio.timeout(limit):
                response = await server.execute(name, args, ctx)
        except TimeoutError:
            ctx.cancelled.set()
            problems.append(f"{where}: execute did not return within {limit:g} s")
            break
        except BaseException as exc:
            reraise_host_stop(exc)
            problems.append(f"{where}: execute raised {describe(exc)}")
            continue
        problems.extend(_check_envelope(response, where))
    return problems


def _check_definitions(server: MCPServerBase, packages: tuple[str, ...]) -> tuple[list[str], set[str]]:
    """Problems of the tool definitions, and the tools whose schema is unusable."""
    import jsonschema_rs

    problems: list[str] = []
    unusable: set[str] = set()
    for name, tool in server.tools.items():
        where = f"{server.name}.{name}"
        if not isinstance(tool.definition, ToolDefinition):
            problems.append(f"{where}: definition is not a ToolDefinition")
            unusable.add(name)
            continue
        if not isinstance(tool.required_access_level, AccessLevel):
            problems.append(f"{where}: required_access_level is not an AccessLevel")
        try:
            jsonschema_rs.meta.validate(dict(tool.definition.input_schema))
        except Exception as exc:
            source = definition_file(tool, packages)
            first = str(getattr(exc, "message", "") or exc).strip().splitlines()[0]
            at = ".".join(map(str, getattr(exc, "instance_path", ()) or ()))
            problems.append(
                f"{where}{f' ({source})' if source else ''}: inputSchema is not a valid JSON Schema: "
                f"{f'inputSchema.{at}: ' if at else ''}{first}"
            )
            unusable.add(name)
        problems.extend(_check_output_schema(tool, where, packages))
        problems.extend(_check_own_pattern(server, name, {}))
        try:
            skip = server.skip_duplicate_check(name)
        except Exception as exc:
            problems.append(f"{where}: skip_duplicate_check raised {describe(exc)}")
        else:
            if not isinstance(skip, bool):
                problems.append(f"{where}: skip_duplicate_check returned {skip!r}, expected a bool")
    return problems, unusable


def _check_output_schema(tool: ToolBase, where: str, packages: tuple[str, ...]) -> list[str]:
    """A declared ``outputSchema`` is a valid JSON Schema of an object (MCP's rule; serve lists it)."""
    import jsonschema_rs

    schema = tool.definition.output_schema
    if schema is None:
        return []
    source = definition_file(tool, packages)
    at = f"{where}{f' ({source})' if source else ''}"
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return [f'{at}: outputSchema must be an object schema ({{"type": "object", ...}}), got {schema!r}'[:300]]
    try:
        jsonschema_rs.meta.validate(dict(schema))
    except Exception as exc:
        first = str(getattr(exc, "message", "") or exc).strip().splitlines()[0]
        return [f"{at}: outputSchema is not a valid JSON Schema: {first}"]
    return []


def pattern_problem(server: str, tool: str, pattern: object) -> str | None:
    """Why ``pattern`` is not a permission pattern for ``server.tool``, or None when it is."""
    full = f"{server}.{tool}"
    if not isinstance(pattern, str) or not pattern:
        return f"returned {pattern!r}, expected a non-empty str"
    if pattern != full and not pattern.startswith(full + ":"):
        return (
            f"returned {pattern!r} for {full}: a pattern is '{full}' or '{full}:<detail>' — "
            "one naming another tool would let that tool's rules decide this call"
        )
    return None


def _check_own_pattern(server: MCPServerBase, name: str, args: dict[str, Any]) -> list[str]:
    where = f"{server.name}.{name}"
    try:
        pattern = server.permission_pattern(name, args)
    except Exception as exc:
        return [f"{where}: permission_pattern raised {describe(exc)} for {_short_args(args)}"]
    problem = pattern_problem(server.name, name, pattern)
    return [f"{where}: permission_pattern {problem}"] if problem else []


def _check_configure(server: MCPServerBase) -> list[str]:
    where = f"{server.name}: configure ({of_function(server.configure)})"
    try:
        server.configure({"__no_such_key__": 1})
    except ConfigError:
        return []
    except Exception as exc:
        return [f"{where} raised {describe(exc)} for an unknown key, expected ConfigError"]
    return [f"{server.name}: configure accepted an unknown key"]


def host_config(config: Config | Mapping[str, Any] | None, root: Path) -> Config:
    """The host configuration a check runs under: ``config`` rooted at ``root`` (default: no storage)."""
    if isinstance(config, Config):
        return attrs.evolve(config, root=root)
    return config_from_dict(dict(config or {"storage": {"backend": "none"}}), root=root)


def scratch_host(config: Config, plugins: Plugins | None, servers: Iterable[MCPServerBase]) -> ServerManager:
    """A manager behind the servers under check, so ``ctx.services`` answers as a real host's would.

    The servers are observed, not owned: ``release_host`` closes the storage it opened and
    leaves the servers to the caller.
    """
    manager = ServerManager(config, plugins=plugins if plugins is not None else Plugins(strict=False))
    for server in servers:
        manager.servers[server.name] = server
    return manager


def release_host(manager: ServerManager) -> None:
    """Close what the scratch host opened (its storage), not the servers it was lent."""
    manager.servers.clear()
    manager.close()


Progress = Callable[[str], None]


def check_server(
    server: MCPServerBase,
    *,
    examples: int = 50,
    raise_on_failure: bool = True,
    close: bool = True,
    call_timeout: float = CALL_LIMIT_SECONDS,
    progress: Progress | None = None,
    arguments: dict[str, list[Any]] | None = None,
    definition_packages: tuple[str, ...] = (),
    config: Config | Mapping[str, Any] | None = None,
    plugins: Plugins | None = None,
) -> list[str]:
    """Check a server against the contract; return (or raise with) every problem found.

    Each tool is called with up to ``examples`` argument objects generated from its schema
    (every one valid against it): raising anything but ``ToolError``, returning anything but a
    ``str`` or ``ToolResult``, or running past ``call_timeout`` seconds is a fault. Then the
    server's ``execute`` gets junk as well, and must always answer with an envelope. Root the
    server in a scratch directory. With ``close`` (the default), ``close()`` is checked last.

    Args:
        server: the server under test.
        examples: generated argument sets per tool.
        raise_on_failure: raise ``ConformanceError`` listing every problem instead of returning them.
        close: check that ``close()`` is idempotent (closing the server).
        call_timeout: seconds one call may take before it is cancelled and reported.
        progress: called with one line per step, for a report as the check runs.
        arguments: filled with the schema-valid arguments generated per tool name.
        definition_packages: packages whose ``tools/*.json`` a report may name as a definition's file.
        config: the host configuration the tools see through ``ctx.services`` (``[servers.<name>]``
            tables, storage, limits, path rules), as TOML-shaped data or a ``Config``; rooted at
            the server's root. Default: no storage, no tables. The server is not configured
            from it: configure it as the host would before the check.
        plugins: the plugin manager behind ``ctx.services.call_hook`` (for hooks a plugin
            declares); default: one with the built-ins only.
    """
    if not isinstance(server, MCPServerBase):
        raise TypeError(f"check_server expects an MCPServerBase instance, got {type(server).__name__}")
    manager = scratch_host(host_config(config, server.root), plugins, [server])
    try:
        return check_server_with_host(
            server,
            manager,
            examples=examples,
            raise_on_failure=raise_on_failure,
            close=close,
            call_timeout=call_timeout,
            progress=progress,
            arguments=arguments,
            definition_packages=definition_packages,
        )
    finally:
        release_host(manager)


def _left_running(before: set[int], where: str) -> list[str]:
    """A problem for child processes a tool started and left running (they are stopped here)."""
    left = [pid for pid in descendants() if pid not in before]
    if not left:
        return []
    shown = ", ".join(f"{pid} ({command_line(pid)[:60]})" for pid in left[:5])
    stop_processes(left)
    return [
        f"{where}: left {len(left)} child process(es) running after its calls returned: {shown}; a tool waits for "
        "what it starts (or uses entropic_mcp.toolkit.run_process), else the processes outlive the host"
    ]


def check_server_with_host(
    server: MCPServerBase,
    manager: ServerManager,
    *,
    examples: int,
    raise_on_failure: bool,
    close: bool,
    call_timeout: float,
    progress: Progress | None,
    arguments: dict[str, list[Any]] | None,
    definition_packages: tuple[str, ...],
) -> list[str]:
    """``check_server`` with the host behind the tools' ``ctx.services`` given."""
    say = progress or (lambda line: None)
    problems: list[str] = []
    if not TOOL_NAME.match(server.name or "") or "." in server.name:
        problems.append(f"server name {server.name!r} is not a valid tool prefix")
    listing = server.list_tools()
    if not isinstance(listing, list) or [t.get("name") for t in listing] != list(server.tools):
        problems.append(f"{server.name}: list_tools() does not list the registered tools in order")
    if not server.tools:
        problems.append(f"{server.name}: the server has no tools (register_tool in __init__)")
    found_in_definitions, unusable = _check_definitions(server, tuple(definition_packages))
    problems.extend(found_in_definitions)
    problems.extend(_check_configure(server))
    for name, tool in server.tools.items():
        if name in unusable:
            continue
        valid, generation = valid_arguments(tool.definition.input_schema, examples)
        problems.extend(f"{_tool_where(server, name, tool)}: {p}" for p in generation)
        if arguments is not None:
            arguments[name] = valid
        say(f"{server.name}.{name}: {len(valid)} schema-valid argument sets")
        before = set(descendants())
        found = _exercise_tool(server, name, tool, valid, manager, call_timeout)
        problems.extend(found)
        for args in valid[:3]:
            problems.extend(_check_own_pattern(server, name, args))
        if not any("did not return within" in p for p in found):  # else calling it again would only block again
            say(f"{server.name}.{name}: {len(JUNK) + min(3, len(valid))} calls through execute, junk included")
            problems.extend(asyncio.run(_through_execute(server, name, valid[:3] + list(JUNK), manager, call_timeout)))
        problems.extend(_left_running(before, _tool_where(server, name, tool)))
    if close:
        try:
            server.close()
            server.close()
        except Exception as exc:
            problems.append(f"{server.name}: close() is not idempotent: {describe(exc)}")
    if problems and raise_on_failure:
        raise ConformanceError(f"{len(problems)} problem(s):\n" + "\n".join(f"- {p}" for p in problems))
    return problems
