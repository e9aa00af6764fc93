"""The broker side of SASL on one connection (Kafka's `SaslServerAuthenticator`), sans-IO.

Until authentication completes only ApiVersions, SaslHandshake (key 17) and SaslAuthenticate
(key 36) are accepted, in that order: ApiVersions at most once before the handshake, one
handshake naming an enabled mechanism, then SaslAuthenticate rounds until the mechanism
completes. Every other request, or these out of order, is an illegal SASL state: the
connection closes without a response. An unsupported mechanism is answered with
UNSUPPORTED_SASL_MECHANISM and the enabled mechanisms; refused credentials with
SASL_AUTHENTICATION_FAILED and the mechanism's message; both close the connection after
the response. Once authenticated every request goes to its handler (a second SaslHandshake
then gets ILLEGAL_SASL_STATE from the handler: re-authentication is not offered).
After a SaslHandshake v0 (`raw_tokens`) the client's tokens come as bare size-prefixed frames,
not SaslAuthenticate requests, and the server's challenges go back so (`on_authenticate` with
the frame; a challenge of None sends nothing); a refusal then closes without an answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kmirror.protocol.errors import ErrorCode
from kmirror.security.sasl_mechanism import AuthenticationFailed, MechanismServer

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


class SaslState(Enum):
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class SaslEvent(Enum):
    API_VERSIONS = "API_VERSIONS"
    HANDSHAKE = "HANDSHAKE"
    UNSUPPORTED_MECHANISM = "UNSUPPORTED_MECHANISM"
    CHALLENGE = "CHALLENGE"
    AUTHENTICATED = "AUTHENTICATED"
    REFUSED = "REFUSED"
    OTHER_REQUEST = "OTHER_REQUEST"


S, E = SaslState, SaslEvent
TRANSITIONS: dict[tuple[SaslState, SaslEvent], SaslState] = {
    (S.HANDSHAKE_OR_VERSIONS_REQUEST, E.API_VERSIONS): S.HANDSHAKE_REQUEST,
    (S.HANDSHAKE_OR_VERSIONS_REQUEST, E.HANDSHAKE): S.AUTHENTICATE,
    (S.HANDSHAKE_OR_VERSIONS_REQUEST, E.UNSUPPORTED_MECHANISM): S.FAILED,
    (S.HANDSHAKE_REQUEST, E.HANDSHAKE): S.AUTHENTICATE,
    (S.HANDSHAKE_REQUEST, E.UNSUPPORTED_MECHANISM): S.FAILED,
    (S.AUTHENTICATE, E.CHALLENGE): S.AUTHENTICATE,
    (S.AUTHENTICATE, E.AUTHENTICATED): S.COMPLETE,
    (S.AUTHENTICATE, E.REFUSED): S.FAILED,
    (S.COMPLETE, E.API_VERSIONS): S.COMPLETE,
    (S.COMPLETE, E.HANDSHAKE): S.COMPLETE,
    (S.COMPLETE, E.CHALLENGE): S.COMPLETE,
    (S.COMPLETE, E.OTHER_REQUEST): S.COMPLETE,
}


class Action(Enum):
    DISPATCH = "DISPATCH"  # the request goes to its handler
    RESPOND = "RESPOND"  # answer with the decision's fields
    CLOSE = "CLOSE"  # close without a response (illegal SASL state)


@dataclass(frozen=True, slots=True)
class SaslDecision:
    action: Action
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    mechanisms: tuple[str, ...] = ()
    auth_bytes: bytes = b""
    close_after_response: bool = False
    raw_reply: bool = True  # after SaslHandshake v0: whether `auth_bytes` go back as a bare frame


class SaslServer:
    def __init__(self, enabled_mechanisms: tuple[str, ...],
                 mechanism_server: Callable[[str], MechanismServer]) -> None:
        self.enabled_mechanisms = enabled_mechanisms
        self._mechanism_server = mechanism_server
        self._mechanism: MechanismServer | None = None
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self.principal: str | None = None
        self.failure: str | None = None
        self.raw_tokens = False  # SaslHandshake v0: tokens in bare frames

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    def _move(self, event: SaslEvent) -> bool:
        nxt = TRANSITIONS.get((self.state, event))
        if nxt is None:
            self.failure = f"unexpected {event.name} in SASL state {self.state.name}"
            self.state = SaslState.FAILED
            return False
        self.state = nxt
        return True

    def _illegal(self) -> SaslDecision:
        return SaslDecision(Action.CLOSE, ErrorCode.illegal_sasl_state, self.failure)

    def on_request(self, api_key: int) -> SaslDecision:
        """A request other than SaslHandshake/SaslAuthenticate (whose bodies need `on_handshake`
        and `on_authenticate`)."""
        if api_key == API_VERSIONS:
            return SaslDecision(Action.DISPATCH) if self._move(SaslEvent.API_VERSIONS) else self._illegal()
        if self._move(SaslEvent.OTHER_REQUEST):
            return SaslDecision(Action.DISPATCH)
        return self._illegal()

    def on_handshake(self, mechanism: str, version: int = 1) -> SaslDecision:
        if self.state is SaslState.COMPLETE:
            self._move(SaslEvent.HANDSHAKE)
            return SaslDecision(Action.DISPATCH)
        if mechanism not in self.enabled_mechanisms:
            if not self._move(SaslEvent.UNSUPPORTED_MECHANISM):
                return self._illegal()
            self.failure = f"Unsupported SASL mechanism {mechanism}"
            return SaslDecision(Action.RESPOND, ErrorCode.unsupported_sasl_mechanism, self.failure,
                                mechanisms=self.enabled_mechanisms, close_after_response=True)
        if not self._move(SaslEvent.HANDSHAKE):
            return self._illegal()
        self._mechanism = self._mechanism_server(mechanism)
        self.raw_tokens = version == 0
        return SaslDecision(Action.RESPOND, mechanisms=self.enabled_mechanisms)

    def on_authenticate(self, token: bytes) -> SaslDecision:
        if self.state is SaslState.COMPLETE:
            self._move(SaslEvent.CHALLENGE)
            return SaslDecision(Action.DISPATCH)
        if self.state is not SaslState.AUTHENTICATE or self._mechanism is None:
            self._move(SaslEvent.CHALLENGE)
            return self._illegal()
        try:
            step = self._mechanism.evaluate(token)
        except AuthenticationFailed as exc:
            self._move(SaslEvent.REFUSED)
            self.failure = str(exc)
            return SaslDecision(Action.RESPOND, ErrorCode.sasl_authentication_failed, str(exc),
                                close_after_response=True)
        if step.complete:
            self._move(SaslEvent.AUTHENTICATED)
            self.principal = step.principal
        else:
            self._move(SaslEvent.CHALLENGE)
        return SaslDecision(Action.RESPOND, auth_bytes=step.challenge or b"", raw_reply=step.challenge is not None)
