"""Fixtures: a project root in tmp_path and managers running the real filesystem server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from entropic_mcp import CallContext, ServerManager, config_from_dict
from entropic_mcp_filesystem import FilesystemServer

#: Tools answering lines by default; the harness asks them for JSON (``format: "json"``) unless
#: a test passes ``format`` itself: structure is what most tests check (test_fs_text.py: the lines).
LINE_TOOLS = frozenset({"grep", "glob", "list_directory"})


def structured_args(tool: str, args: Any) -> Any:
    if tool in LINE_TOOLS and isinstance(args, dict) and "format" not in args:
        return {**args, "format": "json"}
    return args


class Harness:
    """One manager with one filesystem server; ``call`` returns (outcome, parsed result)."""

    def __init__(
        self,
        root: Path,
        table: dict[str, Any],
        plugins: Any = None,
        result_cap: int = 0,
        permissions: dict[str, Any] | None = None,
    ) -> None:
        from entropic_mcp.testing import fresh_plugins

        self.root = root
        config = config_from_dict(
            {
                "storage": {"backend": "none"},
                "permissions": permissions or {"default": "allow"},
                "pipeline": {"max_result_bytes": result_cap},
                "servers": {"filesystem": table},
            },
            root=root,
        )
        self.server = FilesystemServer(root=root)
        self.server.configure(config.server_table("filesystem"))
        self.manager = ServerManager(config, plugins=fresh_plugins(*(plugins or ())), servers=[self.server])

    def call(self, tool: str, args: Any = None, conversation: str = "c1") -> tuple[Any, Any]:
        args = structured_args(tool, args)
        outcome = anyio.run(self.manager.call, f"filesystem.{tool}", args, CallContext(conversation_id=conversation))
        try:
            data = orjson.loads(outcome.response.result)
        except orjson.JSONDecodeError:
            data = outcome.response.result
        return outcome, data

    def ok(self, tool: str, args: Any = None, conversation: str = "c1") -> Any:
        outcome, data = self.call(tool, args, conversation)
        assert not outcome.response.is_error, outcome.response.result
        return data

    def error(self, tool: str, args: Any = None, conversation: str = "c1") -> dict[str, Any]:
        outcome, data = self.call(tool, args, conversation)
        assert outcome.response.is_error, outcome.response.result
        assert outcome.response.directives == ()
        assert isinstance(data, dict) and isinstance(data.get("message"), str) and data["message"]
        return data

    def direct(self, tool: str, args: Any, conversation: str = "c1") -> Any:
        """Run the server directly (no pipeline: no schema check, no duplicate guard)."""
        return anyio.run(
            self.server.execute, tool, structured_args(tool, args), CallContext(conversation_id=conversation)
        )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "root"
    project.mkdir()
    return project.resolve()


@pytest.fixture
def make(root: Path) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def factory(
        table: dict[str, Any] | None = None,
        *,
        plugins: Any = None,
        at: Path | None = None,
        result_cap: int = 0,
        permissions: dict[str, Any] | None = None,
    ) -> Harness:
        harness = Harness(at or root, dict(table or {}), plugins, result_cap, permissions)
        made.append(harness)
        return harness

    yield factory
    for harness in made:
        harness.manager.close()


@pytest.fixture
def fs(make: Callable[..., Harness]) -> Harness:
    return make()
