from __future__ import annotations

import pytest

from kmirror.protocol.errors import ErrorCode
from kmirror.security.plain import PlainServer, plain_client_token
from kmirror.security.sasl_mechanism import AuthenticationFailed, MechanismStep
from kmirror.security.sasl_server import (
    API_VERSIONS,
    TRANSITIONS,
    Action,
    SaslServer,
    SaslState,
    session_lifetime_ms,
)

USERS = {"alice": "alice-secret"}
METADATA = 3


def server() -> SaslServer:
    return SaslServer(("PLAIN",), lambda mechanism: PlainServer(USERS))


def test_api_versions_handshake_authenticate_then_every_request_is_dispatched() -> None:
    s = server()
    assert s.on_request(API_VERSIONS).action is Action.DISPATCH
    assert s.state is SaslState.HANDSHAKE_REQUEST
    hs = s.on_handshake("PLAIN")
    assert (hs.action, hs.error, hs.mechanisms) == (Action.RESPOND, ErrorCode.none, ("PLAIN",))
    auth = s.on_authenticate(plain_client_token("alice", "alice-secret"), version=0)
    assert (auth.action, auth.error, auth.close_after_response) == (Action.RESPOND, ErrorCode.none, False)
    assert s.authenticated and s.principal == "alice" and auth.session_lifetime_ms == 0
    assert s.on_request(METADATA).action is Action.DISPATCH
    # after SaslAuthenticate v0 (no re-authentication) SaslHandshake goes to its handler (ILLEGAL_SASL_STATE)
    assert s.on_handshake("PLAIN").action is Action.DISPATCH


def test_handshake_without_api_versions_is_accepted() -> None:
    s = server()
    assert s.on_handshake("PLAIN").action is Action.RESPOND
    assert s.state is SaslState.AUTHENTICATE


def test_wrong_password_answers_sasl_authentication_failed_and_closes() -> None:
    s = server()
    s.on_handshake("PLAIN")
    d = s.on_authenticate(plain_client_token("alice", "nope"))
    assert (d.action, d.error, d.close_after_response) == (Action.RESPOND, ErrorCode.sasl_authentication_failed, True)
    assert d.message == "Authentication failed: Invalid username or password"
    assert s.state is SaslState.FAILED and not s.authenticated


def test_unknown_user_is_refused_like_a_wrong_password() -> None:
    s = server()
    s.on_handshake("PLAIN")
    d = s.on_authenticate(plain_client_token("mallory", "alice-secret"))
    assert d.error is ErrorCode.sasl_authentication_failed
    assert d.message == "Authentication failed: Invalid username or password"


def test_unsupported_mechanism_answers_the_enabled_ones_and_closes() -> None:
    s = server()
    d = s.on_handshake("SCRAM-SHA-512")
    assert (d.action, d.error, d.mechanisms, d.close_after_response) == (
        Action.RESPOND, ErrorCode.unsupported_sasl_mechanism, ("PLAIN",), True)
    assert s.state is SaslState.FAILED


@pytest.mark.parametrize("steps", [
    [("request", METADATA)],  # a Kafka request before the handshake
    [("request", API_VERSIONS), ("request", API_VERSIONS)],  # ApiVersions twice
    [("authenticate", b"\0alice\0alice-secret")],  # SaslAuthenticate before SaslHandshake
    [("handshake", "PLAIN"), ("handshake", "PLAIN")],  # a second handshake
    [("handshake", "PLAIN"), ("request", METADATA)],  # a request between handshake and authenticate
])
def test_out_of_order_requests_close_without_a_response(steps: list[tuple[str, object]]) -> None:
    s = server()
    decision = None
    for kind, arg in steps:
        if kind == "request":
            decision = s.on_request(arg)  # type: ignore[arg-type]
        elif kind == "handshake":
            decision = s.on_handshake(arg)  # type: ignore[arg-type]
        else:
            decision = s.on_authenticate(arg)  # type: ignore[arg-type]
    assert decision is not None and decision.action is Action.CLOSE
    assert decision.error is ErrorCode.illegal_sasl_state
    assert s.state is SaslState.FAILED and not s.authenticated
    # nothing leaves FAILED
    assert s.on_request(API_VERSIONS).action is Action.CLOSE
    assert s.on_handshake("PLAIN").action is Action.CLOSE


def test_failed_is_terminal_in_the_table() -> None:
    assert not [k for k in TRANSITIONS if k[0] is SaslState.FAILED]
    # once authenticated, a connection only re-authenticates (KIP-368) or fails doing so
    assert {v for (state, _), v in TRANSITIONS.items() if state is SaslState.COMPLETE} == {
        SaslState.COMPLETE, SaslState.REAUTHENTICATE, SaslState.FAILED}


