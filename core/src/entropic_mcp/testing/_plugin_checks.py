"""``check_plugin``: load a plugin as the host would, call every hook it implements, check its servers.

Every problem names the plugin, the hook (or server and tool) and the file and line it comes
from, so a report points at the code to fix.
"""

from __future__ import annotations

import contextlib
import difflib
import tempfile
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .. import hookspecs
from .._access import AccessLevel
from .._calls import (
    ApprovalDecision,
    ApprovalRequest,
    OutsideRootRequest,
    ReadOnlyArguments,
    Refuse,
    ReplaceArgs,
    ToolCall,
    frozen,
)
from .._config import Config, PluginConfig
from .._context import CallContext
from .._directives import DirectiveHandlerSpec
from .._envelope import ServerResponse
from .._errors import ConfigError
from .._isolation import note_plugin_module, reraise_host_stop, watching_interrupts
from .._manager import ServerManager
from .._pipeline import CallOutcome
from .._plugins import ENTRY_POINT_GROUP, Plugins, misspelled_optional_hooks
from .._server import MCPServerBase
from .._stdout import StdoutGuard, guard_stdout
from .._tools import ToolBase, ToolDefinition
from ._checks import (
    CALL_LIMIT_SECONDS,
    ConformanceError,
    Progress,
    check_server_with_host,
    host_config,
    pattern_problem,
    release_host,
    scratch_host,
)
from ._where import describe, of_function

HOOK_NAMES = frozenset(name for name in dir(hookspecs) if name.startswith("entropic_mcp_"))
PREFIX = "entropic_mcp_"


class NoSuchPlugin(LookupError):
    """``check_plugin`` was given the name of a plugin that is not installed."""


class _ProbeTool(ToolBase):
    definition = ToolDefinition(name="probe", description="A tool of another plugin.", input_schema={"type": "object"})
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        return "probe"


class _OtherServer(MCPServerBase):
    """A server no plugin under test owns: hooks are global, and must leave it alone."""

    name = "kit_probe_other"

    def __init__(self, root: Path) -> None:
        super().__init__(root=root)
        self.register_tool(_ProbeTool())


@attrs.define
class _Report:
    plugin: str
    problems: list[str] = attrs.field(factory=list)
    raised: set[str] = attrs.field(factory=set)

    def hook(self, hook: str, function: Any, message: str) -> None:
        self.problems.append(f"plugin {self.plugin!r}: hook {hook} ({of_function(function)}): {message}")

    def add(self, message: str) -> None:
        self.problems.append(f"plugin {self.plugin!r}: {message}")


def load_installed(name: str) -> tuple[object | None, str | None]:
    """The plugin object of entry point ``name`` and None, or None and why it failed to import."""
    import importlib_metadata

    found = [ep for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        installed = sorted({ep.name for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP)})
        raise NoSuchPlugin(
            f"no installed plugin {name!r} (entry point group {ENTRY_POINT_GROUP!r}); "
            f"installed: {', '.join(installed) or 'none'}"
        )
    entry = found[0]
    note_plugin_module(getattr(entry, "module", None) or entry.value.partition(":")[0], name)
    guard = StdoutGuard(announce=False)
    try:
        with watching_interrupts(), guard_stdout(guard):
            plugin = entry.load()
    except BaseException as exc:  # a plugin module may even call sys.exit at import
        reraise_host_stop(exc)
        return None, f"import of entry point {entry.name} = {entry.value!r} failed: {describe(exc)}"
    if guard.seen:
        printed = next(iter(guard.seen.values()))
        return plugin, (
            f"printed to stdout while it was imported ({printed[:80]!r}): stdout carries MCP on stdio and "
            "--json output, so the host sends it to stderr; log to stderr (logging) instead"
        )
    return plugin, None


def _register(report: _Report, plugins: Plugins, plugin: object) -> bool:
    marked = [name for name in dir(plugin) if name.startswith(PREFIX)]
    for name in marked:
        function = getattr(plugin, name, None)
        if callable(function) and not hasattr(function, "entropic_mcp_impl"):
            report.add(f"{name} ({of_function(function)}) is not marked @hookimpl, so it is never called")
    try:
        plugins.pm.register(plugin, name=report.plugin)
    except BaseException as exc:
        reraise_host_stop(exc)
        report.add(f"registration failed: {describe(exc)}")
        return False
    for hook, meant in misspelled_optional_hooks(plugins.pm, plugin):
        impl = next(i for i in getattr(plugins.pm.hook, hook).get_hookimpls() if i.plugin is plugin)
        report.hook(
            hook,
            impl.function,
            f"is marked optionalhook but no plugin declares it, so it is never called; did you mean {meant}?",
        )
    for caller in plugins.pm.get_hookcallers(plugin) or ():
        if caller.has_spec() or caller.name in HOOK_NAMES:
            continue
        impl = next(i for i in caller.get_hookimpls() if i.plugin is plugin)
        if impl.optionalhook:
            continue
        guess = difflib.get_close_matches(caller.name, sorted(HOOK_NAMES), n=1)
        hint = f"; did you mean {guess[0]}?" if guess else ""
        report.hook(caller.name, impl.function, f"is not an entropic-mcp hook, so it is never called{hint}")
    return True


