"""Streamable HTTP: loopback by default, Origin and Host checked, a bearer token for anything else.

Two ways to require a bearer token: the static ``ENTROPIC_MCP_TOKEN`` (one shared secret, one
user), or ``[auth]`` (OAuth 2.1 resource-server mode: each person's own access token from the
identity provider, verified and mapped to an identity by ``_oauth.TokenVerifier``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import os
import socket
import sys
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import orjson
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .._errors import ConfigError
from ._oauth import METADATA_PATH, PRINCIPAL_KEY, AuthFailure, TokenVerifier, challenge

if TYPE_CHECKING:
    from .._config import Config
    from ._oauth import Principal

log = logging.getLogger("entropic_mcp.serve")

TOKEN_ENV = "ENTROPIC_MCP_TOKEN"
PATH = "/mcp"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
HANDSHAKE_VERSIONS = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)
_CHECKED = frozenset({b"origin", b"host", b"authorization", b"mcp-session-id"})
#: Handshake-era sessions remembered with the subject that opened them (oldest forgotten first).
MAX_BOUND_SESSIONS = 65536


def is_loopback(host: str) -> bool:
    if host.strip("[]") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_for(host: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The bearer token required on ``host``; refuses a non-loopback address without one."""
    token = (environ if environ is not None else os.environ).get(TOKEN_ENV, "").strip() or None
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve HTTP on {host!r} without a bearer token: set {TOKEN_ENV} to a long random "
            "secret (clients send 'Authorization: Bearer <token>'), or bind 127.0.0.1"
        )
    if token is not None and len(token) < 16:
        raise ConfigError(f"{TOKEN_ENV} is too short ({len(token)} characters); use at least 16 random characters")
    return token


def check_http_auth(config: Config, host: str, environ: Mapping[str, str] | None = None) -> TokenVerifier | None:
    """How HTTP requests are authenticated, refused in one line if misconfigured.

    ``[auth]`` set: a started TokenVerifier (the issuer's keys fetched now, so a wrong issuer or
    an unreachable key set stops serve at start-up); else the static token rule of ``token_for``.
    """
    env = environ if environ is not None else os.environ
    if config.auth is None:
        token_for(host, env)
        return None
    if env.get(TOKEN_ENV, "").strip():
        raise ConfigError(
            f"both [auth] (OAuth) and {TOKEN_ENV} are set; unset {TOKEN_ENV} to serve OAuth tokens, "
            "or remove [auth] to keep the one shared token"
        )
    verifier = TokenVerifier(config.auth)
    verifier.start()
    return verifier


def _origin_allowed(origin: str, allowed: Iterable[str]) -> bool:
    for pattern in allowed:
        if origin == pattern:
            return True
        if pattern.endswith(":*") and origin.startswith(pattern[:-2] + ":"):
            return True
    parts = urlsplit(origin)
    # Local tools (the MCP Inspector's web UI, a local web client) are same-machine origins.
    return parts.scheme in ("http", "https") and parts.hostname is not None and is_loopback(parts.hostname)


