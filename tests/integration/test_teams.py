"""Teams: `serve --transport http` in OAuth resource-server mode, against a local issuer over HTTP.

A real `entropic-mcp serve` subprocess fetches the signing keys of an issuer running in the test
(keys generated here, rotated here); the official MCP client and fastmcp's client send bearer
tokens of every protocol era. What one person's token maps to applies to them alone.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import ENTROPIC_MCP, HTTPServe, serve_env, start_http, stop, write_project

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

HTTP_ERAS = ("2026-07-28", "2025-11-25", "2025-06-18")
RESOURCE = "http://127.0.0.1:8765/mcp"
KIND = "entropic-mcp/kind"


class Issuer:
    """An authorization server's public face: discovery and a JWKS that can rotate."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self._ec = ec
        self.keys: dict[str, Any] = {}
        self.published: list[str] = []
        self.add_key("k1")
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body: Any = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"}
                elif self.path == "/jwks":
                    body = {"keys": [issuer.public_jwk(kid) for kid in issuer.published]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add_key(self, kid: str, *, publish: bool = True) -> None:
        self.keys[kid] = self._ec.generate_private_key(self._ec.SECP256R1())
        if publish:
            self.published.append(kid)

    def public_jwk(self, kid: str) -> dict[str, Any]:
        from jwt.algorithms import ECAlgorithm

        return {**json.loads(ECAlgorithm.to_jwk(self.keys[kid].public_key())), "kid": kid, "alg": "ES256"}

    def token(self, sub: str = "alice", kid: str = "k1", **overrides: Any) -> str:
        import jwt

        now = int(time.time())
        claims = {"iss": self.url, "aud": RESOURCE, "sub": sub, "exp": now + 600, "iat": now, "scope": "mcp"}
        claims.update(overrides)
        return jwt.encode(
            {k: v for k, v in claims.items() if v is not None}, self.keys[kid], algorithm="ES256", headers={"kid": kid}
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def teams_config(issuer_url: str, store: Path, extra: str = "") -> str:
    return f"""\
[entropic_mcp]
plugins = ["probe", "entropic"]
[storage]
backend = "tinydb"
path = "{store}"
options = {{audit_flush_seconds = 0.1}}
[serve]
tool_names = "dotted"
[permissions]
default = "ask"
allow = ["probe.echo", "probe.info", "probe.sleep", "entropic.todo"]
[identities.lead]
keys = {{"*" = "WRITE"}}
[identities.reader]
keys = {{"probe.*" = "READ", "entropic.*" = "WRITE"}}
[auth]
issuer = "{issuer_url}"
resource = "{RESOURCE}"
required_scopes = ["mcp"]
default_identity = "reader"
jwks_cooldown = 0
[auth.identities]
"group:maintainers" = "lead"
{extra}"""


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    server = Issuer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def team_serve(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[HTTPServe]:
    """One serve for the module (each test uses its own subjects and keys): starting one costs seconds."""
    tmp_path = tmp_path_factory.mktemp("team")
    project = write_project(tmp_path / "project", teams_config(issuer.url, tmp_path / "store"))
    served = start_http(project)
    try:
        yield served
    finally:
        stop(served.process)


@asynccontextmanager
async def connect(url: str, era: str, token: str, *, elicitation: Any = None) -> AsyncIterator[Any]:
    """The official SDK client of ``era`` sending ``Authorization: Bearer <token>``."""
    import httpx2
    from mcp import Client, ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
    from mcp_types import (
        ClientCapabilities,
        ElicitationCapability,
        Implementation,
        InitializedNotification,
        InitializeRequest,
        InitializeRequestParams,
        InitializeResult,
    )

    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        if era != "2025-06-18":
            mode = "legacy" if era == "2025-11-25" else "auto"
            async with Client(transport, mode=mode, elicitation_callback=elicitation, read_timeout_seconds=30) as c:
                assert c.protocol_version == era
                yield c
            return
        async with transport as (read, write):
            session = ClientSession(
                dispatcher=JSONRPCDispatcher(read, write), elicitation_callback=elicitation, read_timeout_seconds=30
            )
            async with session:
                result = await session.send_request(
                    InitializeRequest(
                        params=InitializeRequestParams(
                            protocol_version="2025-06-18",
                            capabilities=ClientCapabilities(
                                elicitation=ElicitationCapability() if elicitation else None
                            ),
                            client_info=Implementation(name="host-2025-06-18", version="1"),
                        )
                    ),
                    InitializeResult,
                )
                assert result.protocol_version == "2025-06-18"
                session.adopt(result)
                await session.send_notification(InitializedNotification())
                yield session


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _post(url: str, token: str | None, **headers: str) -> Any:
    import httpx2

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx2.post(url, json=body, headers={"accept": "application/json, text/event-stream", **headers}, timeout=10)


def _challenge(response: Any) -> str:
    return str(response.headers.get("www-authenticate", ""))


# -- the resource's metadata and its refusals -----------------------------------------------------


def test_metadata_answers_without_a_token_and_every_refusal_points_to_it(team_serve: HTTPServe, issuer: Issuer) -> None:
    import httpx2

    base = team_serve.url.removesuffix("/mcp")
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        answer = httpx2.get(base + path, timeout=10)
        assert answer.status_code == 200, path
        document = answer.json()
        assert document["resource"] == RESOURCE and document["authorization_servers"] == [issuer.url]
        assert document["scopes_supported"] == ["mcp"]
    # The authorization server's own metadata is the issuer's to publish: 404 here, not 401.
    assert httpx2.get(base + "/.well-known/oauth-authorization-server", timeout=10).status_code == 404
    missing = _post(team_serve.url, None)
    assert missing.status_code == 401
    assert _challenge(missing) == (
        'Bearer resource_metadata="http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp", scope="mcp"'
    )


@pytest.mark.parametrize(
    ("claims", "status", "says"),
    [
        ({"exp": int(time.time()) - 3600}, 401, "expired"),
        ({"aud": "http://elsewhere.example/mcp"}, 401, "not for this resource"),
        ({"iss": "http://127.0.0.1:1/another-issuer"}, 401, "not issued by"),
        ({"scope": "email"}, 403, "lacks scope mcp"),
    ],
    ids=["expired", "wrong-audience", "wrong-issuer", "missing-scope"],
)
def test_a_bad_token_is_refused_with_the_right_challenge(
    team_serve: HTTPServe, issuer: Issuer, claims: dict[str, Any], status: int, says: str
) -> None:
    refused = _post(team_serve.url, issuer.token(**claims))
    assert refused.status_code == status and says in refused.text
    challenge = _challenge(refused)
    assert challenge.startswith(
        'Bearer resource_metadata="http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"'
    )
    assert ('error="insufficient_scope"' if status == 403 else 'error="invalid_token"') in challenge
    assert 'scope="mcp"' in challenge


def test_a_tampered_signature_is_refused(team_serve: HTTPServe, issuer: Issuer) -> None:
    header, payload, signature = issuer.token().split(".")
    forged = json.loads(_b64decode(payload))
    forged["sub"] = "root"
    tampered = ".".join([header, _b64encode(json.dumps(forged).encode()), signature])
    refused = _post(team_serve.url, tampered)
    assert refused.status_code == 401 and 'error="invalid_token"' in _challenge(refused)
    assert _post(team_serve.url, issuer.token()).status_code == 200  # the untouched token is fine


def test_an_unknown_key_id_is_refused_until_the_issuer_publishes_it(team_serve: HTTPServe, issuer: Issuer) -> None:
    issuer.add_key("k2", publish=False)
    token = issuer.token(kid="k2")
    refused = _post(team_serve.url, token)
    assert refused.status_code == 401 and 'error="invalid_token"' in _challenge(refused)
    issuer.published.append("k2")  # rotation: the new key is published; serve fetches the set again
    assert _post(team_serve.url, token).status_code == 200


def test_a_session_stays_with_the_person_who_opened_it(team_serve: HTTPServe, issuer: Issuer) -> None:
    opened = _post(team_serve.url, issuer.token("alice"))
    session = opened.headers["mcp-session-id"]
    hijack = _post(
        team_serve.url, issuer.token("bob"), **{"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    )
    assert hijack.status_code == 404


def _b64decode(part: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _b64encode(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# -- identities: the token's, never the client's --------------------------------------------------


@pytest.mark.parametrize("era", HTTP_ERAS)
async def test_the_mapped_identitys_access_keys_apply(team_serve: HTTPServe, issuer: Issuer, era: str) -> None:
    async with connect(team_serve.url, era, issuer.token("ann", groups=["maintainers"])) as lead:
        assert (await lead.call_tool("probe.sleep", {"seconds": 0})).is_error is False
    async with connect(team_serve.url, era, issuer.token("rob")) as reader:
        assert _text(await reader.call_tool("probe.echo", {"text": "hi"})) == "hi"
        refused = await reader.call_tool("probe.sleep", {"seconds": 0})
        assert refused.is_error is True and refused.meta[KIND] == "rejected_access"
        assert "'reader' holds READ access to 'probe.sleep'" in _text(refused)
        # Nothing the client sends names another identity.
        spoofed = await reader.call_tool(
            "probe.sleep", {"seconds": 0}, meta={"entropic-mcp/identity": "lead", "identity": "lead"}
        )
        assert spoofed.meta[KIND] == "rejected_access"


@pytest.mark.parametrize("era", ("2026-07-28", "2025-11-25"))  # fastmcp offers its newest handshake only
async def test_fastmcp_client_with_bearer_auth(team_serve: HTTPServe, issuer: Issuer, era: str) -> None:
    from fastmcp import Client

    mode = "legacy" if era == "2025-11-25" else "auto"
    async with Client(team_serve.url, auth=issuer.token("rob"), mode=mode) as client:
        assert client.protocol_version == era
        echoed = await client.call_tool("probe.echo", {"text": "from fastmcp"})
        assert echoed.content[0].text == "from fastmcp"
        refused = await client.call_tool("probe.sleep", {"seconds": 0}, raise_on_error=False)
        assert refused.is_error and "'reader' holds READ access" in refused.content[0].text
    with pytest.raises(Exception):  # noqa: B017 - fastmcp wraps the 401 in its own error
        async with Client(team_serve.url, auth=issuer.token("rob", exp=int(time.time()) - 3600), mode=mode) as c:
            await c.call_tool("probe.echo", {"text": "never"})


# -- per person: conversations, todo lists, approvals, "always allow", the audit -------------------


@pytest.mark.parametrize("era", HTTP_ERAS)
async def test_two_people_with_one_conversation_key_see_only_their_own(
    team_serve: HTTPServe, issuer: Issuer, era: str
) -> None:
    meta = {"entropic-mcp/conversation": f"standup-{era}"}
    async with connect(team_serve.url, era, issuer.token(f"alice-{era}")) as alice:
        await alice.call_tool("entropic.todo", {"action": "add", "content": "alice's item"}, meta=meta)
        info = json.loads(_text(await alice.call_tool("probe.info", {}, meta=meta)))
        assert info["conversation"] == f"sub:alice-{era}/standup-{era}"
    async with connect(team_serve.url, era, issuer.token(f"bob-{era}")) as bob:
        listed = _text(await bob.call_tool("entropic.todo", {"action": "add", "content": "bob's item"}, meta=meta))
        assert "bob's item" in listed and "alice's item" not in listed
        info = json.loads(_text(await bob.call_tool("probe.info", {}, meta=meta)))
        assert info["conversation"] == f"sub:bob-{era}/standup-{era}"
        # A client cannot step into another person's scope by spelling it in the key.
        spelled = {"entropic-mcp/conversation": f"sub:alice-{era}/standup-{era}"}
        info = json.loads(_text(await bob.call_tool("probe.info", {}, meta=spelled)))
        assert info["conversation"] == f"sub:bob-{era}/sub:alice-{era}/standup-{era}"


@pytest.mark.parametrize("era", HTTP_ERAS)
async def test_always_allow_is_the_answering_persons_own(team_serve: HTTPServe, issuer: Issuer, era: str) -> None:
    from mcp_types import ElicitResult

    asked: list[str] = []

    def answering(decision: str) -> Any:
        async def elicit(context: Any, params: Any) -> ElicitResult:
            asked.append(decision)
            return ElicitResult(action="accept", content={"decision": decision})

        return elicit

    note = {"text": f"shared {era}"}  # one permission pattern: probe.note(<text>)

    def once(n: int) -> dict[str, str]:  # a conversation per call: the duplicate guard stays out of it
        return {"entropic-mcp/conversation": f"c{n}"}

    async with connect(
        team_serve.url, era, issuer.token(f"alice-{era}", groups=["maintainers"]), elicitation=answering("always_allow")
    ) as alice:
        assert (await alice.call_tool("probe.note", note, meta=once(1))).is_error is False
        assert asked == ["always_allow"]
        assert (await alice.call_tool("probe.note", note, meta=once(2))).is_error is False
        assert asked == ["always_allow"]  # her answer stands: not asked again
    async with connect(team_serve.url, era, issuer.token(f"alice-{era}", groups=["maintainers"])) as alice:
        # Even through a client that cannot be asked.
        assert (await alice.call_tool("probe.note", note, meta=once(3))).is_error is False
    async with connect(team_serve.url, era, issuer.token(f"bob-{era}", groups=["maintainers"])) as bob:
        refused = await bob.call_tool("probe.note", note, meta=once(4))
        assert refused.meta[KIND] == "rejected_permission" and "approval" in _text(refused)
    async with connect(
        team_serve.url, era, issuer.token(f"bob-{era}", groups=["maintainers"]), elicitation=answering("deny_once")
    ) as bob:
        denied = await bob.call_tool("probe.note", note, meta=once(5))
        assert denied.meta[KIND] == "rejected_permission" and "denied" in _text(denied)
        assert asked == ["always_allow", "deny_once"]
    assert not (team_serve.log.parent / "project" / "entropic-mcp.local.toml").exists()  # no rule for everyone


async def test_the_audit_names_the_subject(tmp_path: Path, issuer: Issuer) -> None:
    project = write_project(tmp_path / "project", teams_config(issuer.url, tmp_path / "store"))
    served = start_http(project)
    try:
        for person, groups in (("alice", ["maintainers"]), ("bob", [])):
            async with connect(served.url, "2026-07-28", issuer.token(person, groups=groups)) as peer:
                await peer.call_tool("probe.echo", {"text": person}, meta={"entropic-mcp/conversation": "c"})
    finally:
        stop(served.process)  # SIGTERM: the audit is flushed
    records = [
        json.loads(line)
        for path in (tmp_path / "store").rglob("tool_calls.jsonl")
        for line in path.read_text().splitlines()
    ]
    seen = {(r["subject"], r["identity"], r["conversation_id"]) for r in records if r["tool"] == "probe.echo"}
    assert seen == {("alice", "lead", "sub:alice/c"), ("bob", "reader", "sub:bob/c")}


# -- configuration mistakes: one line at start-up -------------------------------------------------


def _serve_fails(project: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(ENTROPIC_MCP), "serve", "--transport", "http", "--port", "0"],
        cwd=project,
        env=serve_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    return result.stderr


def test_misconfigured_auth_is_one_line(tmp_path: Path, issuer: Issuer) -> None:
    store = tmp_path / "store"
    config = teams_config(issuer.url, store)
    no_issuer = write_project(tmp_path / "a", config.replace(f'issuer = "{issuer.url}"\n', ""))
    assert "[auth] issuer: required" in _serve_fails(no_issuer)
    unreachable = write_project(tmp_path / "b", config.replace(issuer.url, "http://127.0.0.1:9"))
    stderr = _serve_fails(unreachable)
    assert "no signing keys found for issuer 'http://127.0.0.1:9'" in stderr
    both = write_project(tmp_path / "c", config)
    assert "both [auth] (OAuth) and ENTROPIC_MCP_TOKEN are set" in _serve_fails(
        both, {"ENTROPIC_MCP_TOKEN": "a-long-static-token-for-tests"}
    )


def test_oauth_mode_serves_a_non_loopback_address_without_the_static_token(tmp_path: Path, issuer: Issuer) -> None:
    project = write_project(tmp_path / "project", teams_config(issuer.url, tmp_path / "store"))
    served = start_http(project, "--host", "0.0.0.0")
    try:
        url = served.url.replace("0.0.0.0", "127.0.0.1")
        assert _post(url, None).status_code == 401
        assert _post(url, issuer.token()).status_code == 200
    finally:
        stop(served.process)
