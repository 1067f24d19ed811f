"""GitServer: the tools, the `[servers.git]` config, and the work tree it follows."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from entropic_mcp import ConfigError, MCPServerBase

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


class GitServer(MCPServerBase):
    """Tools over the git repository containing the project root.

    A root outside any work tree is fine at start-up: every tool then answers ``not_a_repository``.
    """

    name = "git"
    default_timeout_seconds: float | None = 30.0
    config_keys: ClassVar[frozenset[str]] = frozenset({"max_output_bytes", "git", "network"})

    def __init__(self, name: str | None = None, *, root: str | Path | None = None) -> None:
        super().__init__(name, root=root)
        self.runner = GitRunner(timeout=30.0)
        self.ignores = IgnoreCache()
        for tool in TOOLS:
            self.register_tool(tool(self))

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        table = f"[servers.{self.name}]"
        max_output = config.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES)
        if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 1024:
            raise ConfigError(f"{table} max_output_bytes: expected an integer of at least 1024, got {max_output!r}")
        program = config.get("git", "git")
        if not isinstance(program, str) or not program.strip():
            raise ConfigError(f"{table} git: expected the path or name of the git program, got {program!r}")
        if "git" in config and shutil.which(os.path.expanduser(program)) is None:
            raise ConfigError(f"{table} git: {program!r} is not an executable program; give the path to git")
        network = config.get("network", False)
        if not isinstance(network, bool):
            raise ConfigError(f"{table} network: expected true or false, got {network!r}")
        self.runner.set_network(network)
        self.runner.max_output_bytes = max_output
        self.runner.set_program(os.path.expanduser(program))
        self.runner.timeout = self.default_timeout_seconds or 30.0

    def skip_duplicate_check(self, tool_name: str) -> bool:
        """Every git tool runs every time: its answer depends on the repository, which changes
        between two identical calls (git.status after git.add, after a file edit, ...), so a
        cached previous result would be stale, not a duplicate."""
        return tool_name in self.tools
