"""The exceptions of entropic-mcp: one base, small specific subclasses."""

from __future__ import annotations


class EntropicMCPError(Exception):
    """Base of every error raised by entropic-mcp."""


class DuplicateNameError(EntropicMCPError, ValueError):
    """Two things were registered under one name (tools in a server, servers in a manager)."""


class ToolDefinitionError(EntropicMCPError, ValueError):
    """A tool definition file is missing or malformed."""


class ConfigError(EntropicMCPError, ValueError):
    """The configuration is invalid: names the file, the key and what was expected."""


class PluginError(EntropicMCPError, RuntimeError):
    """A plugin failed to load or register (raised only in strict mode)."""


class StorageError(EntropicMCPError, RuntimeError):
    """A storage operation could not do what it says; the message has the reason."""


class StateConflict(StorageError):
    """``save_state`` found another version than the one the caller loaded: someone saved
    meanwhile. Load the state again, apply the change to it again, and save again."""


class ToolError(EntropicMCPError):
    """Raised by a tool to refuse a call with a typed error code the model can act on.

    The server turns it into ``{"error": code, "message": message, **extra}`` with
    ``is_error: true`` — unlike any other exception, which becomes the barrier text.
    """

    def __init__(self, code: str, message: str, **extra: object) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra
