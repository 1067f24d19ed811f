"""BashServer: the ``bash`` server, its config, and its parsed permission parts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from entropic_mcp import MCPServerBase, PathPolicy, PermissionPart, ToolError, confine

from ._execute import ExecuteTool
from ._settings import KEYS, KILL_GRACE, BashSettings

TOOL = "bash.execute"
_ANYWHERE = PathPolicy(allow_outside_root=True)


class BashServer(MCPServerBase):
    """One tool, ``execute``: shell commands in the project, checked command by command."""

    name: ClassVar[str] = "bash"
    config_keys: ClassVar[frozenset[str]] = KEYS

    def __init__(self, name: str | None = None, *, root: str | Path | None = None) -> None:
        super().__init__(name, root=root)
        self.grace = KILL_GRACE
        self.settings = BashSettings()
        self._sync_pipeline_timeout()
        self.register_tool(ExecuteTool(self))

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.settings = BashSettings.from_table(config)
        self._sync_pipeline_timeout()

    def _sync_pipeline_timeout(self) -> None:
        # The tool enforces its own timeout and returns the partial output; the pipeline's
        # timeout is only a backstop that must never fire first.
        self.default_timeout_seconds = self.settings.max_timeout_seconds + 2 * self.grace + 5.0

    # -- permissions ---------------------------------------------------------------------------

    def permission_parts(self, tool_name: str, args: Mapping[str, Any]) -> list[PermissionPart]:
        """One part per simple command (and per file redirection) of ``args["command"]``."""
        command = args.get("command") if isinstance(args, Mapping) else None
        if tool_name != "execute" or not isinstance(command, str) or not command.strip():
            full = f"{self.name}.{tool_name}"
            return [PermissionPart(names=(full,), store=full)]
        import os

        from ._patterns import permission_parts  # tree-sitter loads on the first check only

        settings = self.settings
        return permission_parts(
            command,
            cwd=self._cwd_for(args.get("working_dir")),
            root=self.root,
            env=settings.environment() or os.environ,
            bash_like=os.path.basename(settings.shell) in ("bash", "sh", "dash", "ash", "rbash"),
        )

    def permission_pattern(self, tool_name: str, args: Mapping[str, Any]) -> str:
        return self.permission_parts(tool_name, args)[0].store

    def _cwd_for(self, raw: object) -> Path:
        """Where a call would run, for resolving relative redirections; asks nothing, refuses nothing.

        Whether the directory may be used is the tool's question, answered when it runs.
        """
        if raw is None:
            return self.root  # resolved by the base class (and by set_working_dir)
        try:
            return confine(raw, root=self.root, policy=_ANYWHERE, tool=TOOL, access="write").path
        except ToolError:
            return self.root
