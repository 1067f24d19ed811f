"""OAuth resource-server mode: tokens from a local issuer serving its keys over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from entropic_mcp._errors import ConfigError
from entropic_mcp._serve._oauth import AuthFailure, AuthSettings, TokenVerifier, challenge
from jwt.algorithms import ECAlgorithm

RESOURCE = "http://127.0.0.1:8765/mcp"


class Issuer:
    """An authorization server's public face: discovery, a rotatable JWKS, introspection."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.opaque: dict[str, dict[str, Any]] = {}
        self.jwks_fetches = 0
        self.add_key("k1")
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _json(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    self._json(200, {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"})
                elif self.path == "/jwks":
                    issuer.jwks_fetches += 1
                    self._json(200, {"keys": [issuer.public_jwk(kid) for kid in issuer.keys]})
                else:
                    self._json(404, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                form = parse_qs(self.rfile.read(length).decode())
                if self.path != "/introspect" or not self.headers.get("Authorization", "").startswith("Basic "):
                    self._json(401, {})
                    return
                self._json(200, issuer.opaque.get(form["token"][0], {"active": False}))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add_key(self, kid: str) -> None:
        self.keys[kid] = ec.generate_private_key(ec.SECP256R1())

    def public_jwk(self, kid: str) -> dict[str, Any]:
        jwk = json.loads(ECAlgorithm.to_jwk(self.keys[kid].public_key()))
        return {**jwk, "kid": kid, "use": "sig", "alg": "ES256"}

    def token(self, kid: str = "k1", **overrides: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "aud": RESOURCE, "sub": "alice", "exp": now + 300, "iat": now, "scope": "mcp"}
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.keys[kid], algorithm="ES256", headers={"kid": kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    server = Issuer()
    yield server
    server.close()


def verifier_for(issuer: Issuer, **settings: Any) -> TokenVerifier:
    table = {
        "issuer": issuer.url,
        "resource": RESOURCE,
        "required_scopes": ["mcp"],
        "identities": {"sub:root": "lead", "group:maintainers": "lead", "claim:team=red": "coder"},
        "default_identity": "researcher",
        "jwks_cooldown": 0,
        **settings,
    }
    verifier = TokenVerifier(AuthSettings.from_table(table))
    verifier.start()
    return verifier


def refused(verifier: TokenVerifier, header: str | None) -> AuthFailure:
    with pytest.raises(AuthFailure) as caught:
        verifier.verify(header)
    return caught.value


def test_a_valid_token_speaks_for_its_mapped_identity(issuer: Issuer) -> None:
    verifier = verifier_for(issuer)
    principal = verifier.verify("Bearer " + issuer.token(groups=["maintainers"]))
    assert (principal.subject, principal.identity, principal.scopes) == ("alice", "lead", ("mcp",))
    assert verifier.verify("Bearer " + issuer.token(sub="bob", team="red")).identity == "coder"
    assert verifier.verify("Bearer " + issuer.token(sub="carol")).identity == "researcher"


def test_without_a_default_an_unmapped_subject_is_forbidden(issuer: Issuer) -> None:
    verifier = verifier_for(issuer, default_identity=None)
    failure = refused(verifier, "Bearer " + issuer.token(sub="mallory"))
    assert failure.status == 403 and "no identity is mapped for subject 'mallory'" in failure.description


@pytest.mark.parametrize(
    ("claims", "says"),
    [
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"aud": "http://elsewhere/mcp"}, "not for this resource"),
        ({"iss": "http://127.0.0.1:1/other"}, "not issued by"),
        ({"nbf": int(time.time()) + 3600}, "not valid yet"),
        ({"exp": None}, "not valid"),
        ({"sub": None}, "not valid"),
    ],
)
def test_invalid_tokens_are_401_saying_why(issuer: Issuer, claims: dict[str, Any], says: str) -> None:
    failure = refused(verifier_for(issuer), "Bearer " + issuer.token(**claims))
    assert failure.status == 401 and failure.error == "invalid_token" and says in failure.description


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_tampered_signature_is_refused(issuer: Issuer) -> None:
    head, body, signature = issuer.token().split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=="))
    forged = _b64(json.dumps({**claims, "sub": "root"}).encode())
    for token in (f"{head}.{forged}.{signature}", f"{head}.{body}.{signature[:-4]}AAAA"):
        failure = refused(verifier_for(issuer), "Bearer " + token)
        assert failure.status == 401 and failure.error == "invalid_token"


def test_an_hmac_token_signed_with_the_public_key_is_refused(issuer: Issuer) -> None:
    """The classic algorithm confusion: HS256 with the public key as the secret."""
    public = json.dumps(issuer.public_jwk("k1")).encode()
    claims = {"iss": issuer.url, "aud": RESOURCE, "sub": "root", "exp": int(time.time()) + 60, "scope": "mcp"}
    signed = (
        _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode()) + "." + _b64(json.dumps(claims).encode())
    )
    token = signed + "." + _b64(hmac.new(public, signed.encode(), hashlib.sha256).digest())
    assert refused(verifier_for(issuer), "Bearer " + token).status == 401


def test_a_missing_scope_is_403_naming_it(issuer: Issuer) -> None:
    failure = refused(verifier_for(issuer, required_scopes=["mcp", "tools"]), "Bearer " + issuer.token(scope="mcp"))
    assert (failure.status, failure.error, failure.scope) == (403, "insufficient_scope", "tools")


def test_a_rotated_key_is_fetched_when_a_token_names_it(issuer: Issuer) -> None:
    verifier = verifier_for(issuer)
    assert verifier.verify("Bearer " + issuer.token()).subject == "alice"
    fetches = issuer.jwks_fetches
    issuer.add_key("k2")
    del issuer.keys["k1"]
    assert verifier.verify("Bearer " + issuer.token("k2", sub="dave")).subject == "dave"
    assert issuer.jwks_fetches == fetches + 1
    unknown = jwt.encode(
        {"sub": "x"}, ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers={"kid": "k9"}
    )
    assert refused(verifier, "Bearer " + unknown).status == 401


def test_no_token_or_another_scheme_is_401_without_an_error_code(issuer: Issuer) -> None:
    verifier = verifier_for(issuer)
    for header in (None, "", "Basic abc", "Bearer "):
        failure = refused(verifier, header)
        assert failure.status == 401 and failure.error == ""


def test_opaque_tokens_are_introspected(issuer: Issuer) -> None:
    verifier = verifier_for(
        issuer, introspection_endpoint=issuer.url + "/introspect", client_id="mcp", client_secret="s3cret"
    )
    issuer.opaque["opaque-good"] = {"active": True, "sub": "erin", "scope": "mcp", "aud": RESOURCE, "iss": issuer.url}
    issuer.opaque["opaque-noscope"] = {"active": True, "sub": "erin", "scope": "other"}
    assert verifier.verify("Bearer opaque-good").identity == "researcher"
    assert refused(verifier, "Bearer opaque-unknown").status == 401
    assert refused(verifier, "Bearer opaque-noscope").status == 403
    assert "no introspection endpoint" in refused(verifier_for(issuer), "Bearer opaque-good").description


def test_the_challenge_names_the_metadata_and_what_is_missing(issuer: Issuer) -> None:
    settings = AuthSettings.from_table({"issuer": issuer.url, "resource": RESOURCE, "required_scopes": ["mcp"]})
    assert settings.metadata_url == "http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"
    assert settings.metadata == {
        "resource": RESOURCE,
        "authorization_servers": [issuer.url],
        "bearer_methods_supported": ["header"],
        "resource_name": "entropic-mcp",
        "scopes_supported": ["mcp"],
    }
    plain = challenge(settings).decode()
    assert plain == f'Bearer resource_metadata="{settings.metadata_url}", scope="mcp"'
    detailed = challenge(settings, AuthFailure(403, "insufficient_scope", 'lacks "x"', scope="x")).decode()
    assert 'error="insufficient_scope"' in detailed and "error_description=\"lacks 'x'\"" in detailed
    assert detailed.endswith('scope="x"')


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"resource": RESOURCE}, "[auth] issuer: required"),
        ({"issuer": "http://127.0.0.1:1"}, "[auth] resource: required"),
        ({"issuer": "http://x", "resource": RESOURCE, "algorithms": ["HS256"]}, "HS256 not accepted"),
        ({"issuer": "http://x", "resource": RESOURCE, "colour": 1}, "unknown key(s) colour"),
        ({"issuer": "http://x", "resource": RESOURCE, "identities": {"team:x": "lead"}}, "expected 'sub:<subject>'"),
        ({"issuer": "http://x", "resource": RESOURCE, "introspection_endpoint": "http://x/i"}, "needs client_id"),
    ],
)
def test_configuration_mistakes_are_one_clear_line(table: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=None) as caught:
        AuthSettings.from_table(table)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_an_unreachable_issuer_is_one_line_at_start() -> None:
    settings = AuthSettings.from_table({"issuer": "http://127.0.0.1:9", "resource": RESOURCE, "timeout": 2})
    with pytest.raises(ConfigError) as caught:
        TokenVerifier(settings).start()
    assert "no signing keys found for issuer 'http://127.0.0.1:9'" in str(caught.value)
    assert "\n" not in str(caught.value)
