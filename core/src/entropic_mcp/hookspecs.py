"""Every hook of entropic-mcp, grouped by lifecycle.

Plugins implement these with ``entropic_mcp.hookimpl``. Specs only grow: arguments are added
(pluggy lets older implementations ignore them), never renamed or removed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from ._calls import ApprovalDecision, ApprovalRequest, OutsideRootRequest, Refuse, ReplaceArgs, ToolCall
    from ._config import PluginConfig
    from ._directives import DirectiveHandlerSpec
    from ._pipeline import CallOutcome
    from ._server import MCPServerBase

#: The entry-point group a plugin distribution declares its hook module in (``pyproject.toml``:
#: ``[project.entry-points."entropic_mcp.plugins"]``).
ENTRY_POINT_GROUP = "entropic_mcp.plugins"

hookspec = pluggy.HookspecMarker("entropic_mcp")


# -- registration ------------------------------------------------------------------------------


@hookspec(historic=True)
def entropic_mcp_add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    """Let a plugin declare hooks of its own.

    Called by the plugin manager once per plugin as it registers (historic: a plugin
    registered later still sees the call).

    Args:
        plugin_manager: the pluggy manager; call ``plugin_manager.add_hookspecs(module)``.

    Returns:
        Nothing; the return value is ignored.

    Example::

        @hookimpl
        def entropic_mcp_add_hookspecs(plugin_manager):
            from my_plugin import hookspecs
            plugin_manager.add_hookspecs(hookspecs)
    """


@hookspec
def entropic_mcp_servers(config: PluginConfig) -> MCPServerBase | Iterable[MCPServerBase] | None:
    """Register the plugin's server(s).

    Called by the ServerManager once at start-up, for every enabled plugin. The manager
    then calls each server's ``configure`` with its ``[servers.<name>]`` table.

    Args:
        config: the project root (``config.root``), every server table
            (``config.table(name)``) and the whole validated config (``config.settings``).

    Returns:
        A server, an iterable of servers, or ``None`` for none. All results are collected;
        two servers with one name is a start-up error naming both providers.

    Example::

        @hookimpl
        def entropic_mcp_servers(config):
            return EchoServer(root=config.root)
    """


@hookspec
def entropic_mcp_storage_backends() -> Any:
    """Offer storage backends by name.

    Called by the ServerManager once, when storage is first needed.

    Returns:
        A ``StorageBackendSpec(name=..., factory=...)`` or an iterable of them; ``None`` for
        none. All results are collected; ``[storage] backend`` picks one by name. The factory
        is called with the ``StorageConfig`` and returns a ``StorageBackend`` — one that also
        implements ``StateStore`` (``load_state``/``save_state``) keeps plugins' per-conversation
        state, such as ``entropic.todo`` lists, shared by every worker on the store.

    Example::

        @hookimpl
        def entropic_mcp_storage_backends():
            return StorageBackendSpec(name="memory", factory=lambda config: MemoryStorage())
    """


# -- policy ------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def entropic_mcp_permission_pattern(server: MCPServerBase, tool: str, args: dict[str, Any]) -> str | None:
    """Decide the permission pattern of a call (what rules match and "always allow" stores).

    Called by the pipeline once per call that reaches the permission stage — only for servers
    the implementing plugin itself provides (hooks are global, but a plugin never answers for
    another plugin's server). Deny rules are still checked against the server's own
    permission parts, so a pattern can narrow or widen allow rules but never dodge a deny.

    Args:
        server: the server that owns the tool.
        tool: the tool name without the server prefix.
        args: the validated arguments.

    Returns:
        The pattern, ``"<server>.<tool>"`` or ``"<server>.<tool>:<key>"``, e.g.
        ``"bash.execute:ls *"``; ``None`` lets the next implementation (and finally the server's
        own parts) decide. The first non-None result wins. An exception, a non-string, or a
        pattern naming another tool denies the call (``refused_by_hook``, attributed to the
        plugin).

    Example::

        @hookimpl
        def entropic_mcp_permission_pattern(server, tool, args):
            if server.name == "filesystem" and tool == "read_file":
                return "filesystem.read_file"    # tool-level, whatever the path
    """


@hookspec(firstresult=True)
def entropic_mcp_skip_duplicate_check(server: MCPServerBase, tool: str) -> bool | None:
    """Decide whether a READ tool's repeated identical answers are flagged.

    Called by the pipeline once per READ call that succeeded, only for servers the implementing
    plugin provides. Results are never served from a cache either way; the flag only adds the
    ``duplicate_call`` notice (and, the third time in a row, STOP).

    Args:
        server: the server that owns the tool.
        tool: the tool name without the server prefix.

    Returns:
        ``True`` to never flag the tool's repeats, ``False`` to flag them, ``None`` to defer to the
        server's own ``skip_duplicate_check``. The first non-None result wins; an exception or a
        non-bool is logged and skipped.

    Example::

        @hookimpl
        def entropic_mcp_skip_duplicate_check(server, tool):
            return True if server.name == "clock" else None
    """


@hookspec(firstresult=True)
def entropic_mcp_approve_tool_call(request: ApprovalRequest) -> ApprovalDecision | str | None:
    """Answer an "ask" permission decision.

    Called by the pipeline once per call whose permission rules say "ask".

    Args:
        request: the tool, arguments, pattern, identity and conversation.

    Returns:
        An ``ApprovalDecision`` or one of ``"allow_once"``, ``"deny_once"``,
        ``"always_allow"``, ``"always_deny"``; ``None`` when this approver cannot answer. The
        first non-None result wins; with no answer at all the call is denied (fail closed).

    Example::

        @hookimpl
        def entropic_mcp_approve_tool_call(request):
            return "allow_once" if request.tool.startswith("git.") else None
    """


@hookspec(firstresult=True)
def entropic_mcp_approve_outside_root(request: OutsideRootRequest) -> bool | None:
    """Answer whether a tool may use a path outside the project root, for this call only.

    Called by directory-aware servers (filesystem, bash ``working_dir``) once per call whose
    canonical path is outside the root under ``allow_outside_root = "optional"``.

    Args:
        request: the canonical path, tool, access (``"read"``/``"write"``), root, conversation.

    Returns:
        ``True`` to allow, ``False`` to reject; ``None`` when this approver cannot answer. The
        first non-None result wins; with no answer the path is refused.

    Example::

        @hookimpl
        def entropic_mcp_approve_outside_root(request):
            return request.access == "read" and request.path.is_relative_to("/usr/share/doc")
    """


# -- calls -------------------------------------------------------------------------------------


@hookspec
def entropic_mcp_before_tool_call(call: ToolCall) -> Refuse | ReplaceArgs | None:
    """Refuse a call or replace its arguments before anything else runs.

    Called by the pipeline once per call, first.

    Args:
        call: the tool name, server, tool, arguments and call context.

    Returns:
        ``Refuse(reason=...)`` to refuse (kind ``rejected_hook``), ``ReplaceArgs(args=...)``
        to run with other arguments (never another tool), ``None`` to let it through. Each
        implementation is called in turn: a refusal ends the call; the last replacement
        applies. An exception or any other return value refuses the call (failing closed),
        attributed to the plugin in the message, the log and ``outcome.hook_faults``.

    Example::

        @hookimpl
        def entropic_mcp_before_tool_call(call):
            if call.name == "bash.execute" and "sudo" in call.args.get("command", ""):
                return Refuse(reason="sudo is not available here")
    """


@hookspec
def entropic_mcp_after_tool_call(call: ToolCall, outcome: CallOutcome) -> str | None:
    """Observe a finished call; may rewrite the result text.

    Called by the pipeline once per call, last, whatever its kind.

    Args:
        call: the call as it ran (arguments after any replacement).
        outcome: the envelope, kind, elapsed time and permission decision.

    Returns:
        A new result text, or ``None`` to leave it. All results are collected; the last
        non-None one wins. An exception or a non-string is logged, recorded in
        ``outcome.hook_faults`` and skipped; the call's result stands.

    Example::

        @hookimpl
        def entropic_mcp_after_tool_call(call, outcome):
            metrics.observe(call.name, outcome.elapsed_ms)
    """


# -- host --------------------------------------------------------------------------------------


@hookspec
def entropic_mcp_directive_handlers() -> DirectiveHandlerSpec | Iterable[DirectiveHandlerSpec] | None:
    """Provide host-side handlers for directive types.

    Called by ``ServerManager.directive_processor()`` once per processor it builds.

    Returns:
        A ``DirectiveHandlerSpec(type=..., handler=...)`` or an iterable of them; ``None`` for
        none. All results are collected; a later registration for the same type replaces an
        earlier one (the built-in delegation handlers run first, so a host can override them).

    Example::

        @hookimpl
        def entropic_mcp_directive_handlers():
            return DirectiveHandlerSpec(type="phase_change", handler=lambda d, ctx: print(d.phase))
    """
