"""SASL/GSSAPI, Kerberos (RFC 4752; Kafka's GSSAPI mechanism), over a GSS-API security
context, sans-IO: the context (`GssContext`, MIT Kerberos through the `gssapi` package in
`runtime/kerberos.py` and `client/kerberos.py`) does the cryptography, these classes the
mechanism's steps.

The exchange, as Java's `GssKrb5Server` and `GssKrb5Client` run it:
1. context establishment: the client's tokens are given to the server's context until it is
   established; its output tokens (Kerberos' AP-REP, for mutual authentication) go back;
2. the server offers its security layers: four bytes, the layers' bit mask (kmirror, as Kafka,
   offers only "none", 1) and its largest buffer (three bytes), wrapped with integrity only;
3. the client answers, wrapped: the chosen layer, its largest buffer, and an optional
   authorization id, which Kafka's `SaslServerCallbackHandler` does not check (kafka-python
   sends the service's name there): the user is the authenticated principal's.
The authenticated principal (`alice@REALM`, `kafka/host@REALM`) becomes a `User:` principal
through `sasl.kerberos.principal.to.local.rules` (`security/kerberos_name.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Protocol

from kmirror.security.sasl_mechanism import AuthenticationFailed, MechanismStep

GSSAPI = "GSSAPI"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
NO_SECURITY_LAYER = 0x01
MAX_BUFFER = 65536  # Java's default javax.security.sasl.maxbuffer


class GssContext(Protocol):
    """One side of a GSS-API security context. Failures raise `GssFailure`."""

    @property
    def complete(self) -> bool: ...

    def step(self, token: bytes | None) -> bytes | None: ...

    def wrap(self, message: bytes) -> bytes:
        """`message` with an integrity check, not encrypted."""
        ...

    def unwrap(self, message: bytes) -> bytes: ...

    def peer(self) -> str:
        """The other side's principal, once the context is established."""
        ...


class GssFailure(Exception):
    """A GSS-API call failed; `str()` is the library's one-line reason."""


def _layers(message: bytes) -> tuple[int, int, bytes]:
    if len(message) < 4:
        raise GssFailure(f"security layer message of {len(message)} bytes, expected at least 4")
    return message[0], int.from_bytes(message[1:4], "big"), message[4:]


def _layer_message(layers: int, max_buffer: int, authorization_id: bytes = b"") -> bytes:
    return bytes([layers]) + max_buffer.to_bytes(3, "big") + authorization_id


class Stage(Enum):
    """The server's side of RFC 4752: the three steps of the module docstring."""

    ESTABLISHING = "ESTABLISHING"
    OFFERING_LAYERS = "OFFERING_LAYERS"
    READING_CHOICE = "READING_CHOICE"


class GssapiServer:
    """One GSSAPI authentication on one connection (a `MechanismServer`)."""

    def __init__(self, context: GssContext, short_name: Callable[[str], str]) -> None:
        self._context = context
        self._short_name = short_name
        self._stage = Stage.ESTABLISHING

    def evaluate(self, token: bytes) -> MechanismStep:
        try:
            if self._stage is Stage.ESTABLISHING:
                out = self._context.step(token)
                if self._context.complete:
                    self._stage = Stage.OFFERING_LAYERS
                return MechanismStep(challenge=out or b"", complete=False)
            if self._stage is Stage.OFFERING_LAYERS:
                self._stage = Stage.READING_CHOICE
                offer = _layer_message(NO_SECURITY_LAYER, MAX_BUFFER)
                return MechanismStep(challenge=self._context.wrap(offer), complete=False)
            layer, _, _ = _layers(self._context.unwrap(token))
            peer = self._context.peer()
        except GssFailure as exc:
            raise AuthenticationFailed(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"GSSAPI: {exc}") from None
        if not layer & NO_SECURITY_LAYER:
            raise AuthenticationFailed(f"Authentication failed: the client chose security layer {layer}, "
                                       "only no security layer (1) is offered")
        try:
            principal = self._short_name(peer)
        except ValueError as exc:
            raise AuthenticationFailed(f"Authentication failed: {exc}") from None
        return MechanismStep(challenge=None, complete=True, principal=principal)


class GssapiClient:
    """The client side: `respond(None)` gives the first token, then `respond(challenge)`
    answers each challenge of the broker until `complete`."""

    def __init__(self, context: GssContext) -> None:
        self._context = context
        self.complete = False

    def respond(self, challenge: bytes | None) -> bytes:
        if not self._context.complete:
            return self._context.step(challenge) or b""
        if challenge is None or self.complete:
            raise GssFailure("unexpected challenge after the exchange")
        layers, max_buffer, _ = _layers(self._context.unwrap(challenge))
        if not layers & NO_SECURITY_LAYER:
            raise GssFailure(f"the broker offers security layers {layers}, not 'none' (1)")
        self.complete = True
        return self._context.wrap(_layer_message(NO_SECURITY_LAYER, min(max_buffer, MAX_BUFFER)))