def _implementations(plugins: Plugins, plugin: object) -> dict[str, Any]:
    return {
        caller.name: next(i.function for i in caller.get_hookimpls() if i.plugin is plugin)
        for caller in plugins.pm.get_hookcallers(plugin) or ()
        if caller.has_spec()
    }


def _call(report: _Report, hook: str, function: Any, **kwargs: Any) -> tuple[bool, Any]:
    try:
        return True, function(**kwargs)
    except BaseException as exc:
        reraise_host_stop(exc)
        if hook not in report.raised:  # once per hook: the first call shows the fault
            report.raised.add(hook)
            if isinstance(exc, ReadOnlyArguments):
                report.hook(
                    hook,
                    function,
                    f"tried to change the call's arguments in place ({describe(exc)}); the host shows hooks a "
                    "read-only copy, so the edit would never run — return ReplaceArgs from "
                    "entropic_mcp_before_tool_call instead",
                )
            else:
                report.hook(hook, function, f"raised {describe(exc)}")
        return False, None


def _as_list(value: object, kind: type) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, kind):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        return list(value)
    return [value]


def _build_servers(
    report: _Report, function: Any, settings: Config, root: Path, taken: Mapping[str, str]
) -> list[MCPServerBase]:
    hook = "entropic_mcp_servers"
    ok, value = _call(report, hook, function, config=PluginConfig(root=root, settings=settings))
    if not ok:
        return []
    try:
        results = _as_list(value, MCPServerBase)
    except BaseException as exc:  # a generator that raises part-way
        reraise_host_stop(exc)
        report.hook(hook, function, f"raised {describe(exc)}")
        return []
    servers: list[MCPServerBase] = []
    seen: dict[str, MCPServerBase] = {}
    for server in results:
        if isinstance(server, type) and issubclass(server, MCPServerBase):
            report.hook(hook, function, f"returned the class {server.__name__} — did you mean an instance?")
            continue
        if not isinstance(server, MCPServerBase):
            report.hook(hook, function, f"returned {type(server).__name__}, not an MCPServerBase")
            continue
        if server.name in seen:
            report.hook(hook, function, f"returned two servers named {server.name!r}; server names are unique")
            continue
        if server.name in taken:
            report.hook(
                hook,
                function,
                f"server name {server.name!r} is also registered by plugin {taken[server.name]!r}; "
                "a host with both installed lists one of them as failed — pick another name",
            )
        seen[server.name] = server
        try:
            server.configure(settings.server_table(server.name))
        except ConfigError as exc:
            report.add(f"server {server.name}: configure ({of_function(server.configure)}) refused its table: {exc}")
            continue
        except BaseException as exc:
            reraise_host_stop(exc)
            report.add(
                f"server {server.name}: configure ({of_function(server.configure)}) raised {describe(exc)}; "
                "a bad [servers.<name>] table raises ConfigError naming the key"
            )
            continue
        servers.append(server)
    return servers


def _check_answer(report: _Report, hook: str, function: Any, kinds: tuple[type, ...], what: str, **kwargs: Any) -> Any:
    ok, value = _call(report, hook, function, **kwargs)
    if ok and value is not None and not isinstance(value, kinds):
        report.hook(hook, function, f"returned {value!r} ({type(value).__name__}); expected {what} or None")
    return value if ok else None


