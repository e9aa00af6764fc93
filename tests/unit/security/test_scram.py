from __future__ import annotations

import base64

import pytest

from kmirror.security.client_config import client_security
from kmirror.security.delegation_token import token_hmac, token_password, token_scram_credential
from kmirror.security.listener_config import ListenerConfigError, listener_security
from kmirror.security.sasl_mechanism import AuthenticationFailed, MechanismStep
from kmirror.security.scram import (
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
    escape_username,
    salted_password,
    unescape_username,
)
from kmirror.security.scram_client import ScramClient, ScramClientError
from kmirror.security.scram_server import ScramServer, ScramState, TokenCredential

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return credential_from_salted_password(SHA256, RFC_SALT, salted_password(SHA256, "pencil", RFC_SALT, 4096), 4096)


def rfc_server(credential: ScramCredential | None = None) -> ScramServer:
    cred = credential or rfc_credential()
    return ScramServer(SHA256, lambda user, mech: cred if (user, mech) == ("user", SHA256) else None,
                       lambda: RFC_SERVER_NONCE)


def test_server_answers_rfc7677_exchange_byte_for_byte() -> None:
    s = rfc_server()
    first = s.evaluate(RFC_CLIENT_FIRST)
    assert (first.challenge, first.complete) == (RFC_SERVER_FIRST, False)
    final = s.evaluate(RFC_CLIENT_FINAL)
    assert (final.challenge, final.complete, final.principal) == (RFC_SERVER_FINAL, True, "user")
    assert s.state is ScramState.COMPLETE


def test_client_produces_rfc7677_messages() -> None:
    c = ScramClient(SHA256, "user", "pencil", RFC_CLIENT_NONCE)
    assert c.first_message() == RFC_CLIENT_FIRST
    assert c.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    c.verify_server_final(RFC_SERVER_FINAL)
    with pytest.raises(ScramClientError, match="server signature"):
        c.verify_server_final(b"v=" + base64.b64encode(b"x" * 32))


def test_wrong_proof_is_refused_and_server_fails() -> None:
    s = rfc_server()
    s.evaluate(RFC_CLIENT_FIRST)
    wrong = RFC_CLIENT_FINAL[:-8] + b"AAAAAAA="
    with pytest.raises(AuthenticationFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        s.evaluate(wrong)
    assert s.state is ScramState.FAILED
    with pytest.raises(AuthenticationFailed):
        s.evaluate(RFC_CLIENT_FINAL)


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_client_and_server_agree_on_both_mechanisms(mechanism: ScramMechanism) -> None:
    salt = b"0123456789abcdef"
    cred = credential_from_salted_password(mechanism, salt, salted_password(mechanism, "s3cr=t,", salt, 4096), 4096)
    s = ScramServer(mechanism, lambda user, mech: cred if (user, mech) == ("al=ce,x", mechanism) else None,
                    lambda: "servernonce")
    c = ScramClient(mechanism, "al=ce,x", "s3cr=t,", "clientnonce")
    final = s.evaluate(c.final_message(s.evaluate(c.first_message()).challenge))
    assert final.complete and final.principal == "al=ce,x"
    c.verify_server_final(final.challenge)
    bad = ScramClient(mechanism, "al=ce,x", "wrong", "clientnonce")
    s2 = ScramServer(mechanism, lambda user, mech: cred, lambda: "servernonce")
    with pytest.raises(AuthenticationFailed):
        s2.evaluate(bad.final_message(s2.evaluate(bad.first_message()).challenge))


@pytest.mark.parametrize("token, message", [
    (b"n,,n=nobody,r=abc", "Invalid user credentials"),
    (b"p=tls-unique,,n=user,r=abc", "format"),
    (b"n,a=other,n=user,r=abc", "authorization id"),
    (b"n,,n=us=41er,r=abc", "format"),
    (b"\xff\xfe", "UTF-8"),
])
def test_bad_client_first_messages_are_refused(token: bytes, message: str) -> None:
    with pytest.raises(AuthenticationFailed, match=message):
        rfc_server().evaluate(token)


def test_final_message_with_another_nonce_is_refused() -> None:
    s = rfc_server()
    s.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match="nonce"):
        s.evaluate(RFC_CLIENT_FINAL.replace(b"k0,", b"k1,"))


