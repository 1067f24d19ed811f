"""``[auth]`` in entropic-mcp.toml, the per-person parts of serve, and the HTTP start-up checks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from entropic_mcp import ConfigError, config_from_dict, load_config
from entropic_mcp._calls import ApprovalDecision, ApprovalRequest
from entropic_mcp._serve._approval import CURRENT, ServeApprover
from entropic_mcp._serve._http import check_http_auth
from entropic_mcp._serve._oauth import Principal

ISSUER = "https://login.example.com/realms/team"
RESOURCE = "https://mcp.example.com/mcp"


def test_the_auth_section_is_read_with_its_identities(tmp_path: Path) -> None:
    (tmp_path / "entropic-mcp.toml").write_text(
        f"""
[auth]
issuer = "{ISSUER}"
resource = "{RESOURCE}"
required_scopes = ["mcp"]
default_identity = "researcher"
tenant_claim = "team"
[auth.identities]
"group:maintainers" = "lead"
"sub:carol" = "coder"
""",
        encoding="utf-8",
    )
    (tmp_path / "entropic-mcp.local.toml").write_text('[auth]\nclient_secret = "s3cret"\n', encoding="utf-8")
    auth = load_config(cwd=tmp_path).auth
    assert auth is not None
    assert (auth.issuer, auth.resource, auth.required_scopes) == (ISSUER, RESOURCE, ("mcp",))
    assert dict(auth.identities) == {"group:maintainers": "lead", "sub:carol": "coder"}
    assert auth.client_secret == "s3cret"  # the secret can stay out of the committed file
    assert "s3cret" not in repr(auth)


def test_without_an_auth_section_there_is_no_oauth(tmp_path: Path) -> None:
    assert config_from_dict({}, root=tmp_path).auth is None


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"resource": RESOURCE}, "[auth] issuer: required, an http(s) URL"),
        ({"issuer": "login.example.com", "resource": RESOURCE}, "[auth] issuer: required, an http(s) URL"),
        ({"issuer": ISSUER}, "[auth] resource: required"),
        ({"issuer": ISSUER, "resource": RESOURCE, "required_scopes": "mcp"}, "[auth] required_scopes: expected a list"),
        ({"issuer": ISSUER, "resource": RESOURCE, "leeway": "30s"}, "[auth] leeway: expected a number of seconds"),
        ({"issuer": ISSUER, "resource": RESOURCE, "algorithms": ["HS256"]}, "HS256 not accepted"),
        ({"issuer": ISSUER, "resource": RESOURCE, "identities": {"maintainers": "lead"}}, "expected 'sub:<subject>'"),
        ({"issuer": ISSUER, "resource": RESOURCE, "isuer": ISSUER}, "unknown key(s) isuer"),
        ({"issuer": ISSUER, "resource": RESOURCE, "jwks_uri": "keys.json"}, "[auth] jwks_uri: expected an http(s) URL"),
    ],
)
def test_a_misconfigured_auth_section_is_one_line(tmp_path: Path, table: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"auth": table}, root=tmp_path)
    message = str(caught.value)
    assert says in message and "\n" not in message


def test_the_static_token_mode_is_unchanged_without_auth(tmp_path: Path) -> None:
    config = config_from_dict({}, root=tmp_path)
    assert check_http_auth(config, "127.0.0.1", {}) is None
    assert check_http_auth(config, "0.0.0.0", {"ENTROPIC_MCP_TOKEN": "x" * 20}) is None
    with pytest.raises(ConfigError, match="without a bearer token"):
        check_http_auth(config, "0.0.0.0", {})


def test_auth_and_the_static_token_together_are_refused(tmp_path: Path) -> None:
    config = config_from_dict({"auth": {"issuer": ISSUER, "resource": RESOURCE}}, root=tmp_path)
    with pytest.raises(ConfigError, match="both \\[auth\\] \\(OAuth\\) and ENTROPIC_MCP_TOKEN"):
        check_http_auth(config, "127.0.0.1", {"ENTROPIC_MCP_TOKEN": "x" * 20})


def test_an_unreachable_issuer_stops_start_up_in_one_line(tmp_path: Path) -> None:
    table = {"issuer": "http://127.0.0.1:9", "resource": RESOURCE, "timeout": 2}
    config = config_from_dict({"auth": table}, root=tmp_path)
    with pytest.raises(ConfigError) as caught:
        check_http_auth(config, "127.0.0.1", {})
    assert "no signing keys found for issuer 'http://127.0.0.1:9'" in str(caught.value)
    assert "set jwks_uri" in str(caught.value)


@pytest.mark.parametrize(
    ("subject", "tenant", "scope"),
    [
        ("alice", None, "sub:alice"),
        ("alice@example.com", None, "sub:alice@example.com"),
        ("a/b", None, "sub:a%2Fb"),  # never a '/': "<scope>/<key>" splits one way only
        ("alice", "red/blue", "tenant:red%2Fblue"),
    ],
)
def test_a_principals_conversation_scope_holds_no_slash(subject: str, tenant: str | None, scope: str) -> None:
    assert Principal(subject=subject, identity="x", tenant=tenant).conversation_scope == scope


class _Channel:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked = 0

    async def elicit(self, form: Any) -> Any:
        self.asked += 1
        return "accept", {"decision": self.answer}


def _request(subject: str | None, *, always: bool = True) -> ApprovalRequest:
    return ApprovalRequest(
        tool="probe.note", args={}, pattern="probe.note(x)", subject=subject, identity="lead", always=always
    )


@pytest.mark.anyio
async def test_always_answers_are_the_persons_own() -> None:
    approver = ServeApprover()
    channel = _Channel("always_allow")
    token = CURRENT.set(channel)
    try:
        first = await approver.entropic_mcp_approve_tool_call(_request("alice"))
    finally:
        CURRENT.reset(token)
    # The pipeline is told "once" (no rule for everyone); alice is not asked again, bob is.
    assert first == ApprovalDecision(answer="allow_once")
    assert await approver.entropic_mcp_approve_tool_call(_request("alice")) == ApprovalDecision(answer="allow_once")
    assert channel.asked == 1
    assert await approver.entropic_mcp_approve_tool_call(_request("bob")) is None  # nobody to ask him
    denying = _Channel("always_deny")
    token = CURRENT.set(denying)
    try:
        assert (await approver.entropic_mcp_approve_tool_call(_request("bob"))).answer == "deny_once"
        assert (await approver.entropic_mcp_approve_tool_call(_request("bob"))).answer == "deny_once"
    finally:
        CURRENT.reset(token)
    assert denying.asked == 1


@pytest.mark.anyio
async def test_without_a_subject_always_answers_go_to_the_pipeline_as_before() -> None:
    approver = ServeApprover()
    token = CURRENT.set(_Channel("always_allow"))
    try:
        assert (await approver.entropic_mcp_approve_tool_call(_request(None))).answer == "always_allow"
        # An "always" the rules would not honour (an ask rule) is remembered for nobody.
        assert (await approver.entropic_mcp_approve_tool_call(_request("alice", always=False))).answer == "allow_once"
    finally:
        CURRENT.reset(token)
    assert approver.personal == {}


def test_a_remembered_token_expires_with_the_token() -> None:
    from entropic_mcp._serve._oauth import AuthSettings, TokenVerifier

    verifier = TokenVerifier(AuthSettings.from_table({"issuer": ISSUER, "resource": RESOURCE}))
    fresh = Principal(subject="alice", identity="lead", valid_until=time.time() + 60)
    stale = Principal(subject="bob", identity="lead", valid_until=time.time() - 1)
    verifier._verified.update({"Bearer fresh": fresh, "Bearer stale": stale})
    assert verifier.remembered("Bearer fresh") is fresh
    assert verifier.remembered("Bearer stale") is None and "Bearer stale" not in verifier._verified
    assert verifier.remembered(None) is None


@pytest.mark.anyio
async def test_always_answers_are_kept_in_the_store_per_person(tmp_path: Path) -> None:
    from entropic_mcp._storage._tinydb import TinyDBBackend

    store = TinyDBBackend(tmp_path / "store")
    try:
        first = ServeApprover(store=lambda: store)
        token = CURRENT.set(_Channel("always_allow"))
        try:
            await first.entropic_mcp_approve_tool_call(_request("alice"))
        finally:
            CURRENT.reset(token)
        # A restarted serve (a new approver on the same store): alice's answer holds, bob has none.
        second = ServeApprover(store=lambda: store)
        assert (await second.entropic_mcp_approve_tool_call(_request("alice"))).answer == "allow_once"
        assert await second.entropic_mcp_approve_tool_call(_request("bob")) is None
        assert store.load_state("serve.always", "alice")[0] == {"probe.note(x)": "always_allow"}
    finally:
        store.close()
