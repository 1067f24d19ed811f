"""entropic-mcp: a pluggy framework of permissioned MCP tool servers for agent hosts."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._access import AccessLevel
    from ._calls import ApprovalDecision, ApprovalRequest, OutsideRootRequest, Refuse, ReplaceArgs, ToolCall
    from ._config import Config, PluginConfig, StorageConfig, config_from_dict, load_config
    from ._context import CallContext
    from ._directives import (
        ClearSelfTodos,
        Complete,
        ContextAnchor,
        Delegate,
        Directive,
        DirectiveHandlerSpec,
        DirectiveProcessor,
        InjectContext,
        NotifyPresenter,
        PhaseChange,
        Pipeline,
        ProcessingResult,
        PruneMessages,
        StopProcessing,
        TierChange,
        UnknownDirective,
        directive_from_dict,
    )
    from ._envelope import ServerResponse, ToolResult
    from ._errors import (
        ConfigError,
        DuplicateNameError,
        EntropicMCPError,
        PluginError,
        StateConflict,
        StorageError,
        ToolDefinitionError,
        ToolError,
    )
    from ._pipeline._keys import AccessKeyError, AccessKeys
    from ._kinds import ResultKind
    from ._manager import ServerManager
    from ._paths import PathPolicy, ResolvedPath, confine, is_within
    from ._pipeline._rules import (
        POLICY_FILES,
        READ_PATH_TOOLS,
        WRITE_PATH_TOOLS,
        PermissionPart,
        escape_glob,
        path_part,
        path_refused,
    )
    from ._pipeline import BatchOutcome, CallOutcome
    from ._plugins import ENTRY_POINT_GROUP, PluginInfo, PluginLoadWarning, Plugins, hookimpl
    from ._server import MCPServerBase, normalize_args
    from ._services import ToolServices
    from ._storage import (
        DEFAULT_SCOPE,
        MAX_STATE_BYTES,
        StateStore,
        StorageBackend,
        StorageBackendSpec,
        ToolCallRecord,
        validate_messages,
        validate_prune,
        validate_state,
    )
    from ._tools import ToolBase, ToolDefinition, load_tool_definition

# Names resolve on first use, so a command that only lists tools never pays for the
# protocol stack, the schema validator or asyncio.
_LAZY: dict[str, str] = {
    "AccessKeyError": "._pipeline._keys",
    "AccessKeys": "._pipeline._keys",
    "AccessLevel": "._access",
    "ApprovalDecision": "._calls",
    "ApprovalRequest": "._calls",
    "BatchOutcome": "._pipeline",
    "CallContext": "._context",
    "CallOutcome": "._pipeline",
    "ClearSelfTodos": "._directives",
    "Complete": "._directives",
    "Config": "._config",
    "ConfigError": "._errors",
    "DEFAULT_SCOPE": "._storage",
    "MAX_STATE_BYTES": "._storage",
    "ContextAnchor": "._directives",
    "Delegate": "._directives",
    "Directive": "._directives",
    "DirectiveHandlerSpec": "._directives",
    "DirectiveProcessor": "._directives",
    "DuplicateNameError": "._errors",
    "ENTRY_POINT_GROUP": "._plugins",
    "EntropicMCPError": "._errors",
    "InjectContext": "._directives",
    "MCPServerBase": "._server",
    "NotifyPresenter": "._directives",
    "OutsideRootRequest": "._calls",
    "PathPolicy": "._paths",
    "PermissionPart": "._pipeline._rules",
    "PhaseChange": "._directives",
    "Pipeline": "._directives",
    "PluginConfig": "._config",
    "PluginError": "._errors",
    "PluginInfo": "._plugins",
    "PluginLoadWarning": "._plugins",
    "Plugins": "._plugins",
    "ProcessingResult": "._directives",
    "PruneMessages": "._directives",
    "Refuse": "._calls",
    "ReplaceArgs": "._calls",
    "ResolvedPath": "._paths",
    "ServerManager": "._manager",
    "ServerResponse": "._envelope",
    "StopProcessing": "._directives",
    "StateConflict": "._errors",
    "StateStore": "._storage",
    "StorageBackend": "._storage",
    "StorageBackendSpec": "._storage",
    "StorageConfig": "._config",
    "StorageError": "._errors",
    "TierChange": "._directives",
    "ToolBase": "._tools",
    "ToolCall": "._calls",
    "ToolCallRecord": "._storage",
    "ToolDefinition": "._tools",
    "ToolDefinitionError": "._errors",
    "ToolError": "._errors",
    "ToolResult": "._envelope",
    "UnknownDirective": "._directives",
    "config_from_dict": "._config",
    "confine": "._paths",
    "directive_from_dict": "._directives",
    "hookimpl": "._plugins",
    "is_within": "._paths",
    "load_config": "._config",
    "load_tool_definition": "._tools",
    "normalize_args": "._server",
    "ToolServices": "._services",
    "validate_messages": "._storage",
    "validate_prune": "._storage",
    "validate_state": "._storage",
    "ResultKind": "._kinds",
    "POLICY_FILES": "._pipeline._rules",
    "READ_PATH_TOOLS": "._pipeline._rules",
    "WRITE_PATH_TOOLS": "._pipeline._rules",
    "escape_glob": "._pipeline._rules",
    "path_part": "._pipeline._rules",
    "path_refused": "._pipeline._rules",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'entropic_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SCOPE",
    "ENTRY_POINT_GROUP",
    "MAX_STATE_BYTES",
    "POLICY_FILES",
    "READ_PATH_TOOLS",
    "WRITE_PATH_TOOLS",
    "AccessKeyError",
    "AccessKeys",
    "AccessLevel",
    "ApprovalDecision",
    "ApprovalRequest",
    "BatchOutcome",
    "CallContext",
    "CallOutcome",
    "ClearSelfTodos",
    "Complete",
    "Config",
    "ConfigError",
    "ContextAnchor",
    "Delegate",
    "Directive",
    "DirectiveHandlerSpec",
    "DirectiveProcessor",
    "DuplicateNameError",
    "EntropicMCPError",
    "InjectContext",
    "MCPServerBase",
    "NotifyPresenter",
    "OutsideRootRequest",
    "PathPolicy",
    "PermissionPart",
    "PhaseChange",
    "Pipeline",
    "PluginConfig",
    "PluginError",
    "PluginInfo",
    "PluginLoadWarning",
    "Plugins",
    "ProcessingResult",
    "PruneMessages",
    "Refuse",
    "ReplaceArgs",
    "ResolvedPath",
    "ResultKind",
    "ServerManager",
    "ServerResponse",
    "StateConflict",
    "StateStore",
    "StopProcessing",
    "StorageBackend",
    "StorageBackendSpec",
    "StorageConfig",
    "StorageError",
    "TierChange",
    "ToolBase",
    "ToolCall",
    "ToolCallRecord",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolError",
    "ToolResult",
    "ToolServices",
    "UnknownDirective",
    "config_from_dict",
    "confine",
    "directive_from_dict",
    "escape_glob",
    "hookimpl",
    "is_within",
    "load_config",
    "load_tool_definition",
    "normalize_args",
    "path_part",
    "path_refused",
    "validate_messages",
    "validate_prune",
    "validate_state",
]