def test_credential_below_minimum_iterations_is_refused() -> None:
    weak = ScramCredential(RFC_SALT, b"k" * 32, b"k" * 32, 1024)
    with pytest.raises(AuthenticationFailed, match="minimum"):
        rfc_server(weak).evaluate(RFC_CLIENT_FIRST)


def test_username_escaping_round_trips() -> None:
    assert escape_username("a,b=c") == "a=2Cb=3Dc"
    assert unescape_username("a=2Cb=3Dc") == "a,b=c"
    assert unescape_username("a=41") is None


def test_mechanism_names_and_types() -> None:
    assert ScramMechanism.from_mechanism_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.from_mechanism_name("PLAIN") is None
    assert ScramMechanism.from_type(7) is ScramMechanism.UNKNOWN
    assert SHA256.mechanism_name == "SCRAM-SHA-256"


def test_listener_and_client_configs_accept_scram() -> None:
    sec = listener_security({"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}, "SASL", "SASL_PLAINTEXT")
    assert sec.sasl is not None and sec.sasl.enabled_mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    with pytest.raises(ListenerConfigError, match="ScramLoginModule"):
        listener_security({"sasl.enabled.mechanisms": "SCRAM-SHA-256",
                           "listener.name.sasl.scram-sha-256.sasl.jaas.config":
                               "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
                          "SASL", "SASL_PLAINTEXT")
    client = client_security({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="m" '
                            'password="p";'})
    assert client.sasl is not None and (client.sasl.mechanism, client.sasl.username) == ("SCRAM-SHA-512", "m")


def token_server(mechanism: ScramMechanism, now_ms: int = 1_000) -> ScramServer:
    """A server that knows user alice (password alice-pw) and alice's token `t1` (expiry 5000)."""
    salt = b"0123456789abcdef"
    alice = credential_from_salted_password(mechanism, salt, salted_password(mechanism, "alice-pw", salt, 4096), 4096)

    def tokens(token_id: str, mech: ScramMechanism) -> TokenCredential | None:
        return TokenCredential(token_scram_credential(mech, "secret", "t1"), "alice", 5_000) if token_id == "t1" else None

    return ScramServer(mechanism, lambda user, mech: alice if user == "alice" else None, lambda: "servernonce",
                       tokens, lambda: now_ms)


def exchange(server: ScramServer, client: ScramClient) -> MechanismStep:
    return server.evaluate(client.final_message(server.evaluate(client.first_message()).challenge))


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_a_delegation_token_authenticates_as_its_owner_until_it_expires(mechanism: ScramMechanism) -> None:
    password = token_password(token_hmac("secret", "t1"))
    client = ScramClient(mechanism, "t1", password, "clientnonce", token_auth=True)
    assert client.first_message() == b"n,,n=t1,r=clientnonce,tokenauth=true"
    step = exchange(token_server(mechanism), client)
    assert (step.principal, step.token_authenticated, step.expires_ms) == ("alice", True, 5_000)
    client.verify_server_final(step.challenge or b"")
    # the same id without the extension is a user name nobody has; a user is no token
    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):
        exchange(token_server(mechanism), ScramClient(mechanism, "t1", password, "clientnonce"))
    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):
        exchange(token_server(mechanism), ScramClient(mechanism, "alice", "alice-pw", "clientnonce", token_auth=True))
    plain = exchange(token_server(mechanism), ScramClient(mechanism, "alice", "alice-pw", "clientnonce"))
    assert (plain.principal, plain.token_authenticated) == ("alice", False)
    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):  # expired
        exchange(token_server(mechanism, now_ms=5_001), client)
    wrong = ScramClient(mechanism, "t1", token_password(token_hmac("guess", "t1")), "clientnonce", token_auth=True)
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        exchange(token_server(mechanism), wrong)
