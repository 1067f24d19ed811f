"""MCPServerBase: registration, listing, and the execute semantics every server shares."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from pathlib import Path
from time import perf_counter
from typing import Any, ClassVar

import orjson

from ._access import AccessLevel
from ._context import CallContext
from ._directives import ContextAnchor
from ._envelope import ServerResponse, ToolResult, dumps
from ._errors import ConfigError, DuplicateNameError, ToolDefinitionError, ToolError
from ._isolation import describe, plugin_of_module, plugin_of_traceback, reraise_host_stop
from ._pipeline._deadlines import LOOP_BLOCK_SECONDS, StepTimer
from ._tools import TOOL_NAME, ToolBase

log = logging.getLogger("entropic_mcp")

#: Keys every ``[servers.<name>]`` table may hold, whatever the server: ``MCPServerBase.configure``
#: applies them and ``toolkit.settings_from_table`` lets them through.
SERVER_BASE_KEYS = frozenset({"timeout_seconds", "max_threads"})


async def _in_worker_thread(pool: Any, function: Any, *args: Any) -> Any:
    """Run a synchronous tool in its server's worker pool; a cancelled caller stops waiting.

    The thread itself runs on (Python cannot stop it); the tool sees ``ctx.cancelled``.
    """
    import asyncio
    import contextvars

    # The tool sees the caller's context variables (what asyncio.to_thread does), so a hook it
    # triggers from the thread — an outside-root approval — knows which call it belongs to.
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(pool, context.run, function, *args)


def normalize_args(raw: object) -> dict[str, Any]:
    """``None``, blank text, ``null``, non-object JSON and unparseable text become ``{}``."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, (str, bytes, bytearray)):
        if not raw.strip():
            return {}
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


