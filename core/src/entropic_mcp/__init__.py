"""entropic-mcp: a pluggy framework of permissioned MCP tool servers for agent hosts.

This module is the face for plugin authors (tools, servers, hooks) and hosts (a manager, its
configuration, call outcomes). The other audiences have their own: ``entropic_mcp.storage``
(storage-backend authors), ``entropic_mcp.directives`` (what results ask of a host),
``entropic_mcp.toolkit`` (helpers for tools), ``entropic_mcp.hookspecs`` and
``entropic_mcp.testing``.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

if TYPE_CHECKING:  # for type checkers; at run time the names below resolve on first use
    from ._access import AccessLevel as AccessLevel
    from ._calls import ApprovalDecision as ApprovalDecision
    from ._calls import ApprovalRequest as ApprovalRequest
    from ._calls import Refuse as Refuse
    from ._calls import ReplaceArgs as ReplaceArgs
    from ._calls import ToolCall as ToolCall
    from ._config import Config as Config
    from ._config import PluginConfig as PluginConfig
    from ._config import config_from_dict as config_from_dict
    from ._config import load_config as load_config
    from ._context import CallContext as CallContext
    from ._definitions import ToolDefinition as ToolDefinition
    from ._definitions import load_tool_definition as load_tool_definition
    from ._envelope import ServerResponse as ServerResponse
    from ._envelope import ToolResult as ToolResult
    from ._errors import ConfigError as ConfigError
    from ._errors import DuplicateNameError as DuplicateNameError
    from ._errors import EntropicMCPError as EntropicMCPError
    from ._errors import PluginError as PluginError
    from ._errors import ToolDefinitionError as ToolDefinitionError
    from ._errors import ToolError as ToolError
    from ._kinds import ResultKind as ResultKind
    from ._manager import ServerManager as ServerManager
    from ._markers import hookimpl as hookimpl
    from ._outside import OutsideRootRequest as OutsideRootRequest
    from ._pipeline import BatchOutcome as BatchOutcome
    from ._pipeline import CallOutcome as CallOutcome
    from ._pipeline._keys import AccessKeyError as AccessKeyError
    from ._pipeline._keys import AccessKeys as AccessKeys
    from ._plugins import PluginInfo as PluginInfo
    from ._plugins import PluginLoadWarning as PluginLoadWarning
    from ._plugins import Plugins as Plugins
    from ._server import MCPServerBase as MCPServerBase
    from ._services import ToolServices as ToolServices
    from ._tools import ToolBase as ToolBase


# Names resolve on first use, so a command that only lists tools never pays for the protocol
# stack, the schema validator or asyncio. Each public name with the module it lives in (a test
# keeps this table and the type checkers' imports above the same).
_HOMES: dict[str, str] = {
    "AccessKeyError": "._pipeline._keys",
    "AccessKeys": "._pipeline._keys",
    "AccessLevel": "._access",
    "ApprovalDecision": "._calls",
    "ApprovalRequest": "._calls",
    "BatchOutcome": "._pipeline",
    "CallContext": "._context",
    "CallOutcome": "._pipeline",
    "Config": "._config",
    "ConfigError": "._errors",
    "DuplicateNameError": "._errors",
    "EntropicMCPError": "._errors",
    "MCPServerBase": "._server",
    "OutsideRootRequest": "._outside",
    "PluginConfig": "._config",
    "PluginError": "._errors",
    "PluginInfo": "._plugins",
    "PluginLoadWarning": "._plugins",
    "Plugins": "._plugins",
    "Refuse": "._calls",
    "ReplaceArgs": "._calls",
    "ResultKind": "._kinds",
    "ServerManager": "._manager",
    "ServerResponse": "._envelope",
    "ToolBase": "._tools",
    "ToolCall": "._calls",
    "ToolDefinition": "._definitions",
    "ToolDefinitionError": "._errors",
    "ToolError": "._errors",
    "ToolResult": "._envelope",
    "ToolServices": "._services",
    "config_from_dict": "._config",
    "hookimpl": "._markers",
    "load_config": "._config",
    "load_tool_definition": "._definitions",
}

__all__ = sorted(_HOMES)

# Names that were exported here until 0.1 and moved to their audience's module: still importable
# from here for one release, with a DeprecationWarning naming the new home (type checkers see
# them through __getattr__, as Any).
_MOVED: dict[str, str] = {
    **dict.fromkeys(
        [
            "ClearSelfTodos",
            "Complete",
            "ContextAnchor",
            "Delegate",
            "Directive",
            "DirectiveHandlerSpec",
            "DirectiveProcessor",
            "InjectContext",
            "NotifyPresenter",
            "PhaseChange",
            "Pipeline",
            "ProcessingResult",
            "PruneMessages",
            "StopProcessing",
            "TierChange",
            "UnknownDirective",
            "directive_from_dict",
        ],
        "entropic_mcp.directives",
    ),
    **dict.fromkeys(
        [
            "DEFAULT_SCOPE",
            "MAX_STATE_BYTES",
            "StateConflict",
            "StateStore",
            "StorageBackend",
            "StorageBackendSpec",
            "StorageConfig",
            "StorageError",
            "ToolCallRecord",
            "validate_messages",
            "validate_prune",
            "validate_state",
        ],
        "entropic_mcp.storage",
    ),
    **dict.fromkeys(
        [
            "POLICY_FILES",
            "READ_PATH_TOOLS",
            "WRITE_PATH_TOOLS",
            "PathPolicy",
            "PermissionPart",
            "ResolvedPath",
            "confine",
            "escape_glob",
            "is_within",
            "path_part",
            "path_refused",
        ],
        "entropic_mcp.toolkit.paths",
    ),
    "normalize_args": "entropic_mcp.toolkit.args",
    "ENTRY_POINT_GROUP": "entropic_mcp.hookspecs",
}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
    home = _MOVED.get(name)
    if home is not None:
        # Not cached in the module: every importer of the old name is told, not only the first.
        warnings.warn(
            f"entropic_mcp.{name} has moved: import it from {home} (the old name goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)
    raise AttributeError(f"module 'entropic_mcp' has no attribute {name!r}")