class Guard:
    """ASGI middleware in front of the SDK app: Origin, Host (on loopback) and bearer token.

    With a ``verifier`` (``[auth]``), the protected-resource metadata answers without a token;
    every other request needs a valid access token, whose Principal the Guard puts in the scope
    (``PRINCIPAL_KEY``) for serve to read, and a handshake-era session stays its opener's: a
    request naming another subject's ``mcp-session-id`` is answered 404 like an unknown one.
    """

    def __init__(
        self,
        app: Any,
        *,
        token: str | None,
        allowed_origins: Iterable[str],
        loopback: bool,
        probes: Any = None,
        verifier: TokenVerifier | None = None,
    ) -> None:
        self.app = app
        self.probes = probes
        self.token = token.encode() if token else None
        self.allowed_origins = tuple(allowed_origins)
        self.loopback = loopback
        self.verifier = verifier
        self.metadata_paths: frozenset[str] = frozenset()
        self.metadata = b""
        self.sessions: OrderedDict[str, str] = OrderedDict()
        if verifier is not None:
            settings = verifier.settings
            suffixed = METADATA_PATH + urlsplit(settings.resource).path.rstrip("/")
            self.metadata_paths = frozenset({METADATA_PATH, suffixed, urlsplit(settings.metadata_url).path})
            self.metadata = orjson.dumps(settings.metadata)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for key, value in scope["headers"]:
            if key in _CHECKED:
                headers[key.decode("latin-1")] = value.decode("latin-1")
        origin = headers.get("origin")
        if origin and not _origin_allowed(origin, self.allowed_origins):
            log.warning("refused a request from Origin %r", origin[:200])
            await _respond(send, 403, "Forbidden: Origin not allowed (add it to [serve] allowed_origins)")
            return
        if self.loopback:
            host = headers.get("host", "")
            name = urlsplit(f"//{host}").hostname or ""
            if not is_loopback(name):
                await _respond(send, 421, "Misdirected Request: Host is not a loopback name")
                return
        if self.probes is not None and self.probes.handles(scope["path"]):
            await self.probes(scope, send)  # liveness and readiness answer without the token
            return
        if self.verifier is not None:
            await self._oauth(scope, receive, send, headers)
            return
        if self.token is not None:
            given = headers.get("authorization", "")
            scheme, _, credential = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(credential.strip().encode(), self.token):
                await _respond(
                    send,
                    401,
                    "Unauthorized: send Authorization: Bearer <ENTROPIC_MCP_TOKEN>",
                    [(b"www-authenticate", b'Bearer realm="entropic-mcp"')],
                )
                return
        await self.app(scope, receive, send)

    async def _oauth(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[str, str]) -> None:
        verifier = self.verifier
        assert verifier is not None
        if scope["path"] in self.metadata_paths:
            # RFC 9728: clients read it before they hold a token; browsers read it cross-origin.
            await _respond(
                send, 200, self.metadata, [(b"access-control-allow-origin", b"*")], content_type=b"application/json"
            )
            return
        if scope["path"].startswith("/.well-known/"):
            # Not 401: a client probing for authorization-server metadata here must look at the issuer.
            await _respond(
                send,
                404,
                f"Not Found: this server is an OAuth resource; its authorization server is {verifier.settings.issuer}",
            )
            return
        authorization = headers.get("authorization")
        principal = verifier.remembered(authorization)
        if principal is None:
            try:
                # The first request of a token may fetch the issuer's keys (a rotation) or ask its
                # introspection endpoint: never on the event loop.
                principal = await anyio.to_thread.run_sync(verifier.verify, authorization)
            except AuthFailure as failure:
                log.info("auth: %d %s (%s)", failure.status, failure.error or "no token", failure.description)
                await _respond(
                    send,
                    failure.status,
                    f"{'Unauthorized' if failure.status == 401 else 'Forbidden'}: {failure.description}",
                    [(b"www-authenticate", challenge(verifier.settings, failure))],
                )
                return
        session = headers.get("mcp-session-id")
        if session is not None:
            owner = self.sessions.get(session)
            if owner is not None and owner != principal.subject:
                log.warning("auth: %r sent the session id of another subject; answered as unknown", principal.subject)
                await _respond(send, 404, "Not Found: no such session (start a new one)")
                return
        scope[PRINCIPAL_KEY] = principal
        await self.app(scope, receive, self._binding(send, principal) if session is None else send)

    def _binding(self, send: Any, principal: Principal) -> Any:
        """``send``, noting the session a handshake answer opens as ``principal``'s."""

        async def bind(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", ()):
                    if key.lower() == b"mcp-session-id":
                        self.sessions[value.decode("latin-1")] = principal.subject
                        while len(self.sessions) > MAX_BOUND_SESSIONS:
                            self.sessions.popitem(last=False)
            await send(message)

        return bind


async def _respond(
    send: Any,
    status: int,
    text: str | bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
    *,
    content_type: bytes = b"text/plain; charset=utf-8",
) -> None:
    body = text.encode() if isinstance(text, str) else text
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _modern(scope: dict[str, Any]) -> bool:
    """A 2026-07-28-era POST, routed as the SDK routes it: a protocol-version header that is not a handshake one."""
    if scope["method"] != "POST":
        return False
    for key, value in scope["headers"]:
        if key == b"mcp-protocol-version":
            return value.decode("latin-1") not in HANDSHAKE_VERSIONS
    return False


def _wants_stream(body: bytes) -> bool:
    """Whether the request asked for progress (``params._meta.progressToken``), which needs SSE."""
    if b'"progressToken"' not in body:
        return False  # the common case, decided without parsing the body a second time
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(message, dict):
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get("progressToken") is not None


class Endpoint:
    """The one route: ``/mcp`` to the SDK's Streamable HTTP session managers, 404 for anything else.

    The SDK answers a 2026-07-28 request either as a JSON response or as an SSE stream that it
    keeps open (with a task group watching for the client going away) in case the handler emits
    notifications. Serve lets the SDK stream only what can emit — requests that asked for
    progress — and the handshake era's sessions; every other 2026-07-28 request goes to a JSON
    session manager, with one plain task watching for a disconnect, which cancels the call just as
    closing the stream does. That is about a third less CPU per call.

    The SDK's ``streamable_http_app`` wraps the same handler in a Starlette application (router,
    error and exception middleware, lifespan); serve needs none of it.
    """

    def __init__(self, streaming: Any, json: Any, *, limit: int) -> None:
        self.streaming = streaming
        self.json = json
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"].rstrip("/") != PATH:
            await _respond(send, 404, f"Not Found: the MCP endpoint is {PATH}")
            return
        if not _modern(scope):
            await self.streaming(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # gone before the body arrived
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = bool(message.get("more_body"))
            if size > self.limit:
                # The SDK answers 413; it reads what was buffered, then the rest of the stream.
                await self.streaming(scope, _replay(chunks, more, receive), send)
                return
            if not more:
                break
        body = b"".join(chunks)
        if _wants_stream(body):
            await self.streaming(scope, _replay([body], False, receive), send)
            return
        await self._answer_json(scope, body, receive, send)

    async def _answer_json(self, scope: dict[str, Any], body: bytes, receive: Any, send: Any) -> None:
        task = asyncio.current_task()
        assert task is not None
        gone = asyncio.Event()
        answered = False

        async def watch() -> None:
            try:
                while (await receive())["type"] != "http.disconnect":
                    pass
            except Exception:  # a server that cannot tell us any more: treat it as gone
                log.debug("receive failed while watching a request", exc_info=True)
            gone.set()
            if not answered:
                task.cancel()

        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await self.json(scope, replay, send)
            answered = True
        except asyncio.CancelledError:
            if gone.is_set() and task.uncancel() == 0:
                return  # the client closed the request: the call was cancelled, nobody to answer
            raise
        finally:
            watcher.cancel()


def _replay(chunks: list[bytes], more: bool, receive: Any) -> Any:
    """An ASGI ``receive`` that gives back the body already read, then reads on."""
    pending = list(chunks)

    async def replay() -> dict[str, Any]:
        if pending:
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending) or more}
        return await receive()

    return replay


