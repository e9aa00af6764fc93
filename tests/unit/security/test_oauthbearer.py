"""SASL/OAUTHBEARER's messages (RFC 7628) and the broker's side of the exchange."""

from __future__ import annotations

import pytest

from kmirror.security.jwt import JwtError, ValidatedToken
from kmirror.security.oauthbearer import (
    OAuthBearerServer,
    client_initial_response,
    parse_initial_response,
)
from kmirror.security.sasl_mechanism import AuthenticationFailed


def validator(token: str) -> ValidatedToken:
    if token != "good.token.sig":
        raise JwtError("The JWT has expired")
    return ValidatedToken("alice", frozenset({"kafka"}), expires_ms=10**13, start_ms=None)


def test_the_client_message_round_trips_with_authzid_and_extensions() -> None:
    message = client_initial_response("abc.def.ghi", "alice", {"traceId": "123"})
    assert message == b"n,a=alice,\x01auth=Bearer abc.def.ghi\x01traceId=123\x01\x01"
    parsed = parse_initial_response(message)
    assert (parsed.token, parsed.authorization_id, dict(parsed.extensions)) == ("abc.def.ghi", "alice", {"traceId": "123"})
    assert parse_initial_response(client_initial_response("t.u.")).authorization_id == ""


@pytest.mark.parametrize("message", [
    b"",
    b"y,,\x01auth=Bearer t\x01\x01",  # channel binding flag
    b"n,,\x01auth=Bearer t\x01",  # no closing ^A
    b"n,,\x01auth=Basic dXNlcg==\x01\x01",
    b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",  # a key twice
    b"n,,\x01traceId=1\x01\x01",  # no token
])
def test_malformed_client_messages_are_refused(message: bytes) -> None:
    with pytest.raises(AuthenticationFailed, match="Authentication failed"):
        OAuthBearerServer(validator).evaluate(message)


def test_a_valid_token_authenticates_its_principal() -> None:
    step = OAuthBearerServer(validator).evaluate(client_initial_response("good.token.sig"))
    assert step.complete and step.principal == "alice" and step.challenge == b""


def test_an_invalid_token_gets_the_status_then_fails_on_the_clients_acknowledgement() -> None:
    server = OAuthBearerServer(validator)
    step = server.evaluate(client_initial_response("bad.token.sig"))
    assert not step.complete and step.challenge == b'{"status":"invalid_token"}'
    with pytest.raises(AuthenticationFailed, match=r'\{"status":"invalid_token"\} \(The JWT has expired\)'):
        server.evaluate(b"\x01")


def test_an_authorization_id_other_than_the_principal_is_refused() -> None:
    with pytest.raises(AuthenticationFailed, match="different from the token's principal name"):
        OAuthBearerServer(validator).evaluate(client_initial_response("good.token.sig", "admin"))
