"""diagnose, inspect, context_inspect: the engine's state, from the core and the host's provider."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson
from entropic_mcp import (
    AccessLevel,
    CallContext,
    ConfigError,
    ToolBase,
    ToolError,
    ToolResult,
    load_tool_definition,
)
from entropic_mcp.storage import StorageError

from ._args import boolean, choice, integer, require_object, text
from ._state import EngineState, engine_state, storage_of

if TYPE_CHECKING:
    from ._server import EntropicServer

PREVIEW_CHARS = 120
TARGETS = ("config", "identity", "tool", "state", "metrics", "history")


def estimate_tokens(value: object) -> int:
    """About four characters per token: good enough to decide what to prune."""
    text_ = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return math.ceil(len(text_) / 4)


def _jsonable(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, default=str))


class _InspectionTool(ToolBase):
    required_access_level = AccessLevel.READ

    def __init__(self, server: EntropicServer) -> None:
        super().__init__()
        self.server = server

    # -- what the core always knows --------------------------------------------------------------

    def servers(self, ctx: CallContext) -> list[dict[str, Any]]:
        services = ctx.services
        pairs = services.server_objects() if services.hosted else [(self.server, "direct")]
        report = []
        for server, provider in pairs:
            entry: dict[str, Any] = {
                "name": server.name,
                "provider": provider,
                "tools": list(server.tools),
                "timeout_seconds": server.default_timeout_seconds,
            }
            unavailable = getattr(server, "unavailable_tools", None)
            if callable(unavailable) and unavailable():
                entry["unavailable_tools"] = unavailable()
            report.append(entry)
        return report

    def tools(self, ctx: CallContext, *, docs: bool = False) -> list[dict[str, Any]]:
        services = ctx.services
        listing = (
            services.tools()
            if services.hosted
            else [t.to_mcp(f"{self.server.name}.{t.name}") for t in self.server.tools.values()]
        )
        tools = []
        for tool in listing:
            entry = {"name": tool["name"], "access": "READ" if tool["annotations"].get("readOnlyHint") else "WRITE"}
            if docs:
                entry["description"] = tool.get("description", "")
            tools.append(entry)
        return tools

    # History and metrics are the caller's own conversation only: over HTTP, other conversations'
    # ids are other clients' MCP session ids, and their tool calls are theirs.
    def history(self, ctx: CallContext) -> list[dict[str, Any]]:
        services = ctx.services
        return _copy(lambda: [dict(h) for h in services.history()])

    def metrics(self, ctx: CallContext) -> dict[str, dict[str, int]]:
        services = ctx.services
        return _copy(services.metrics)

    def core_config(self, ctx: CallContext) -> dict[str, Any]:
        tiers = self.server.tiers
        entropic = {
            "tiers": list(tiers.names),
            "requires_context": sorted(tiers.need_context),
            "max_turns_limit": tiers.max_turns_limit,
        }
        config = ctx.services.config
        if config is None:
            return {"servers": {"entropic": entropic}}
        return {
            "entropic_mcp": {"root": str(config.root), "plugins": list(config.plugins) if config.plugins else None},
            "storage": {"backend": config.storage.backend, "path": str(config.storage_path)},
            "permissions": {
                "default": config.permissions.default,
                "allow": list(config.permissions.allow),
                "ask": list(config.permissions.ask),
                "deny": list(config.permissions.deny),
            },
            "pipeline": {k: v for k, v in _jsonable(_fields(config.pipeline)).items()},
            "servers": {**_jsonable({k: dict(v) for k, v in config.servers.items()}), "entropic": entropic},
        }

    def identities(self, ctx: CallContext, engine: EngineState | None) -> dict[str, Any]:
        names: dict[str, Any] = {}
        tiers = self.server.tiers
        services = ctx.services
        config = services.config
        core = dict(config.identities) if config is not None else {}
        for name in [*tiers.names, *core, *(engine.identities if engine else {})]:
            if name in names:
                continue
            keys = services.access_keys(name)
            entry: dict[str, Any] = {
                "tier": name in tiers.names,
                "requires_context": name in tiers.need_context,
                "access_keys": None if keys is None else {p: level.name for p, level in keys.items()},
            }
            if engine is not None and name in engine.identities:
                entry["host"] = _jsonable(engine.identities[name])
            names[name] = entry
        return names

    def storage_report(self, ctx: CallContext) -> dict[str, Any]:
        services = ctx.services
        config = services.config
        if config is None:
            return {"backend": None, "available": False}
        backend = config.storage.backend
        try:
            storage = services.storage
            if storage is None:
                return {"backend": backend, "available": False}
            return {"backend": backend, "available": True, "stats": dict(storage.stats())}
        except (ConfigError, StorageError) as exc:
            return {"backend": backend, "available": False, "error": str(exc)}


def _copy(read: Any) -> Any:
    """Copy the pipeline's history or metrics from this worker thread.

    The event loop appends to them while a READ tool runs beside other calls; a copy that meets
    a concurrent change is simply taken again.
    """
    for _ in range(100):
        try:
            return read()
        except RuntimeError:  # "deque mutated during iteration" / "dictionary changed size"
            continue
    return read()


def _fields(record: Any) -> dict[str, Any]:
    return attrs.asdict(record)


class DiagnoseTool(_InspectionTool):
    """``entropic.diagnose``: one JSON report."""

    definition = load_tool_definition(__package__, "diagnose")

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "diagnose"))
        docs = boolean(args, "include_docs", "diagnose")
        limit = integer(args, "history_limit", "diagnose", default=20, minimum=0, maximum=500)
        engine, error = engine_state(ctx)
        history = self.history(ctx)
        report: dict[str, Any] = {
            "conversation_id": ctx.conversation_id,
            "identity": ctx.identity,
            "servers": self.servers(ctx),
            "tools": self.tools(ctx, docs=docs),
            "history": history[-limit:] if limit else [],
            "metrics": self.metrics(ctx),
            "storage": self.storage_report(ctx),
            "identities": self.identities(ctx, engine),
            "config": self.core_config(ctx),
            "state_provider": engine is not None,
            "engine_state": None if engine is None else _jsonable(engine.state),
            "host_config": None if engine is None else _jsonable(engine.config),
        }
        if error is not None:
            report["state_provider_error"] = error
        return ToolResult.json(report)


class InspectTool(_InspectionTool):
    """``entropic.inspect``: one part of the engine, or one entry of it."""

    definition = load_tool_definition(__package__, "inspect")

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "inspect"))
        target = choice(args, "target", "inspect", TARGETS, required=True)
        assert target is not None
        key = text(args, "key", "inspect")
        engine, error = engine_state(ctx)
        part = self.part(target, ctx, engine, error)
        if key is None:
            return ToolResult.json({"target": target, target: part})
        if target == "history":
            entries = [h for h in part if h.get("tool") == key]
            if not entries:
                available = sorted({h.get("tool") for h in part})
                raise ToolError(
                    "unknown_key",
                    f"no calls of '{key}' in the history. Available: {', '.join(available) or 'none yet'}.",
                    available=available,
                )
            return ToolResult.json({"target": target, "key": key, "value": entries})
        if key not in part:
            available = sorted(part)
            raise ToolError(
                "unknown_key",
                f"'{key}' is not a {target} entry. Available: {', '.join(available) or 'none'}.",
                available=available,
            )
        return ToolResult.json({"target": target, "key": key, "value": part[key]})

    def part(self, target: str, ctx: CallContext, engine: EngineState | None, error: str | None) -> Any:
        if target == "config":
            config = self.core_config(ctx)
            if engine is not None:
                config["host"] = _jsonable(engine.config)
            return config
        if target == "identity":
            return self.identities(ctx, engine)
        if target == "tool":
            return self.tool_details(ctx)
        if target == "state":
            if engine is not None:
                return _jsonable(engine.state)
            todo_lists = self.server.todo_lists
            state: dict[str, Any] = {
                "conversation_id": ctx.conversation_id,
                "identity": ctx.identity,
                "todo": todo_lists.items(ctx.conversation_id, todo_lists.store_of(ctx)),
                "state_provider": False,
            }
            if error is not None:
                state["state_provider_error"] = error
            return state
        if target == "metrics":
            return self.metrics(ctx)
        return self.history(ctx)

    def tool_details(self, ctx: CallContext) -> dict[str, Any]:
        services = ctx.services
        details = {}
        for tool in self.tools(ctx, docs=True):
            name = tool["name"]
            entry = dict(tool)
            if services.hosted:
                found = services.resolve(name)
                if found is not None:
                    entry["inputSchema"] = _jsonable(dict(found[1].definition.input_schema))
                    entry["skip_duplicate_check"] = services.skip_duplicate_check(found[0], found[1].name)
                entry["metrics"] = dict(services.metrics().get(name, {}))
            details[name] = entry
        return details


class ContextInspectTool(_InspectionTool):
    """``entropic.context_inspect``: the conversation's messages as previews."""

    definition = load_tool_definition(__package__, "context_inspect")
    #: It reads the host's own messages: serve lists it only for a client running directives.
    capabilities = frozenset({"host_context"})

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        args = dict(require_object(args, "context_inspect"))
        limit = integer(args, "max_messages", "context_inspect", default=0, minimum=0)
        engine, error = engine_state(ctx)
        messages: list[Mapping[str, Any]]
        if engine is not None and engine.messages is not None:
            messages, source = list(engine.messages), "state_provider"
        else:
            messages, source = self.stored(ctx, error), "storage"
        previews = []
        for index, message in enumerate(messages):
            content = message.get("content", "")
            body = content if isinstance(content, str) else orjson.dumps(content, default=str).decode()
            tokens = message.get("tokens")
            if isinstance(tokens, bool) or not isinstance(tokens, int):
                tokens = estimate_tokens(body) + (
                    estimate_tokens(message["tool_calls"]) if message.get("tool_calls") else 0
                )
            preview = " ".join(body.split())
            previews.append(
                {
                    "index": index,
                    "role": str(message.get("role", "?")),
                    "preview": preview[:PREVIEW_CHARS] + ("…" if len(preview) > PREVIEW_CHARS else ""),
                    "tokens": tokens,
                }
            )
        shown = previews[-limit:] if limit else previews
        return ToolResult.json(
            {
                "conversation_id": ctx.conversation_id,
                "source": source,
                "total_messages": len(previews),
                "estimated_tokens": sum(p["tokens"] for p in previews),
                "messages": shown,
            }
        )

    def stored(self, ctx: CallContext, provider_error: str | None) -> list[Mapping[str, Any]]:
        try:
            storage = storage_of(ctx, "context_inspect")
        except ToolError as exc:
            extra = f" ({provider_error})" if provider_error else ""
            raise ToolError(
                "context_unavailable",
                f"no state provider reports this conversation's messages{extra}, and {exc.message}",
            ) from None
        try:
            loaded = storage.load_conversation(ctx.conversation_id)
        except StorageError as exc:
            raise ToolError(
                "context_unavailable",
                f"conversation '{ctx.conversation_id}' is not in storage "
                f"({exc}); the host saves messages under the conversation id it passes to tools.",
            ) from None
        return list(loaded.get("messages") or [])