@pytest.mark.parametrize(("token", "message"), [
    (b"alice\0alice-secret", "expected 3 tokens"),
    (b"\0\0alice-secret", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"bob\0alice\0alice-secret", "authorization id that is different from username"),
    (b"\xff\0alice\0x", "not UTF-8"),
])
def test_plain_refuses_malformed_tokens(token: bytes, message: str) -> None:
    with pytest.raises(AuthenticationFailed, match=message):
        PlainServer(USERS).evaluate(token)


def test_plain_accepts_a_matching_authorization_id() -> None:
    step = PlainServer(USERS).evaluate(plain_client_token("alice", "alice-secret", authorization_id="alice"))
    assert step.complete and step.principal == "alice"


def test_handshake_v0_takes_bare_tokens_and_answers_what_the_mechanism_returns() -> None:
    s = server()
    s.on_handshake("PLAIN", version=0)
    assert s.raw_tokens
    d = s.on_authenticate(plain_client_token("alice", "alice-secret"))
    assert (d.action, d.auth_bytes, d.raw_reply) == (Action.RESPOND, b"", True)  # PLAIN answers an empty frame
    assert s.authenticated
    v1 = server()
    v1.on_handshake("PLAIN")
    assert not v1.raw_tokens


def test_a_final_step_with_nothing_to_send_sends_no_bare_frame() -> None:
    final = MechanismStep(challenge=None, complete=True, principal="alice")
    s = SaslServer(("GSSAPI",), lambda mechanism: type("Done", (), {"evaluate": lambda self, token: final})())
    s.on_handshake("GSSAPI", version=0)
    d = s.on_authenticate(b"token")
    assert (d.auth_bytes, d.raw_reply, s.principal) == (b"", False, "alice")


def reauthenticating_server(max_reauth_ms: int = 0, expires_ms: int | None = None,
                            principals: tuple[str, ...] = ("alice", "alice")) -> SaslServer:
    steps = iter(MechanismStep(challenge=b"", complete=True, principal=p, expires_ms=expires_ms) for p in principals)
    mechanism = type("Scripted", (), {"evaluate": lambda self, token: next(steps)})
    return SaslServer(("OAUTHBEARER", "PLAIN"), lambda m: mechanism(), lambda m: max_reauth_ms)


@pytest.mark.parametrize(("now", "expires", "max_reauth", "lifetime"), [
    (1000, None, 0, 0), (1000, None, 5000, 5000), (1000, 4000, 0, 3000), (1000, 4000, 2000, 2000),
    (1000, 9000, 5000, 5000), (1000, 500, 5000, 0),
])
def test_session_lifetime_is_the_lesser_of_the_config_and_the_credentials_life(
        now: int, expires: int | None, max_reauth: int, lifetime: int) -> None:
    assert session_lifetime_ms(now, expires, max_reauth) == lifetime


def test_reauthentication_renews_the_session_of_the_same_principal() -> None:
    s = reauthenticating_server(max_reauth_ms=5000)
    s.on_handshake("OAUTHBEARER")
    assert s.on_authenticate(b"t", now_ms=1000).session_lifetime_ms == 5000
    assert not s.session_expired(6000) and s.session_expired(6001)
    assert s.on_handshake("OAUTHBEARER").action is Action.RESPOND and s.state is SaslState.REAUTHENTICATE
    assert not s.authenticated  # nothing but SaslAuthenticate until it completes
    assert s.on_request(METADATA).action is Action.CLOSE


def test_reauthentication_completes_and_moves_the_expiry() -> None:
    s = reauthenticating_server(max_reauth_ms=5000)
    s.on_handshake("OAUTHBEARER")
    s.on_authenticate(b"t", now_ms=1000)
    s.on_handshake("OAUTHBEARER")
    d = s.on_authenticate(b"t", now_ms=5500)
    assert d.error is ErrorCode.none and s.authenticated and s.reauthentications == 1
    assert not s.session_expired(10_500) and s.session_expired(10_501)


def test_reauthentication_as_another_principal_or_mechanism_is_refused() -> None:
    s = reauthenticating_server(principals=("alice", "mallory"))
    s.on_handshake("OAUTHBEARER")
    s.on_authenticate(b"t", now_ms=1000)
    s.on_handshake("OAUTHBEARER")
    d = s.on_authenticate(b"t", now_ms=2000)
    assert (d.error, d.close_after_response) == (ErrorCode.sasl_authentication_failed, True)
    assert d.message == "Cannot change principals during re-authentication from User:alice: User:mallory"
    other = reauthenticating_server()
    other.on_handshake("OAUTHBEARER")
    other.on_authenticate(b"t", now_ms=1000)
    d = other.on_handshake("PLAIN")
    assert (d.error, d.close_after_response) == (ErrorCode.unsupported_sasl_mechanism, True)
    assert "not supported for re-authentication of mechanism 'OAUTHBEARER'" in (d.message or "")
