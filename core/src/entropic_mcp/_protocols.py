"""What the layers under the manager need of it, as ``typing.Protocol`` s: the call context, its
services, delegation and the external servers name these, never ``ServerManager``, so the core's
imports run one way (docs/architecture.md, "Which module owns what"). ``ServerManager`` satisfies
``Host``; the server and tool classes satisfy ``ServerView`` and ``ToolView``.

A leaf: it names only modules below the call context (its imports are for type checkers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._config import Config
    from ._definitions import ToolDefinition
    from ._outside import OutsideRootRequest
    from ._pipeline._keys import AccessKeys
    from ._pipeline._rules import PermissionRules
    from ._storage import StorageBackend


class CallFacts(Protocol):
    """What the services read of the call they serve (a ``CallContext`` is one)."""

    @property
    def conversation_id(self) -> str: ...

    @property
    def result_budget(self) -> int | None: ...


class ToolView(Protocol):
    """A tool as introspection shows it (a ``ToolBase`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def definition(self) -> ToolDefinition: ...

    def to_mcp(self, name: str | None = None) -> dict[str, Any]: ...


class ServerView(Protocol):
    """A server as introspection shows it (an ``MCPServerBase`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def tools(self) -> Mapping[str, ToolView]: ...

    @property
    def default_timeout_seconds(self) -> float | None: ...


class HookAnswers(Protocol):
    """The host's hooks as the services call them (``_pipeline._hooks.Hooks``)."""

    def declared_answers(self, hook: str, kwargs: Mapping[str, Any]) -> list[Any]: ...

    def first_answer(self, hook: str, arguments: Mapping[str, Any]) -> Any: ...


class CallRecords(Protocol):
    """The pipeline's per-conversation history as introspection reads it (``CallPipeline``)."""

    def history_of(self, conversation_id: str) -> list[dict[str, Any]]: ...

    def metrics_of(self, conversation_id: str) -> dict[str, dict[str, int]]: ...


class Host(Protocol):
    """The manager behind a call, as the layers under it see it (``ServerManager`` is the one)."""

    @property
    def config(self) -> Config: ...

    @property
    def access_keys(self) -> AccessKeys: ...

    @property
    def permissions(self) -> PermissionRules: ...

    @property
    def hooks(self) -> HookAnswers: ...

    @property
    def pipeline(self) -> CallRecords: ...

    @property
    def storage(self) -> StorageBackend | None: ...

    @property
    def storage_is_open(self) -> bool: ...

    @property
    def providers(self) -> Mapping[str, str]: ...

    @property
    def servers(self) -> Mapping[str, ServerView]: ...

    def approve_outside_root(self, request: OutsideRootRequest) -> bool | None: ...

    def list_tools(self) -> list[dict[str, Any]]: ...

    def resolve(self, name: str) -> tuple[ServerView, ToolView] | None: ...

    # ``server`` is the host's own server object, handed out by ``resolve``/``servers`` (Any: a
    # ServerView here would make the manager's narrower MCPServerBase parameter not fit).
    def skip_duplicate_check(self, server: Any, tool: str = "") -> bool: ...

    def invalidate(self) -> None: ...
