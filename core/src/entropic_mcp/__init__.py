"""entropic-mcp: a pluggy framework of permissioned MCP tool servers for agent hosts."""

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
    StorageError,
    ToolDefinitionError,
    ToolError,
)
from ._keys import AccessKeyError, AccessKeys
from ._manager import ServerManager
from ._paths import PathPolicy, ResolvedPath, confine, is_within
from ._permissions import PermissionPart
from ._pipeline import BatchOutcome, CallOutcome
from ._plugins import ENTRY_POINT_GROUP, PluginInfo, PluginLoadWarning, Plugins, hookimpl
from ._server import MCPServerBase, normalize_args
from ._storage import StorageBackend, StorageBackendSpec
from ._tools import ToolBase, ToolDefinition, load_tool_definition

__version__ = "0.1.0"

__all__ = [
    "ENTRY_POINT_GROUP",
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
    "ServerManager",
    "ServerResponse",
    "StopProcessing",
    "StorageBackend",
    "StorageBackendSpec",
    "StorageConfig",
    "StorageError",
    "TierChange",
    "ToolBase",
    "ToolCall",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolError",
    "ToolResult",
    "UnknownDirective",
    "config_from_dict",
    "confine",
    "directive_from_dict",
    "hookimpl",
    "is_within",
    "load_config",
    "load_tool_definition",
    "normalize_args",
]