class MCPServerBase:
    """A server of tools. Subclasses register tools in ``__init__`` and override what they must.

    Args:
        name: the server name (also the tool prefix); defaults to the class attribute ``name``.
        root: the directory a directory-aware server works in.
    """

    name: ClassVar[str] = ""
    #: Seconds a call may run before the pipeline cancels it; None = no pipeline timeout.
    default_timeout_seconds: float | None = 60.0
    #: Config keys ``configure`` accepts besides ``SERVER_BASE_KEYS`` (``timeout_seconds``, ``max_threads``).
    config_keys: ClassVar[frozenset[str]] = frozenset()
    #: Worker threads for this server's synchronous tools (``[servers.<name>] max_threads``).
    max_threads: int = 8
    #: False for a server whose tools are only known once it runs (an external MCP server): the
    #: host does not wait for them at load; their schemas are compiled on first use instead.
    tools_at_start: ClassVar[bool] = True

    def __init__(self, name: str | None = None, *, root: str | Path | None = None) -> None:
        if name is not None:
            self.name = name  # type: ignore[misc]
        if not isinstance(self.name, str) or not TOOL_NAME.match(self.name) or "." in self.name:
            raise ValueError(f"invalid server name {self.name!r}: use letters, digits, '_' or '-'")
        self._tools: dict[str, ToolBase] = {}
        self._is_async: dict[str, bool] = {}
        self.root = Path(root).resolve() if root is not None else Path.cwd().resolve()
        self.closed = False
        self._pool: Any = None

    # -- registration and listing -------------------------------------------------------

    def register_tool(self, tool: ToolBase) -> None:
        if isinstance(tool, type):
            raise TypeError(
                f"register_tool got the class {tool.__name__} — did you mean an instance, {tool.__name__}()?"
            )
        if not isinstance(tool, ToolBase):
            raise TypeError(f"register_tool expects a ToolBase instance, got {type(tool).__name__}")
        name = tool.name
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise ToolDefinitionError(
                f"server {self.name!r}: {type(tool).__name__} has an invalid tool name {name!r}: names match "
                "^[A-Za-z0-9_-]{1,64}$ (no dots, slashes or spaces; the server prefix is added for you)"
            )
        existing = self._tools.get(tool.name)
        if existing is not None:
            raise DuplicateNameError(
                f"server {self.name!r} already has a tool named {tool.name!r} "
                f"({type(existing).__name__}); {type(tool).__name__} cannot register the same name"
            )
        self._tools[tool.name] = tool
        self._is_async[tool.name] = inspect.iscoroutinefunction(tool.execute)

    @property
    def tools(self) -> Mapping[str, ToolBase]:
        return self._tools

    def get_tool(self, tool_name: str) -> ToolBase | None:
        return self._tools.get(tool_name)

    def list_tools(self) -> list[dict[str, Any]]:
        """The tools as MCP tool objects, in registration order (names without the prefix)."""
        return [tool.to_mcp() for tool in self._tools.values()]

    # -- execution ---------------------------------------------------------------------------

    async def execute(self, tool_name: str, raw_args: object, ctx: CallContext | None = None) -> ServerResponse:
        """Run one call: normalise arguments, dispatch, anchor on success; never raises."""
        tool = self._tools.get(tool_name)
        if tool is None:
            return ServerResponse.failure(f"Error: unknown tool '{self.name}.{tool_name}'")
        args = raw_args if type(raw_args) is dict else normalize_args(raw_args)
        if ctx is None:
            ctx = CallContext()
        if not ctx.validated:
            # Called bare (a test, a host without the pipeline): the same schema check the pipeline
            # makes, so a tool can always trust its arguments' shape.
            try:
                args = tool.validator.coerce(args)
                problem = tool.validator.validate(args)
            except (UnicodeError, TypeError, ValueError) as exc:  # e.g. a lone surrogate in a string
                problem = f"the arguments are not valid JSON text ({type(exc).__name__})"
            if problem is not None:
                return ServerResponse.refusal(
                    "invalid_args", f"{problem}. Fix the arguments of '{self.name}.{tool_name}' and call it again."
                )
        try:
            run = tool.execute
            is_async = self._is_async.get(tool_name)
            if is_async is None:  # a subclass that filled _tools itself
                is_async = inspect.iscoroutinefunction(run)
            if is_async:
                # The first step runs here, timed: most tools finish in it, and then no StepTimer
                # (a generator per call) is made. One that awaits goes on under the timer.
                coro: Any = run(args, ctx)
                start = perf_counter()
                try:
                    yielded = coro.send(None)
                except StopIteration as stop:
                    value = stop.value
                    self._held_loop(tool, perf_counter() - start)
                except BaseException:
                    self._held_loop(tool, perf_counter() - start)
                    raise
                else:
                    timer = StepTimer(coro, yielded, perf_counter() - start)
                    try:
                        value = await timer
                    finally:
                        self._held_loop(tool, timer.longest)
            else:
                pool = getattr(self, "_pool", None)
                if pool is None:
                    from ._workers import WorkerPool

                    pool = self._pool = WorkerPool(self.max_threads, f"entropic-mcp-{self.name}")
                value = await _in_worker_thread(pool, run, args, ctx)
            response = ServerResponse._make(value) if type(value) is str else self._to_response(tool, value)
            if response.is_error:
                return response
            key = tool.anchor_key(args)
            if key and not any(isinstance(d, ContextAnchor) and d.key == key for d in response.directives):
                response = ServerResponse._make(
                    response.result,
                    (*response.directives, ContextAnchor(key=key, content=response.result)),
                    False,
                    response.structured,
                    response.content,
                )
            return response
        except ToolError as exc:
            return ServerResponse.refusal(exc.code, exc.message, **exc.extra)
        except BaseException as exc:  # the barrier: one tool never takes the turn down, nor the host
            reraise_host_stop(exc)
            log.debug("tool %s.%s raised", self.name, tool_name, exc_info=True)
            return ServerResponse.failure(failure_text(f"{self.name}.{tool_name}", tool, exc))

    def _held_loop(self, tool: ToolBase, longest: float) -> None:
        if longest >= LOOP_BLOCK_SECONDS:
            log.warning(
                "async tool %s.%s blocked the event loop for %.1f s without awaiting: every other call "
                "waited, and no timeout could fire (time.sleep or blocking I/O in an async def; await "
                "anyio.sleep, or make execute a plain def so it runs in a worker thread)",
                self.name,
                tool.name,
                longest,
            )

    def _to_response(self, tool: ToolBase, value: object) -> ServerResponse:
        if type(value) is str:
            return ServerResponse._make(value)
        if isinstance(value, str):
            return ServerResponse(result=str(value))
        if isinstance(value, ToolResult):
            return ServerResponse._make(
                value.text, value.directives, bool(value.is_error), value.structured, value.content, value.code
            )
        if isinstance(value, ServerResponse):
            return value
        raise TypeError(
            f"returned {type(value).__name__}; a tool returns a str or a ToolResult "
            f"(wrap data with ToolResult.json(...))"
        )

    # -- extension points ---------------------------------------------------------------------

    def permission_pattern(self, tool_name: str, args: Mapping[str, Any]) -> str:
        """The key "always allow" stores and rules match; default: the tool-level name."""
        return f"{self.name}.{tool_name}"

    def skip_duplicate_check(self, tool_name: str) -> bool:
        return False

    def access_level(self, tool_name: str) -> AccessLevel:
        tool = self._tools.get(tool_name)
        return tool.required_access_level if tool is not None else AccessLevel.WRITE

    def configure(self, config: Mapping[str, Any]) -> None:
        """Validate and apply the server's ``[servers.<name>]`` table.

        The base accepts ``SERVER_BASE_KEYS`` (``timeout_seconds``, ``max_threads``); subclasses
        list their own keys in ``config_keys`` and call ``super().configure(config)`` before
        reading them.
        """
        if not isinstance(config, Mapping):
            raise ConfigError(f"[servers.{self.name}] must be a table, got {type(config).__name__}")
        allowed = self.config_keys | SERVER_BASE_KEYS
        unknown = sorted(set(config) - allowed)
        if unknown:
            raise ConfigError(
                f"[servers.{self.name}] unknown key(s) {', '.join(map(repr, unknown))}; "
                f"expected one of: {', '.join(sorted(allowed))}"
            )
        if "timeout_seconds" in config:
            value = config["timeout_seconds"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"[servers.{self.name}] timeout_seconds: expected a positive number, got {value!r}")
            self.default_timeout_seconds = float(value)
        if "max_threads" in config:
            value = config["max_threads"]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 256:
                raise ConfigError(
                    f"[servers.{self.name}] max_threads: expected a whole number from 1 to 256, got {value!r}"
                )
            self.max_threads = value

    def set_working_dir(self, path: str | Path) -> bool:
        candidate = Path(path)
        if not candidate.is_dir():
            return False
        self.root = candidate.resolve()
        return True

    def end_conversation(self, conversation_id: str) -> None:
        """Release per-conversation state; servers that keep some override this (or
        ``conversation_ended``, which also reaches the host's services)."""

    def conversation_ended(self, ctx: CallContext) -> None:
        """The host ended ``ctx.conversation_id``: release what this server keeps for it.

        ``ctx.services`` reaches the host's store, for state kept there (``StateStore``). The
        default calls ``end_conversation(ctx.conversation_id)``.
        """
        self.end_conversation(ctx.conversation_id)

    def close(self) -> None:
        """Release resources; idempotent. Calls still running in worker threads are abandoned."""
        self.closed = True
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(wait=False)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} tools={list(self._tools)}>"


def failure_text(name: str, tool: ToolBase, exc: BaseException) -> str:
    """What the model reads of a tool that raised: the fault, and whose it is.

    A fault raised in another plugin's code (a storage backend's, a helper plugin's) names that
    plugin, not the tool that happened to call it.
    """
    what = str(exc) if isinstance(exc, Exception) else describe(exc)
    text = f"Error: tool '{name}' failed: {what}"
    owner = plugin_of_traceback(exc)
    if owner is not None and owner != plugin_of_module(type(tool).__module__):
        text += (
            f" (raised by plugin {owner!r}, not by '{name}' itself: tell the user plugin {owner!r} is broken; "
            "calling this tool again will fail the same way)"
        )
    return text


def error_text(code: str, message: str, **extra: Any) -> str:
    return dumps({"error": code, "message": message, **extra})