def build_app(
    serve_app: Any, *, host: str, token: str | None, verifier: TokenVerifier | None = None
) -> tuple[Any, list[Any]]:
    """(the ASGI app: the SDK's Streamable HTTP handlers behind the Guard, their session managers to run)."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    settings = serve_app.settings

    def manager(json_response: bool) -> Any:
        return StreamableHTTPSessionManager(
            app=serve_app.server,
            json_response=json_response,
            # The Guard checks Host and Origin (for every address, not only loopback ones).
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=settings.max_message_bytes,
        )

    streaming, json = manager(False), manager(True)
    endpoint = Endpoint(StreamableHTTPASGIApp(streaming), StreamableHTTPASGIApp(json), limit=settings.max_message_bytes)
    from ._probes import Probes

    guarded = Guard(
        endpoint,
        token=token,
        allowed_origins=settings.allowed_origins,
        loopback=is_loopback(host),
        probes=Probes(serve_app.manager),
        verifier=verifier,
    )
    return guarded, [streaming, json]


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


async def serve_http(serve_app: Any, *, host: str, port: int) -> None:
    """Serve until cancelled (Ctrl-C / SIGTERM); the listening address goes to stderr."""
    import uvicorn

    verifier = await anyio.to_thread.run_sync(check_http_auth, serve_app.manager.config, host)
    token = None if verifier is not None else token_for(host)
    app, managers = build_app(serve_app, host=host, token=token, verifier=verifier)
    sock = bind(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    if verifier is not None:
        settings = verifier.settings
        protection = f" (OAuth: tokens from {settings.issuer} for {settings.resource})"
    else:
        protection = " (bearer token required)" if token else ""
    print(
        f"entropic-mcp: serving {len(serve_app.listing.tools)} tools on http://{shown}:{actual}{PATH}{protection}",
        file=sys.stderr,
        flush=True,
    )
    # No proxy-header rewriting: the Guard's checks are about the peer actually connected.
    from ._admission import Admission, protocol_class

    # Request heads and bodies are timed and slow connections capped before the Guard sees them:
    # a request that never finishes would otherwise hold its socket forever (docs/serving.md).
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        proxy_headers=False,
        http=protocol_class(Admission(serve_app.settings)),
    )
    server = uvicorn.Server(config)
    async with contextlib.AsyncExitStack() as stack:
        for manager in managers:
            await stack.enter_async_context(manager.run())
        await server.serve(sockets=[sock])