def _exercise_hooks(
    report: _Report,
    hooks: Mapping[str, Any],
    servers: list[MCPServerBase],
    arguments: Mapping[str, Mapping[str, list[Any]]],
    root: Path,
    manager: ServerManager,
) -> None:
    """Call each implemented hook for the plugin's own servers and for a server it does not own."""
    other = _OtherServer(root)
    ctx = CallContext(conversation_id="check-hooks", manager=manager)
    calls: list[tuple[MCPServerBase, str, dict[str, Any]]] = [
        (server, tool, dict((arguments.get(server.name, {}).get(tool) or [{}])[0]))
        for server in servers
        for tool in server.tools
    ]
    function = hooks.get("entropic_mcp_permission_pattern")
    if function is not None:
        for server, tool, args in calls:
            value = _check_answer(
                report,
                "entropic_mcp_permission_pattern",
                function,
                (str,),
                "a str",
                server=server,
                tool=tool,
                args=frozen(args),
            )
            problem = pattern_problem(server.name, tool, value) if isinstance(value, str) else None
            if problem:
                report.hook("entropic_mcp_permission_pattern", function, problem)
        value = _check_answer(
            report, "entropic_mcp_permission_pattern", function, (str,), "a str", server=other, tool="probe", args={}
        )
        if value is not None:
            report.hook(
                "entropic_mcp_permission_pattern",
                function,
                f"answered {value!r} for server {other.name!r}, which is not the plugin's: hooks are called for "
                "every server — return None unless server.name is one of yours",
            )
    function = hooks.get("entropic_mcp_skip_duplicate_check")
    if function is not None:
        for server, tool, _ in calls:
            _check_answer(
                report, "entropic_mcp_skip_duplicate_check", function, (bool,), "a bool", server=server, tool=tool
            )
        value = _check_answer(
            report, "entropic_mcp_skip_duplicate_check", function, (bool,), "a bool", server=other, tool="probe"
        )
        if value is not None:
            report.hook(
                "entropic_mcp_skip_duplicate_check",
                function,
                f"answered {value!r} for server {other.name!r}, which is not the plugin's: return None unless "
                "server.name is one of yours",
            )
    probes = [(s.name, t, a) for s, t, a in calls] + [(other.name, "probe", {})]
    function = hooks.get("entropic_mcp_approve_tool_call")
    if function is not None:
        for server_name, tool, args in probes:
            request = ApprovalRequest(tool=f"{server_name}.{tool}", args=args, pattern=f"{server_name}.{tool}")
            value = _check_answer(
                report,
                "entropic_mcp_approve_tool_call",
                function,
                (ApprovalDecision, str),
                "an answer",
                request=request,
            )
            if isinstance(value, str) and ApprovalDecision.coerce(value) is None:
                report.hook("entropic_mcp_approve_tool_call", function, f"returned the unknown answer {value!r}")
    function = hooks.get("entropic_mcp_approve_outside_root")
    if function is not None:
        request_path = OutsideRootRequest(
            path=root.parent / "outside", tool=f"{other.name}.probe", access="read", root=root
        )
        _check_answer(report, "entropic_mcp_approve_outside_root", function, (bool,), "a bool", request=request_path)
    before = hooks.get("entropic_mcp_before_tool_call")
    after = hooks.get("entropic_mcp_after_tool_call")
    for server_name, tool, args in probes:
        call = ToolCall(name=f"{server_name}.{tool}", server=server_name, tool=tool, args=args, context=ctx)
        if before is not None:
            _check_answer(
                report, "entropic_mcp_before_tool_call", before, (Refuse, ReplaceArgs), "Refuse/ReplaceArgs", call=call
            )
        if after is not None:
            outcome = CallOutcome(
                name=call.name, response=ServerResponse(result="ok"), kind="ok", elapsed_ms=1.0, conversation_id="check"
            )
            _check_answer(report, "entropic_mcp_after_tool_call", after, (str,), "a str", call=call, outcome=outcome)
    function = hooks.get("entropic_mcp_directive_handlers")
    if function is not None:
        ok, value = _call(report, "entropic_mcp_directive_handlers", function)
        for item in _as_list(value, DirectiveHandlerSpec) if ok else []:
            if not isinstance(item, DirectiveHandlerSpec):
                report.hook(
                    "entropic_mcp_directive_handlers",
                    function,
                    f"returned {type(item).__name__}, not a DirectiveHandlerSpec",
                )
    function = hooks.get("entropic_mcp_storage_backends")
    if function is not None:
        from .._storage import StorageBackendSpec

        ok, value = _call(report, "entropic_mcp_storage_backends", function)
        for item in _as_list(value, StorageBackendSpec) if ok else []:
            if not isinstance(item, StorageBackendSpec):
                report.hook(
                    "entropic_mcp_storage_backends",
                    function,
                    f"returned {type(item).__name__}, not a StorageBackendSpec",
                )
            elif item.name in ("tinydb", "none"):
                report.hook(
                    "entropic_mcp_storage_backends", function, f"offers a backend named {item.name!r}, a built-in name"
                )
            else:
                _exercise_backend(report, function, item, manager.config)


