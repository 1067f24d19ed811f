"""OAuth 2.1 resource-server mode for the HTTP transport: whose token is this, and who are they here.

The server never issues tokens. It publishes RFC 9728 protected-resource metadata naming the
authorization server(s), validates bearer JWTs against the issuer's JWKS (signature, ``iss``,
``aud`` = this resource, ``exp``/``nbf``, required scopes) or asks an RFC 7662 introspection
endpoint about opaque tokens, and maps the token's subject and claims to one of the configured
identities. A caller never chooses its identity: the token does, through ``[auth.identities]``.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

from .._errors import ConfigError

log = logging.getLogger("entropic_mcp.serve")

METADATA_PATH = "/.well-known/oauth-protected-resource"
#: Where the Guard puts the verified Principal in the ASGI scope (a client cannot set scope keys).
PRINCIPAL_KEY = "entropic_mcp.principal"
#: Verified JWTs remembered (by their exact text) so a client's next request costs a dictionary look-up.
VERIFIED_CACHE_SIZE = 4096
_STRING_KEYS = (
    "issuer",
    "resource",
    "jwks_uri",
    "introspection_endpoint",
    "client_id",
    "client_secret",
    "default_identity",
    "groups_claim",
    "tenant_claim",
)
_NUMBER_KEYS = ("leeway", "jwks_lifespan", "jwks_cooldown", "timeout")
#: Signature algorithms accepted when none are configured: asymmetric only (a resource server
#: holding an HMAC secret could mint tokens itself), none and HS* never.
DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_SELECTOR_KINDS = ("sub", "group", "scope", "claim")


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, Sequence):
        return tuple(str(v) for v in value)
    return ()


def _check_selector(instance: object, attribute: attrs.Attribute, value: Mapping[str, str]) -> None:
    for selector, identity in value.items():
        kind, colon, rest = selector.partition(":")
        if not colon or kind not in _SELECTOR_KINDS or not rest:
            raise ConfigError(
                f"[auth.identities] {selector!r}: expected 'sub:<subject>', 'group:<name>', 'scope:<scope>' or "
                f'\'claim:<name>=<value>\', e.g. "group:maintainers" = "lead"'
            )
        if kind == "claim" and "=" not in rest:
            raise ConfigError(f"[auth.identities] {selector!r}: a claim selector is 'claim:<name>=<value>'")
        if not isinstance(identity, str) or not identity:
            raise ConfigError(f"[auth.identities] {selector!r}: the identity must be a non-empty string")


@attrs.frozen(kw_only=True)
class AuthSettings:
    """``[auth]``: how bearer tokens are validated and mapped to identities.

    Args:
        issuer: the authorization server's issuer URL (the ``iss`` every token must carry).
        resource: this server's resource URL (``aud`` every token must carry; the metadata's
            ``resource``), e.g. ``"https://mcp.example.com/mcp"``.
        jwks_uri: where the issuer's signing keys are; None: discovered from the issuer's
            ``/.well-known/openid-configuration`` (or ``oauth-authorization-server``).
        required_scopes: scopes every token must grant.
        algorithms: accepted JWS algorithms (asymmetric only).
        introspection_endpoint: RFC 7662 endpoint for opaque (non-JWT) tokens; None: refused.
        client_id, client_secret: this resource's credentials at the introspection endpoint.
        identities: selector → identity, first match wins (``"sub:alice"``, ``"group:ops"``,
            ``"scope:mcp:admin"``, ``"claim:team=red"``).
        default_identity: the identity of a valid token no selector matches; None: refused (403).
        groups_claim: the claim holding the subject's groups.
        tenant_claim: the claim naming the conversation scope (tenant); None: the subject's own.
        leeway: seconds of clock skew allowed on ``exp``/``nbf``.
        jwks_lifespan: seconds the fetched key set is trusted before it is fetched again (an
            unknown key id fetches it at once, at most every ``jwks_cooldown`` seconds).
    """

    issuer: str
    resource: str
    jwks_uri: str | None = None
    required_scopes: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    algorithms: tuple[str, ...] = attrs.field(default=DEFAULT_ALGORITHMS, converter=tuple)
    introspection_endpoint: str | None = None
    client_id: str | None = None
    client_secret: str | None = attrs.field(default=None, repr=False)
    identities: Mapping[str, str] = attrs.field(factory=dict, validator=_check_selector)
    default_identity: str | None = None
    groups_claim: str = "groups"
    tenant_claim: str | None = None
    leeway: float = 30.0
    jwks_lifespan: float = 300.0
    jwks_cooldown: float = 10.0
    timeout: float = 5.0

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> AuthSettings:
        """Settings from the ``[auth]`` table, with one clear line for each mistake."""
        known = {f.name for f in attrs.fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"[auth]: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        for key in ("issuer", "resource"):
            if not isinstance(table.get(key), str) or not table[key].startswith(("https://", "http://")):
                raise ConfigError(f'[auth] {key}: required, an http(s) URL (e.g. {key} = "https://...")')
        for key in _STRING_KEYS:
            if table.get(key) is not None and (not isinstance(table[key], str) or not table[key]):
                raise ConfigError(f"[auth] {key}: expected a non-empty string, got {table[key]!r}")
        for key in ("jwks_uri", "introspection_endpoint"):
            if table.get(key) is not None and not table[key].startswith(("https://", "http://")):
                raise ConfigError(f"[auth] {key}: expected an http(s) URL, got {table[key]!r}")
        for key in ("required_scopes", "algorithms"):
            value = table.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f'[auth] {key}: expected a list of strings (e.g. {key} = ["mcp"]), got {value!r}')
        for key in _NUMBER_KEYS:
            value = table.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"[auth] {key}: expected a number of seconds >= 0, got {value!r}")
        if not isinstance(table.get("identities", {}), Mapping):
            raise ConfigError(
                '[auth] identities: expected a table, e.g. [auth.identities] "group:maintainers" = "lead"'
            )
        bad = set(table.get("algorithms", ())) - set(DEFAULT_ALGORITHMS)
        if bad:
            raise ConfigError(f"[auth] algorithms: {', '.join(sorted(bad))} not accepted; use asymmetric ones")
        if table.get("introspection_endpoint") and not table.get("client_id"):
            raise ConfigError("[auth] introspection_endpoint needs client_id (and client_secret)")
        return cls(**table)

    @property
    def metadata(self) -> dict[str, Any]:
        """The RFC 9728 protected-resource metadata document."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "entropic-mcp",
        }
        if self.required_scopes:
            document["scopes_supported"] = list(self.required_scopes)
        return document

    @property
    def metadata_url(self) -> str:
        parts = urllib.parse.urlsplit(self.resource)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, METADATA_PATH + parts.path.rstrip("/"), "", ""))


