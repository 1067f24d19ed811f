"""FilesystemServer: settings, confinement, the read tracker and ignore rules the tools share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from entropic_mcp import CallContext, MCPServerBase, ResolvedPath, ToolError, confine, is_within

from ._fsio import Location, locate
from ._ignore import ENTROPICIGNORE, IgnoreCache
from ._settings import CONFIG_KEYS, Settings, settings_from_table
from ._tracker import ReadTracker

PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_directory"})
PATTERN_TOOLS = frozenset({"glob", "grep"})


class FilesystemServer(MCPServerBase):
    """Six tools confined to the project root: read_file, write_file, edit_file, glob, grep, list_directory."""

    name = "filesystem"
    config_keys = CONFIG_KEYS

    def __init__(self, name: str | None = None, *, root: str | Path | None = None) -> None:
        super().__init__(name, root=root)
        self.root = Path(os.path.realpath(root if root is not None else Path.cwd()))
        self.settings = Settings()
        self.tracker = ReadTracker()
        self.ignore_cache = IgnoreCache()
        from ._edit import EditFile
        from ._glob import Glob
        from ._grep import Grep
        from ._listing import ListDirectory
        from ._read import ReadFile
        from ._write import WriteFile

        for tool in (ReadFile, WriteFile, EditFile, Glob, Grep, ListDirectory):
            self.register_tool(tool(self))

    # -- configuration and lifecycle ----------------------------------------------------------

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.settings = settings_from_table(self.name, config)

    def set_working_dir(self, path: str | Path) -> bool:
        """Re-root the server (ignore rules are re-read from the new root); False if not a directory."""
        try:
            candidate = Path(os.path.realpath(path))
        except (TypeError, ValueError, OSError):
            return False
        if not candidate.is_dir():
            return False
        self.root = candidate
        self.ignore_cache.clear()
        return True

    def end_conversation(self, conversation_id: str) -> None:
        self.tracker.forget(conversation_id)

    def close(self) -> None:
        self.tracker.clear()
        self.ignore_cache.clear()
        super().close()

    # -- pipeline queries -----------------------------------------------------------------------

    def permission_pattern(self, tool_name: str, args: Mapping[str, Any]) -> str:
        """``<tool>:<canonical root-relative path>`` (glob, grep: ``<tool>:<pattern>``)."""
        full = f"{self.name}.{tool_name}"
        if tool_name in PATTERN_TOOLS:
            pattern = args.get("pattern") if isinstance(args, Mapping) else None
            return f"{full}:{pattern}" if isinstance(pattern, str) and pattern else full
        if tool_name in PATH_TOOLS:
            raw = (
                args.get("path", "." if tool_name == "list_directory" else None) if isinstance(args, Mapping) else None
            )
            canonical = self.canonical_display(raw)
            return f"{full}:{canonical}" if canonical is not None else full
        return full

    def skip_duplicate_check(self, tool_name: str) -> bool:
        # read_file must always run: it refreshes the read tracker for a later write.
        return tool_name == "read_file"

    # -- shared by the tools --------------------------------------------------------------------------

    def canonical_display(self, raw: object) -> str | None:
        """The canonical root-relative form of ``raw`` (absolute outside the root); None if unusable."""
        if not isinstance(raw, str) or not raw or "\x00" in raw:
            return None
        try:
            os.fsencode(raw)
            path = Path(os.path.realpath(self.root / raw))
        except (ValueError, OSError):
            return None
        if path == self.root:
            return "."
        return path.relative_to(self.root).as_posix() if is_within(path, self.root) else str(path)

    def resolve(
        self,
        args: Mapping[str, Any],
        ctx: CallContext,
        *,
        tool: str,
        access: Literal["read", "write"],
        argument: str = "path",
        default: str | None = None,
    ) -> tuple[ResolvedPath, Location]:
        raw = args.get(argument)
        if raw is None:
            raw = default
        if raw is None:
            raise ToolError("invalid_args", f"'{argument}' is required: a path relative to the project root")
        resolved = confine(
            raw,
            root=self.root,
            policy=self.settings.policy,
            tool=f"{self.name}.{tool}",
            access=access,
            ctx=ctx,
            argument=argument,
        )
        return resolved, locate(resolved, self.root)

    def refuse_ignored(self, resolved: ResolvedPath, loc: Location, *, write: bool = False) -> None:
        """Refuse a path the root's ``.entropicignore`` excludes (``ignored``), and writes into ``.git``.

        Writing ``.git`` internals (hooks, config) would let a tool call run code the next time the
        user runs git, outside every rule of this server; reading them is harmless.
        """
        if write and ".git" in loc.parts:
            raise ToolError(
                "ignored",
                f"{loc.display} is inside a .git directory, which the filesystem tools "
                "never write; use the git tools to change the repository",
            )
        if not resolved.inside or not loc.parts:
            return
        from ._fsio import open_dir

        try:
            fd = open_dir(self.root, ())
        except OSError:
            return
        try:
            rules = self.ignore_cache.load(fd, ENTROPICIGNORE)
        finally:
            os.close(fd)
        if rules is None:
            return
        last = len(loc.parts) - 1
        for index in range(len(loc.parts)):
            probe = "/".join(loc.parts[: index + 1]) + ("/" if index < last else "")
            if rules.verdict(probe):
                raise ToolError(
                    "ignored",
                    f"{loc.display} is excluded by the project's .entropicignore, so the "
                    "filesystem tools do not read or write it; ask the user if you need it",
                )