def _exercise_backend(report: _Report, function: Any, spec: Any, settings: Config) -> None:
    """Open the backend in the scratch project and make one round trip of a conversation.

    A backend that needs settings the scratch config lacks (``ConfigError`` when opened) is left
    out: its own contract tests (``entropic_mcp.testing.StorageContract``) exercise it.
    """
    hook = "entropic_mcp_storage_backends"
    try:
        backend = spec.factory(settings)
    except ConfigError:
        return
    except BaseException as exc:
        reraise_host_stop(exc)
        report.hook(hook, spec.factory, f"storage backend {spec.name!r} failed to open: {describe(exc)}")
        return
    step = "create_conversation"
    try:
        conversation = backend.create_conversation("entropic-mcp check-plugin")
        step = "save_messages"
        backend.save_messages(conversation, [{"role": "user", "content": "hello"}])
        step = "load_conversation"
        backend.load_conversation(conversation)
        step = "list_conversations"
        backend.list_conversations()
        step = "delete_conversation"
        backend.delete_conversation(conversation)
    except BaseException as exc:
        reraise_host_stop(exc)
        report.hook(
            hook,
            function,
            f"storage backend {spec.name!r}: {step} raised {describe(exc)}; under serve every tool that uses the "
            "store fails with it (contract: entropic_mcp.testing.StorageContract)",
        )
    finally:
        with contextlib.suppress(Exception):
            backend.close()


