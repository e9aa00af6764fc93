"""The GSSAPI mechanism's steps (RFC 4752) over a scripted GSS-API context: the server's
three stages, the client's answers, and each failure becoming Kafka's refusal."""

from __future__ import annotations

import pytest

from kmirror.security.gssapi import NO_SECURITY_LAYER, GssapiClient, GssapiServer, GssFailure
from kmirror.security.sasl_mechanism import AuthenticationFailed


class ScriptedContext:
    """A context established after `rounds` tokens; wrap/unwrap mark messages with a prefix."""

    def __init__(self, rounds: int = 1, peer: str = "alice@R", fail_at: int | None = None) -> None:
        self.rounds, self._peer, self.fail_at = rounds, peer, fail_at
        self.seen: list[bytes | None] = []

    @property
    def complete(self) -> bool:
        return len(self.seen) >= self.rounds

    def step(self, token: bytes | None) -> bytes | None:
        self.seen.append(token)
        if self.fail_at == len(self.seen):
            raise GssFailure("Cannot decrypt ticket")
        return b"ap-rep" if self.complete else b"more"

    def wrap(self, message: bytes) -> bytes:
        return b"W" + message

    def unwrap(self, message: bytes) -> bytes:
        if not message.startswith(b"W"):
            raise GssFailure("bad integrity check")
        return message[1:]

    def peer(self) -> str:
        return self._peer


def short(principal: str) -> str:
    return principal.partition("@")[0]


def test_establish_offer_layers_then_complete_with_the_short_name() -> None:
    context = ScriptedContext(rounds=2)
    server = GssapiServer(context, short)
    assert server.evaluate(b"t1").challenge == b"more"
    assert server.evaluate(b"t2").challenge == b"ap-rep"
    offer = server.evaluate(b"")
    assert not offer.complete and offer.challenge == b"W" + bytes([NO_SECURITY_LAYER]) + (65536).to_bytes(3, "big")
    # the authorization id the client names is not checked (kafka-python sends the service's)
    done = server.evaluate(b"W\x01\x00\x10\x00kafka@host")
    assert done.complete and done.principal == "alice" and done.challenge is None


@pytest.mark.parametrize(("context", "tokens", "why"), [
    (ScriptedContext(fail_at=1), [b"t"], "invalid credentials with SASL mechanism GSSAPI: Cannot decrypt ticket"),
    (ScriptedContext(), [b"t", b"", b"not wrapped"], "bad integrity check"),
    (ScriptedContext(), [b"t", b"", b"W\x01"], "at least 4"),
    (ScriptedContext(), [b"t", b"", b"W\x04\x00\x10\x00"], "only no security layer"),
])
def test_failures_refuse_the_authentication(context: ScriptedContext, tokens: list[bytes], why: str) -> None:
    server = GssapiServer(context, short)
    with pytest.raises(AuthenticationFailed, match=why):
        for token in tokens:
            server.evaluate(token)


def test_a_principal_no_rule_maps_is_refused() -> None:
    def no_rule(principal: str) -> str:
        raise ValueError(f"No rules apply to {principal}")
    server = GssapiServer(ScriptedContext(), no_rule)
    server.evaluate(b"t")
    server.evaluate(b"")
    with pytest.raises(AuthenticationFailed, match="No rules apply to alice@R"):
        server.evaluate(b"W\x01\x00\x10\x00")


def test_client_and_server_run_the_exchange_together() -> None:
    client = GssapiClient(ScriptedContext(rounds=3))  # its last step reads the server's AP-REP
    server = GssapiServer(ScriptedContext(rounds=2, peer="mirror/dr@R"), short)
    challenge = server.evaluate(client.respond(None)).challenge
    while not client.complete:
        step = server.evaluate(client.respond(challenge))
        challenge = step.challenge
    assert step.complete and step.principal == "mirror/dr"


def test_client_refuses_a_broker_without_the_no_layer_option() -> None:
    client = GssapiClient(ScriptedContext())
    client.respond(None)
    with pytest.raises(GssFailure, match="not 'none'"):
        client.respond(b"W\x04\x00\x10\x00")