@attrs.frozen(kw_only=True)
class Principal:
    """Who a validated token speaks for."""

    subject: str
    identity: str
    scopes: tuple[str, ...] = ()
    tenant: str | None = None
    claims: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    #: When a remembered verification stops counting (Unix seconds): the token's ``exp``, at most
    #: one key-set lifespan away (a key the issuer withdrew stops being trusted then).
    valid_until: float = attrs.field(default=0.0, repr=False)

    @property
    def conversation_scope(self) -> str:
        """The prefix of this caller's conversation keys: ``tenant:<tenant>`` or ``sub:<subject>``.

        Escaped so it never holds a ``/``: ``<scope>/<key>`` then splits one way only, and one
        person's key can never spell another's scope.
        """
        if self.tenant is not None:
            return "tenant:" + urllib.parse.quote(self.tenant, safe="@:+-_.~")
        return "sub:" + urllib.parse.quote(self.subject, safe="@:+-_.~")


class AuthFailure(Exception):
    """A request refused: the status and what ``WWW-Authenticate`` says."""

    def __init__(self, status: int, error: str, description: str, *, scope: str | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.scope = scope


def challenge(settings: AuthSettings, failure: AuthFailure | None = None) -> bytes:
    """The ``WWW-Authenticate`` value for a 401/403: where the metadata is, what was wrong."""
    parts = [f'resource_metadata="{settings.metadata_url}"']
    if failure is not None and failure.error:
        parts.append(f'error="{failure.error}"')
        parts.append('error_description="{}"'.format(failure.description.replace('"', "'")))
    scope = failure.scope if failure is not None and failure.scope else " ".join(settings.required_scopes)
    if scope:
        parts.append(f'scope="{scope}"')
    return ("Bearer " + ", ".join(parts)).encode("latin-1", "replace")


def _fetch_json(url: str, *, timeout: float, data: bytes | None = None, headers: Mapping[str, str] = {}) -> Any:
    request = urllib.request.Request(url, data=data, headers={"Accept": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return orjson.loads(response.read(1 << 20))


class TokenVerifier:
    """Validates bearer tokens for one resource and maps them to identities (thread-safe)."""

    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings
        self._jwks: Any = None
        self._lock = threading.Lock()
        self._verified: OrderedDict[str, Principal] = OrderedDict()

    # -- start-up --------------------------------------------------------------------------------

    def start(self) -> None:
        """Find and fetch the issuer's keys now, so a wrong issuer is one line at start-up."""
        settings = self.settings
        uri = settings.jwks_uri or self._discover()
        from jwt import PyJWKClient

        self._jwks = PyJWKClient(
            uri,
            cache_keys=False,
            lifespan=settings.jwks_lifespan,
            timeout=settings.timeout,
            cooldown_duration=settings.jwks_cooldown,
        )
        try:
            keys = self._jwks.get_signing_keys()
        except Exception as exc:
            raise ConfigError(f"[auth] the issuer's keys at {uri} could not be read ({_reason(exc)})") from None
        log.info("auth: OAuth resource %s, issuer %s, %d signing key(s)", settings.resource, settings.issuer, len(keys))

    def _discover(self) -> str:
        issuer = self.settings.issuer.rstrip("/")
        tried = []
        for well_known in ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"):
            try:
                document = _fetch_json(issuer + well_known, timeout=self.settings.timeout)
            except Exception as exc:
                tried.append(f"{issuer + well_known}: {_reason(exc)}")
                continue
            if isinstance(document, dict) and isinstance(document.get("jwks_uri"), str):
                if document.get("issuer", issuer).rstrip("/") != issuer:
                    raise ConfigError(
                        f"[auth] issuer {issuer!r} publishes metadata for issuer {document.get('issuer')!r}; "
                        "set issuer to exactly what the tokens carry"
                    )
                return str(document["jwks_uri"])
            tried.append(f"{issuer + well_known}: no jwks_uri")
        raise ConfigError(f"[auth] no signing keys found for issuer {issuer!r} ({'; '.join(tried)}); set jwks_uri")

    # -- per request -----------------------------------------------------------------------------

    def remembered(self, authorization: str | None) -> Principal | None:
        """The principal of a JWT verified before and still within its time (no I/O, no crypto)."""
        if not authorization:
            return None
        with self._lock:
            principal = self._verified.get(authorization)
            if principal is None:
                return None
            if principal.valid_until <= time.time():
                del self._verified[authorization]
                return None
            self._verified.move_to_end(authorization)
            return principal

    def verify(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header, or AuthFailure saying what is wrong.

        May fetch the issuer's keys or ask the introspection endpoint: call it off the event loop.
        """
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthFailure(401, "", "send Authorization: Bearer <access token> from the authorization server")
        if token.count(".") != 2:
            return self._principal(self._introspect(token))  # asked each time: the issuer may revoke it
        principal = self._principal(self._jwt_claims(token))
        if authorization is not None and principal.valid_until > time.time():
            with self._lock:
                self._verified[authorization] = principal
                while len(self._verified) > VERIFIED_CACHE_SIZE:
                    self._verified.popitem(last=False)
        return principal

    def _jwt_claims(self, token: str) -> dict[str, Any]:
        import jwt

        settings = self.settings
        if self._jwks is None:
            self.start()
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
            return dict(
                jwt.decode(
                    token,
                    key.key,
                    algorithms=list(settings.algorithms),
                    audience=settings.resource,
                    issuer=settings.issuer,
                    leeway=settings.leeway,
                    options={"require": ["exp", "iss", "aud", "sub"]},
                )
            )
        except jwt.ExpiredSignatureError:
            raise AuthFailure(401, "invalid_token", "the token has expired; get a new one") from None
        except jwt.InvalidAudienceError:
            raise AuthFailure(
                401, "invalid_token", f"the token is not for this resource ({settings.resource})"
            ) from None
        except jwt.InvalidIssuerError:
            raise AuthFailure(401, "invalid_token", f"the token was not issued by {settings.issuer}") from None
        except jwt.ImmatureSignatureError:
            raise AuthFailure(401, "invalid_token", "the token is not valid yet (nbf/iat in the future)") from None
        except jwt.PyJWKClientConnectionError as exc:
            log.warning("auth: the issuer's keys could not be fetched: %s", exc)
            raise AuthFailure(401, "invalid_token", "the issuer's signing keys could not be fetched; retry") from None
        except (jwt.PyJWKClientError, jwt.InvalidTokenError) as exc:
            raise AuthFailure(401, "invalid_token", f"the token is not valid ({_reason(exc)})") from None

    def _introspect(self, token: str) -> dict[str, Any]:
        settings = self.settings
        if settings.introspection_endpoint is None:
            raise AuthFailure(401, "invalid_token", "the token is not a JWT and no introspection endpoint is set")
        credentials = f"{settings.client_id}:{settings.client_secret or ''}".encode()
        try:
            answer = _fetch_json(
                settings.introspection_endpoint,
                timeout=settings.timeout,
                data=urllib.parse.urlencode({"token": token, "token_type_hint": "access_token"}).encode(),
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Authorization": "Basic " + base64.b64encode(credentials).decode(),
                },
            )
        except Exception as exc:
            log.warning("auth: introspection at %s failed: %s", settings.introspection_endpoint, _reason(exc))
            raise AuthFailure(401, "invalid_token", "the token could not be checked with the issuer; retry") from None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise AuthFailure(401, "invalid_token", "the token is not active (revoked, expired or unknown)")
        now = time.time()
        if isinstance(answer.get("exp"), int | float) and answer["exp"] + settings.leeway < now:
            raise AuthFailure(401, "invalid_token", "the token has expired; get a new one")
        if isinstance(answer.get("nbf"), int | float) and answer["nbf"] - settings.leeway > now:
            raise AuthFailure(401, "invalid_token", "the token is not valid yet")
        if "iss" in answer and answer["iss"] != settings.issuer:
            raise AuthFailure(401, "invalid_token", f"the token was not issued by {settings.issuer}")
        if "aud" in answer and settings.resource not in _strings(answer["aud"]):
            raise AuthFailure(401, "invalid_token", f"the token is not for this resource ({settings.resource})")
        if not isinstance(answer.get("sub"), str):
            raise AuthFailure(401, "invalid_token", "the introspection answer names no subject")
        return answer

    def _principal(self, claims: Mapping[str, Any]) -> Principal:
        settings = self.settings
        scopes = _strings(claims.get("scope", claims.get("scp", ())))
        missing = [s for s in settings.required_scopes if s not in scopes]
        if missing:
            raise AuthFailure(
                403, "insufficient_scope", f"the token lacks scope {' '.join(missing)}", scope=" ".join(missing)
            )
        subject = str(claims["sub"])
        identity = self._identity(subject, scopes, claims)
        if identity is None:
            raise AuthFailure(
                403, "insufficient_scope", f"no identity is mapped for subject {subject!r} ([auth.identities])"
            )
        tenant = claims.get(settings.tenant_claim) if settings.tenant_claim else None
        expires = claims.get("exp")
        horizon = time.time() + settings.jwks_lifespan
        return Principal(
            subject=subject,
            identity=identity,
            scopes=scopes,
            tenant=str(tenant) if tenant is not None else None,
            claims=dict(claims),
            valid_until=min(float(expires), horizon) if isinstance(expires, int | float) else 0.0,
        )

    def _identity(self, subject: str, scopes: Sequence[str], claims: Mapping[str, Any]) -> str | None:
        groups = _strings(claims.get(self.settings.groups_claim, ()))
        for selector, identity in self.settings.identities.items():
            kind, _, rest = selector.partition(":")
            if kind == "sub" and rest == subject:
                return identity
            if kind == "group" and rest in groups:
                return identity
            if kind == "scope" and rest in scopes:
                return identity
            if kind == "claim":
                name, _, value = rest.partition("=")
                if name in claims and (value in _strings(claims[name]) or str(claims[name]) == value):
                    return identity
        return self.settings.default_identity


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__