def check_plugin(
    module: types.ModuleType | object | str,
    *,
    root: str | Path | None = None,
    config: Mapping[str, Any] | Config | None = None,
    examples: int = 50,
    raise_on_failure: bool = True,
    call_timeout: float = CALL_LIMIT_SECONDS,
    progress: Progress | None = None,
    taken: Mapping[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> list[str]:
    """Check a plugin: its hooks, and ``check_server`` on every server it registers.

    The plugin is registered alone in a fresh plugin manager; every hook it implements is
    called — for its own servers and for a server of another plugin, which it must leave alone
    — and every answer's type is checked. A misspelled hook (an ``optionalhook`` one too), a
    function missing ``@hookimpl``, a plugin with no hooks, a servers hook that returns no
    server, a ``configure`` that raises anything but ``ConfigError``, a hook that changes the
    arguments it is shown, an ``async`` tool that blocks its event loop, a tool that leaves child
    processes running, a storage backend that fails a round trip, and anything the plugin prints
    to stdout (at import or in a hook or tool) are all reported.

    Args:
        module: the plugin object (usually a module), or the name of an installed plugin
            (its ``entropic_mcp.plugins`` entry point), which is imported here: an import
            error is then a reported problem.
        root: the directory servers are rooted in (default: a scratch directory).
        config: TOML-shaped config data or a loaded ``Config``; servers get their
            ``[servers.<name>]`` tables from it.
        examples: generated argument sets per tool.
        raise_on_failure: raise ``ConformanceError`` listing every problem instead of returning them.
        call_timeout: seconds one tool call may take before it is cancelled and reported.
        progress: called with one line per step.
        taken: server names already registered by other plugins (name → plugin), to report clashes.
        details: filled with ``hooks`` (the hooks it implements) and ``servers`` (their names).

    Raises:
        NoSuchPlugin: ``module`` names no installed plugin.
    """
    name = module if isinstance(module, str) else getattr(module, "__name__", None) or type(module).__name__
    if isinstance(module, types.ModuleType):
        note_plugin_module(module.__name__, name)
    guard = StdoutGuard(announce=False)
    with guard_stdout(guard):
        problems = _check_plugin(
            module,
            root=root,
            config=config,
            examples=examples,
            call_timeout=call_timeout,
            progress=progress,
            taken=taken,
            details=details,
        )
    for who, text in guard.seen.items():
        if who in (name, "unknown"):
            problems.append(
                f"plugin {name!r}: printed to stdout while its hooks or tools ran ({text[:80]!r}): stdout carries "
                "MCP on stdio and --json output, so the host sends it to stderr; log to stderr (logging) instead"
            )
    return _finish(problems, raise_on_failure)


def _check_plugin(
    module: types.ModuleType | object | str,
    *,
    root: str | Path | None = None,
    config: Mapping[str, Any] | Config | None = None,
    examples: int = 50,
    call_timeout: float = CALL_LIMIT_SECONDS,
    progress: Progress | None = None,
    taken: Mapping[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> list[str]:
    """``check_plugin`` without the stdout guard; returns the problems (a plugin may serve no
    tools — a storage backend — if it implements no ``entropic_mcp_servers``)."""
    say = progress or (lambda line: None)
    scratch = None
    if root is None:
        scratch = tempfile.TemporaryDirectory(prefix="entropic-mcp-check-")
        root = scratch.name
    try:
        if isinstance(module, str):
            name = module
            say(f"importing plugin {name!r}")
            plugin, error = load_installed(name)
        else:
            plugin, error = module, None
            name = getattr(module, "__name__", None) or type(module).__name__
        report = _Report(plugin=name)
        if error is not None:
            report.add(error)
        if plugin is None:
            if error is None:
                report.add("the entry point loaded None")
            return report.problems
        resolved = Path(root).resolve()
        settings = host_config(config, resolved)
        plugins = Plugins(strict=False)
        if not _register(report, plugins, plugin):
            return report.problems
        hooks = _implementations(plugins, plugin)
        say(f"plugin {name!r} implements {', '.join(sorted(hooks)) or 'no hook'}")
        if not hooks and not report.problems:
            report.add("implements no hook: mark the hook functions with @entropic_mcp.hookimpl")
        servers: list[MCPServerBase] = []
        function = hooks.get("entropic_mcp_servers")
        if function is None:
            # Storage backends, approvers, policies: a plugin need not serve tools. One with no
            # hook at all was reported above.
            say(f"plugin {name!r} registers no server (it implements no entropic_mcp_servers)")
        else:
            say("calling entropic_mcp_servers")
            before = len(report.problems)
            servers = _build_servers(report, function, settings, resolved, dict(taken or {}))
            if not servers and len(report.problems) == before:
                report.hook("entropic_mcp_servers", function, "returned no server")
        if details is not None:
            details.update(hooks=sorted(hooks), servers=[server.name for server in servers])
        arguments: dict[str, dict[str, list[Any]]] = {}
        # One host behind every call, as in serve: the plugin's config, its hooks, its servers.
        host = scratch_host(settings, plugins, servers)
        try:
            for server in servers:
                say(f"checking server {server.name!r} ({len(server.tools)} tools)")
                found = check_server_with_host(
                    server,
                    host,
                    examples=examples,
                    raise_on_failure=False,
                    call_timeout=call_timeout,
                    progress=say,
                    arguments=arguments.setdefault(server.name, {}),
                    close=False,
                    definition_packages=(name, getattr(plugin, "__name__", name)),
                )
                report.problems.extend(f"plugin {name!r}: server {p}" for p in found)
            if hooks:
                say("calling the plugin's other hooks for its servers and for another plugin's")
                _exercise_hooks(report, hooks, servers, arguments, resolved, host)
        finally:
            release_host(host)
        for server in servers:
            try:
                server.close()
                server.close()
            except Exception as exc:
                report.add(
                    f"server {server.name}: close() ({of_function(server.close)}) is not idempotent: {describe(exc)}"
                )
        return report.problems
    finally:
        if scratch is not None:
            scratch.cleanup()


def _finish(problems: list[str], raise_on_failure: bool) -> list[str]:
    if problems and raise_on_failure:
        raise ConformanceError(f"{len(problems)} problem(s):\n" + "\n".join(f"- {p}" for p in problems))
    return problems


def installed_server_names(*, exclude: str, config: Config | None = None) -> dict[str, str]:
    """Server name → plugin for every other installed plugin whose servers can be built.

    Plugins that fail to load or build are left out: they are not what is being checked.
    """
    import warnings

    taken: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="entropic-mcp-check-") as scratch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root = Path(scratch).resolve()
        settings = host_config(config, root)
        plugins = Plugins(strict=False, builtins=False)
        try:
            plugins.load_entry_points()
        except Exception:  # a plugin's own failure is recorded; only a config problem lands here
            return taken
        for plugin_name, function in plugins.implementations("entropic_mcp_servers"):
            if plugin_name == exclude:
                continue
            try:
                with guard_stdout():
                    servers = _as_list(function(config=PluginConfig(root=root, settings=settings)), MCPServerBase)
            except BaseException as exc:
                reraise_host_stop(exc)
                continue
            for server in servers:
                if isinstance(server, MCPServerBase):
                    taken.setdefault(server.name, plugin_name)
                    with contextlib.suppress(Exception):
                        server.close()
    return taken
