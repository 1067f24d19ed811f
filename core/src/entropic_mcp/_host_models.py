"""Host models for real model APIs: OpenAI-compatible chat completions and Anthropic Messages.

Each adapter is a host model (``model(messages, tools) -> AssistantTurn``, async) that speaks one
wire format over plain HTTP with ``httpx2`` (which the MCP SDK already brings): no vendor SDK,
so the same class talks to llama.cpp's ``llama-server``, vLLM, Ollama, LM Studio or a hosted
endpoint. Tool names travel in the spelling those APIs accept (``^[a-zA-Z0-9_-]{1,64}$``,
``filesystem.read_file`` -> ``filesystem__read_file``) and come back through a table built from
the listing. Every failure of the endpoint (refused connection, timeout, HTTP error, a body
that is not the format) is a :class:`ModelError` whose message says what went wrong and what to
check.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
import orjson

from ._errors import ConfigError, EntropicMCPError

#: What OpenAI's and Anthropic's APIs accept as a tool (function) name.
WIRE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_TOKENS = 4096


class ModelError(EntropicMCPError, RuntimeError):
    """A model endpoint could not give a turn: unreachable, an HTTP error, or a malformed answer."""


# -- tool names ----------------------------------------------------------------------------------------


def wire_name(internal: str) -> str:
    """``server.tool`` spelled as model APIs accept it (deterministic; long names get a hash)."""
    server, dot, tool = internal.partition(".")
    name = _NOT_ALLOWED.sub("_", f"{server}__{tool}" if dot else internal) or "_"
    if len(name) > 64:
        name = f"{name[:55]}_{hashlib.sha256(internal.encode()).hexdigest()[:8]}"
    return name


@attrs.frozen
class WireNames:
    """Both directions between the host's tool names and their wire spelling for one listing."""

    to_wire: dict[str, str]
    to_internal: dict[str, str]

    @classmethod
    def build(cls, names: Iterable[str]) -> WireNames:
        to_wire: dict[str, str] = {}
        to_internal: dict[str, str] = {}
        for internal in names:
            name = wire_name(internal)
            if name in to_internal and to_internal[name] != internal:  # two names, one spelling
                name = f"{name[:55]}_{hashlib.sha256(internal.encode()).hexdigest()[:8]}"
            to_wire[internal] = name
            to_internal[name] = internal
        return cls(to_wire, to_internal)

    def wire(self, internal: str) -> str:
        return self.to_wire.get(internal) or wire_name(internal)

    def internal(self, name: str) -> str:
        """The host's name for a wire name; a name the table lacks is passed on as the model wrote
        it, so the pipeline answers it as an unknown tool the model can correct."""
        return self.to_internal.get(name, name)

    def rewrite(self, text: str) -> str:
        """``text`` with every listed host name in its wire spelling (descriptions mention tools)."""
        if not text:
            return text
        for internal in sorted(self.to_wire, key=len, reverse=True):
            if internal in text:
                text = re.sub(rf"(?<![\w.]){re.escape(internal)}(?![\w])", self.to_wire[internal], text)
        return text


# -- shared HTTP ---------------------------------------------------------------------------------------


def _arguments(value: Any) -> Any:
    """Arguments as a dict when they are JSON text of one; anything else as the model gave it."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value) if value.strip() else {}
        except orjson.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def _sendable(arguments: Any) -> dict[str, Any]:
    """Arguments as the wire takes them back in the history: an object. Endpoints refuse (or chat
    templates crash on) arguments that are not JSON of one, so the model's text goes in a field."""
    return arguments if isinstance(arguments, dict) else {"invalid_arguments": arguments}


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " …"


