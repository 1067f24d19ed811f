"""GitServer: the tools, the `[servers.git]` config, and the work tree it follows."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
from entropic_mcp import ConfigError, MCPServerBase, ToolBase
from entropic_mcp.toolkit import settings_from_table

from ._hidden import IgnoreCache
from ._more_tools import Blame, CreateTag, Restore, Stash, StashList, Tag
from ._network_tools import Fetch, Pull, Push
from ._read_tools import Branch, Diff, Log, Show, Status
from ._runner import DEFAULT_MAX_OUTPUT_BYTES, GitRunner
from ._write_tools import Add, Checkout, Commit, CreateBranch, Reset

#: Every tool, READ ones first, in the order they are listed.
TOOLS = (
    Status,
    Diff,
    Log,
    Show,
    Branch,
    Blame,
    StashList,
    Tag,
    Add,
    Commit,
    CreateBranch,
    Checkout,
    Reset,
    Restore,
    Stash,
    CreateTag,
    Fetch,
    Pull,
    Push,
)
#: Listed only with ``network = true``: a listing offers no tool that can only refuse. Called by
#: name anyway, they answer ``network_disabled`` with the setting to change.
NETWORK_TOOLS = frozenset(tool.definition.name for tool in (Fetch, Pull, Push))


#: Keys of the table the server base reads itself.
_BASE_KEYS = frozenset({"timeout_seconds", "max_threads"})


@attrs.frozen(kw_only=True)
class GitSettings:
    """The ``[servers.git]`` keys of the git server itself (``timeout_seconds`` is the base's)."""

    #: text output kept per call (diff, show, blame), in bytes
    max_output_bytes: int = attrs.field(default=DEFAULT_MAX_OUTPUT_BYTES, metadata={"min": 1024})
    #: the git program: a name looked up on PATH, or a path (``~`` expanded)
    git: str = "git"
    #: fetch, pull and push (off: no transport at all)
    network: bool = False


class GitServer(MCPServerBase):
    """Tools over the git repository containing the project root.

    A root outside any work tree is fine at start-up: every tool then answers ``not_a_repository``.
    """

    name = "git"
    default_timeout_seconds: float | None = 30.0
    config_keys: ClassVar[frozenset[str]] = frozenset(field.name for field in attrs.fields(GitSettings))

    def __init__(self, name: str | None = None, *, root: str | Path | None = None) -> None:
        super().__init__(name, root=root)
        self.runner = GitRunner(timeout=30.0)
        self.ignores = IgnoreCache()
        for tool in TOOLS:
            self.register_tool(tool(self))
        self._listed = self._listing()

    def _listing(self) -> Mapping[str, ToolBase]:
        everything = super().tools
        if self.runner.network:
            return everything
        return {name: tool for name, tool in everything.items() if name not in NETWORK_TOOLS}

    @property
    def tools(self) -> Mapping[str, ToolBase]:
        """The tools listed: fetch, pull and push only with ``network = true``."""
        return self._listed

    def list_tools(self) -> list[dict[str, Any]]:
        return [tool.to_mcp() for tool in self._listed.values()]

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        # the base checked the table's keys and applied its own (timeout_seconds, max_threads)
        settings = settings_from_table(GitSettings, config, server=self.name, extra_keys=_BASE_KEYS)
        table = f"[servers.{self.name}]"
        program = settings.git
        if not program.strip():
            raise ConfigError(f"{table} git: expected the path or name of the git program, got {program!r}")
        if "git" in config and shutil.which(os.path.expanduser(program)) is None:
            raise ConfigError(f"{table} git: {program!r} is not an executable program; give the path to git")
        self.runner.set_network(settings.network)
        self._listed = self._listing()
        self.runner.max_output_bytes = settings.max_output_bytes
        self.runner.set_program(os.path.expanduser(program))
        self.runner.timeout = self.default_timeout_seconds or 30.0

    def skip_duplicate_check(self, tool_name: str) -> bool:
        """Every git tool runs every time: its answer depends on the repository, which changes
        between two identical calls (git.status after git.add, after a file edit, ...), so a
        cached previous result would be stale, not a duplicate."""
        return tool_name in self.tools