def _error_text(body: Any) -> str:
    """The message in an error body: OpenAI's and Anthropic's ``{"error": {"message"}}``, or the text."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            kind = error.get("type")
            return f"{error['message']}" + (f" ({kind})" if isinstance(kind, str) and kind else "")
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return _shorten(orjson.dumps(body, default=str).decode()) if not isinstance(body, str) else _shorten(body)


_HINTS = {
    400: "the endpoint refused the request as sent (the message above says which part)",
    401: "check the API key (api_key or api_key_env)",
    403: "check the API key and that it may use this model",
    404: "check base_url (OpenAI-compatible servers usually serve under /v1) and the model name",
    408: "the endpoint timed out; try again or raise timeout",
    413: "the conversation is too large for the endpoint; prune it or use a model with a larger context",
    422: "the endpoint could not process the request (the message above says which part)",
    429: "rate limited or out of quota; try again later",
}


async def _post(api: str, url: str, headers: Mapping[str, str], body: dict[str, Any], timeout: float) -> Any:
    """POST ``body`` as JSON to ``url``; the decoded JSON answer, or a ModelError saying why not."""
    try:
        import httpx2
    except ImportError:  # pragma: no cover - the MCP SDK depends on it
        raise ModelError(
            f"the {api} host model needs httpx2; install it with: pip install 'entropic-mcp[host-{api}]'"
        ) from None
    try:
        # A model server on this machine is never behind the environment's proxy (HTTP_PROXY would
        # otherwise send 127.0.0.1 through it); remote endpoints honour it as any HTTP client does.
        local = urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1")
        async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=not local) as client:
            response = await client.post(url, content=orjson.dumps(body), headers=dict(headers))
    except httpx2.TimeoutException:
        raise ModelError(
            f"{api} endpoint {url} gave no answer within {timeout:g} s; is the model loaded? raise timeout "
            "for a slow model"
        ) from None
    except httpx2.HTTPError as exc:
        raise ModelError(
            f"could not reach the {api} endpoint {url}: {exc or type(exc).__name__}; is the server running, "
            "and is base_url right?"
        ) from None
    text = response.text
    try:
        decoded = orjson.loads(text) if text.strip() else None
    except orjson.JSONDecodeError:
        decoded = None
        if response.status_code < 400:
            raise ModelError(
                f"{api} endpoint {url} answered HTTP {response.status_code} with a body that is not JSON: "
                f"{_shorten(text, 200)!r}; is base_url the API (not a web page)?"
            ) from None
    if response.status_code >= 400:
        detail = _error_text(decoded if decoded is not None else text) or response.reason_phrase
        hint = _HINTS.get(response.status_code) or (
            "the model server failed; see its log, then try again" if response.status_code >= 500 else ""
        )
        raise ModelError(
            f"{api} endpoint {url} answered HTTP {response.status_code}: {detail}" + (f"; {hint}" if hint else "")
        )
    if not isinstance(decoded, dict):
        raise ModelError(f"{api} endpoint {url} answered {_shorten(text, 200)!r}, not a JSON object")
    return decoded


def _headers(extra: Mapping[str, str]) -> dict[str, str]:
    return {"content-type": "application/json", "accept": "application/json", **extra}


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else orjson.dumps(content, default=str).decode()


# -- OpenAI-compatible chat completions ----------------------------------------------------------------


@attrs.define(kw_only=True)
class OpenAICompatibleModel:
    """A host model behind ``POST {base_url}/chat/completions`` (OpenAI, llama.cpp, vLLM, Ollama).

    Args:
        base_url: up to and including the version, e.g. ``http://127.0.0.1:8080/v1``.
        model: the ``model`` field of each request (what the server calls the model).
        api_key: sent as ``Authorization: Bearer <key>`` when set (local servers need none).
        timeout: seconds for one request (connect, send, answer).
        max_tokens: the answer's limit (``max_tokens``), unset to leave it to the server.
        temperature: sent when set.
        headers: more request headers.
        options: more body fields (``{"top_p": 0.9}``, a server's own switches).
    """

    base_url: str = attrs.field(validator=attrs.validators.instance_of(str))
    model: str = attrs.field(validator=attrs.validators.instance_of(str))
    api_key: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_tokens: int | None = None
    temperature: float | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    options: Mapping[str, Any] = attrs.field(factory=dict)

    api = "openai"

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def tool_name(self, internal: str) -> str:
        """How this model's API spells a host tool name (the host shows the model messages in it)."""
        return wire_name(internal)

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The request body for one turn (public so a host can log or inspect what is sent)."""
        names = WireNames.build(t["name"] for t in tools)
        body: dict[str, Any] = {"model": self.model, "messages": [self._wire(m, names) for m in messages]}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": names.wire(t["name"]),
                        "description": names.rewrite(t.get("description") or ""),
                        "parameters": t.get("inputSchema") or {"type": "object"},
                    },
                }
                for t in tools
            ]
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(self.options)
        return body

    def _wire(self, message: Mapping[str, Any], names: WireNames) -> dict[str, Any]:
        role = message.get("role")
        if role == "tool":
            return {"role": "tool", "tool_call_id": message.get("tool_call_id") or "", "content": _text(message)}
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                arguments = _arguments(call.get("arguments", {}))
                calls.append(
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {
                            "name": names.wire(call["name"]),
                            "arguments": orjson.dumps(_sendable(arguments), default=str).decode(),
                        },
                    }
                )
            return {"role": "assistant", "content": _text(message) or None, "tool_calls": calls}
        if role not in ("system", "user", "assistant"):
            raise ModelError(f"a message has role {role!r}; the host speaks system, user, assistant and tool")
        return {"role": role, "content": _text(message)}

    def parse(self, answer: Mapping[str, Any], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The host turn in a chat-completions answer (a ModelError when it is not one)."""
        where = f"{self.api} endpoint {self.url}"
        if "error" in answer and not answer.get("choices"):
            raise ModelError(f"{where} answered with an error: {_error_text(answer)}")
        choices = answer.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ModelError(f"{where} answered without choices[0]: {_shorten(orjson.dumps(answer).decode(), 200)}")
        message = choices[0].get("message")
        if not isinstance(message, Mapping):
            raise ModelError(f"{where} answered without choices[0].message (a streaming endpoint?)")
        content = message.get("content")
        if isinstance(content, list):  # some servers answer in content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        if content is not None and not isinstance(content, str):
            raise ModelError(f"{where} answered a message whose content is {type(content).__name__}, not text")
        names = WireNames.build(t["name"] for t in tools)
        calls = []
        for index, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
                raise ModelError(f"{where} answered tool_calls[{index}] without function.name: {call!r}")
            call_id = call.get("id")
            calls.append(
                {
                    "name": names.internal(function["name"]),
                    "arguments": _arguments(function.get("arguments", {})),
                    **({"id": call_id} if isinstance(call_id, str) and call_id else {}),
                }
            )
        return {"content": content or "", "tool_calls": calls}

    async def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        headers = dict(self.headers)
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        answer = await _post(self.api, self.url, _headers(headers), self.request(messages, tools), self.timeout)
        return self.parse(answer, tools)


# -- Anthropic Messages ----------------------------------------------------------------------------------


@attrs.define(kw_only=True)
class AnthropicMessagesModel:
    """A host model behind Anthropic's ``POST {base_url}/v1/messages``.

    Args:
        model: e.g. ``claude-sonnet-4-5``.
        api_key: sent as ``x-api-key``.
        base_url: ``https://api.anthropic.com`` unless a proxy or gateway sits between.
        max_tokens: the answer's limit (the API requires one).
        timeout, temperature, headers, options: as for :class:`OpenAICompatibleModel`.
    """

    model: str = attrs.field(validator=attrs.validators.instance_of(str))
    api_key: str | None = None
    base_url: str = "https://api.anthropic.com"
    max_tokens: int = DEFAULT_MAX_TOKENS
    timeout: float = DEFAULT_TIMEOUT
    temperature: float | None = None
    version: str = ANTHROPIC_VERSION
    headers: Mapping[str, str] = attrs.field(factory=dict)
    options: Mapping[str, Any] = attrs.field(factory=dict)

    api = "anthropic"

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/v1/messages"

    def tool_name(self, internal: str) -> str:
        return wire_name(internal)

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        names = WireNames.build(t["name"] for t in tools)
        system: list[str] = []
        turns: list[dict[str, Any]] = []

        def add(role: str, blocks: list[dict[str, Any]]) -> None:
            # Roles alternate; the host's "[delegation ...]" note after tool results joins that user turn.
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})

        for message in messages:
            role, text = message.get("role"), _text(message)
            if role == "system":
                system.append(text)
            elif role == "user":
                add("user", [{"type": "text", "text": text or "(empty)"}])
            elif role == "tool":
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": message.get("tool_call_id") or "",
                    "content": text,
                }
                if message.get("is_error"):
                    block["is_error"] = True
                if turns and turns[-1]["role"] == "user":  # tool results lead their user turn
                    results = [b for b in turns[-1]["content"] if b["type"] == "tool_result"]
                    turns[-1]["content"].insert(len(results), block)
                else:
                    add("user", [block])
            elif role == "assistant":
                blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
                for call in message.get("tool_calls") or ():
                    arguments = _arguments(call.get("arguments", {}))
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": call["id"],
                            "name": names.wire(call["name"]),
                            "input": _sendable(arguments),
                        }
                    )
                add("assistant", blocks or [{"type": "text", "text": "(no text)"}])
            else:
                raise ModelError(f"a message has role {role!r}; the host speaks system, user, assistant and tool")
        if turns and turns[0]["role"] != "user":
            turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(conversation resumed)"}]})
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": turns}
        if system:
            body["system"] = "\n\n".join(system)
        if tools:
            body["tools"] = [
                {
                    "name": names.wire(t["name"]),
                    "description": names.rewrite(t.get("description") or ""),
                    "input_schema": t.get("inputSchema") or {"type": "object"},
                }
                for t in tools
            ]
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(self.options)
        return body

    def parse(self, answer: Mapping[str, Any], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        where = f"{self.api} endpoint {self.url}"
        if answer.get("type") == "error":
            raise ModelError(f"{where} answered with an error: {_error_text(answer)}")
        content = answer.get("content")
        if not isinstance(content, list):
            raise ModelError(f"{where} answered without a content list: {_shorten(orjson.dumps(answer).decode(), 200)}")
        names = WireNames.build(t["name"] for t in tools)
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for index, block in enumerate(content):
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "tool_use":
                if not isinstance(block.get("name"), str) or not isinstance(block.get("id"), str):
                    raise ModelError(f"{where} answered content[{index}] (tool_use) without a name and id: {block!r}")
                calls.append(
                    {"id": block["id"], "name": names.internal(block["name"]), "arguments": block.get("input") or {}}
                )
            elif kind is None:
                raise ModelError(f"{where} answered content[{index}] that is not a content block: {block!r}")
            # other blocks (thinking, redacted_thinking, server tools) are not the host's to act on
        if answer.get("stop_reason") == "max_tokens" and not calls and not texts:
            raise ModelError(
                f"{where} stopped at max_tokens ({self.max_tokens}) before saying anything; raise max_tokens"
            )
        return {"content": "".join(texts), "tool_calls": calls}

    async def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        headers = {**self.headers, "anthropic-version": self.version}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        answer = await _post(self.api, self.url, _headers(headers), self.request(messages, tools), self.timeout)
        return self.parse(answer, tools)


# -- configuration ---------------------------------------------------------------------------------------

APIS = {"openai": OpenAICompatibleModel, "anthropic": AnthropicMessagesModel}
_KEYS: dict[str, type | tuple[type, ...]] = {
    "api": str,
    "base_url": str,
    "model": str,
    "api_key": str,
    "api_key_env": str,
    "timeout": (int, float),
    "max_tokens": int,
    "temperature": (int, float),
    "headers": dict,
    "options": dict,
}


def model_from_config(
    table: Mapping[str, Any], *, where: str = "model"
) -> OpenAICompatibleModel | AnthropicMessagesModel:
    """One host model from a table: ``api`` (``openai`` | ``anthropic``), ``model``, ``base_url``,
    ``api_key`` or ``api_key_env`` (the environment variable holding it), ``timeout``,
    ``max_tokens``, ``temperature``, ``headers``, ``options``. Errors are ConfigErrors naming the key."""
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; expected one of: {', '.join(_KEYS)}")
    for key, kind in _KEYS.items():
        if key in table and (not isinstance(table[key], kind) or isinstance(table[key], bool)):
            expected = kind.__name__ if isinstance(kind, type) else "a number"
            raise ConfigError(f"{where}.{key}: expected {expected}, got {table[key]!r}")
    api = table.get("api", "openai")
    if api not in APIS:
        raise ConfigError(f"{where}.api: expected 'openai' (chat completions) or 'anthropic' (messages), got {api!r}")
    if not table.get("model"):
        raise ConfigError(f"{where}.model: required (the model's name at the endpoint)")
    if api == "openai" and not table.get("base_url"):
        raise ConfigError(
            f"{where}.base_url: required for api = 'openai' (e.g. http://127.0.0.1:8080/v1 for llama-server, "
            "http://127.0.0.1:11434/v1 for Ollama, https://api.openai.com/v1)"
        )
    options = {
        k: table[k]
        for k in ("base_url", "model", "api_key", "timeout", "max_tokens", "temperature", "headers", "options")
        if k in table
    }
    if "api_key_env" in table and "api_key" not in table:
        secret = os.environ.get(table["api_key_env"])
        if not secret:
            raise ConfigError(f"{where}.api_key_env: the environment variable {table['api_key_env']} is not set")
        options["api_key"] = secret
    for key in ("timeout", "max_tokens"):
        if key in options and options[key] <= 0:
            raise ConfigError(f"{where}.{key}: must be positive, got {options[key]!r}")
    return APIS[api](**options)  # type: ignore[no-any-return]


class TierModels(Mapping[str, Any]):
    """Host models by tier, with a default for tiers not named (a Mapping, as ``Host`` takes)."""

    def __init__(self, tiers: Mapping[str, Any], default: Any = None) -> None:
        self.tiers = dict(tiers)
        self.default = default

    def __getitem__(self, identity: str) -> Any:
        if identity in self.tiers:
            return self.tiers[identity]
        if self.default is not None:
            return self.default
        raise KeyError(identity)

    def __iter__(self) -> Iterator[str]:
        return iter(self.tiers)

    def __len__(self) -> int:
        return len(self.tiers)


def models_from_config(table: Mapping[str, Any], *, where: str = "models") -> TierModels:
    """Host models from ``{"default": {...}, "tiers": {"<tier>": {...}}}``: each tier's table is laid
    over ``default`` (so a tier may name only its ``model``); a tier not named uses ``default``."""
    unknown = sorted(set(table) - {"default", "tiers"})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; expected [default] and [tiers.<tier>]")
    default = table.get("default") or {}
    tiers = table.get("tiers") or {}
    if not isinstance(default, Mapping) or not isinstance(tiers, Mapping):
        raise ConfigError(f"{where}: default and tiers are tables")
    if not default and not tiers:
        raise ConfigError(f"{where}: no model: give [default] (every tier) or [tiers.<tier>]")
    built = {}
    for tier, own in tiers.items():
        if not isinstance(own, Mapping):
            raise ConfigError(f"{where}.tiers.{tier}: expected a table, got {own!r}")
        built[tier] = model_from_config({**default, **own}, where=f"{where}.tiers.{tier}")
    return TierModels(built, model_from_config(default, where=f"{where}.default") if default else None)
