"""The broker side of SASL on one connection (Kafka's `SaslServerAuthenticator`), sans-IO.

Until authentication completes only ApiVersions, SaslHandshake (key 17) and SaslAuthenticate
(key 36) are accepted, in that order: ApiVersions at most once before the handshake, one
handshake naming an enabled mechanism, then SaslAuthenticate rounds until the mechanism
completes. Every other request, or these out of order, is an illegal SASL state: the
connection closes without a response. An unsupported mechanism is answered with
UNSUPPORTED_SASL_MECHANISM and the enabled mechanisms; refused credentials with
SASL_AUTHENTICATION_FAILED and the mechanism's message; both close the connection after
the response. Once authenticated every request goes to its handler (a second SaslHandshake
from a client that authenticated with SaslAuthenticate v0 then gets ILLEGAL_SASL_STATE from the
handler).
Re-authentication (KIP-368): a client that authenticated with SaslAuthenticate v1 or later may
send SaslHandshake (the same mechanism) and SaslAuthenticate again on its connection; it must
stay the same principal. Each authentication gives the session a lifetime, the lesser of
`connections.max.reauth.ms` (when positive) and what is left of the credential's own lifetime
(an OAUTHBEARER token's); past it, only a re-authentication is served (`session_expired`).
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
    REAUTHENTICATE = "REAUTHENTICATE"
    FAILED = "FAILED"


class SaslEvent(Enum):
    API_VERSIONS = "API_VERSIONS"
    HANDSHAKE = "HANDSHAKE"
    REAUTHENTICATION = "REAUTHENTICATION"
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
    (S.COMPLETE, E.REAUTHENTICATION): S.REAUTHENTICATE,
    (S.COMPLETE, E.UNSUPPORTED_MECHANISM): S.FAILED,
    (S.REAUTHENTICATE, E.CHALLENGE): S.REAUTHENTICATE,
    (S.REAUTHENTICATE, E.AUTHENTICATED): S.COMPLETE,
    (S.REAUTHENTICATE, E.REFUSED): S.FAILED,
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
    session_lifetime_ms: int = 0  # SaslAuthenticate v1+: when the client must re-authenticate by (0: never)
    raw_reply: bool = True  # after SaslHandshake v0: whether `auth_bytes` go back as a bare frame


def session_lifetime_ms(now_ms: int, credential_expires_ms: int | None, max_reauth_ms: int) -> int:
    """Kafka's `calcCompletionTimesAndReturnSessionLifetimeMs`: 0 is a session without end."""
    left = None if credential_expires_ms is None else max(0, credential_expires_ms - now_ms)
    if max_reauth_ms > 0:
        return max_reauth_ms if left is None else min(left, max_reauth_ms)
    return 0 if left is None else left


class SaslServer:
    def __init__(self, enabled_mechanisms: tuple[str, ...],
                 mechanism_server: Callable[[str], MechanismServer],
                 max_reauth_ms: Callable[[str], int] = lambda mechanism: 0) -> None:
        self.enabled_mechanisms = enabled_mechanisms
        self._mechanism_server = mechanism_server
        self._max_reauth_ms = max_reauth_ms  # connections.max.reauth.ms of a mechanism
        self._mechanism: MechanismServer | None = None
        self.mechanism: str | None = None
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self.principal: str | None = None
        self.token_authenticated = False
        self.failure: str | None = None
        self.raw_tokens = False  # SaslHandshake v0: tokens in bare frames
        self.can_reauthenticate = False  # authenticated with SaslAuthenticate v1+ (KIP-368)
        self.session_expires_ms: int | None = None
        self.reauthentications = 0

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

    def session_expired(self, now_ms: int) -> bool:
        return self.session_expires_ms is not None and now_ms > self.session_expires_ms

    def on_handshake(self, mechanism: str, version: int = 1) -> SaslDecision:
        if self.state is SaslState.COMPLETE and self.can_reauthenticate and version >= 1:
            if mechanism != self.mechanism:
                self._move(SaslEvent.UNSUPPORTED_MECHANISM)
                self.failure = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                f"re-authentication of mechanism '{self.mechanism}'")
                return SaslDecision(Action.RESPOND, ErrorCode.unsupported_sasl_mechanism, self.failure,
                                    mechanisms=self.enabled_mechanisms, close_after_response=True)
            self._move(SaslEvent.REAUTHENTICATION)
            self._mechanism = self._mechanism_server(mechanism)
            return SaslDecision(Action.RESPOND, mechanisms=self.enabled_mechanisms)
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
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        return SaslDecision(Action.RESPOND, mechanisms=self.enabled_mechanisms)

    def on_authenticate(self, token: bytes, now_ms: int = 0, version: int = 1) -> SaslDecision:
        """One client token at wall-clock `now_ms`, in SaslAuthenticate `version` (0 for a bare token)."""
        if self.state is SaslState.COMPLETE:
            self._move(SaslEvent.CHALLENGE)
            return SaslDecision(Action.DISPATCH)
        reauthenticating = self.state is SaslState.REAUTHENTICATE
        if self.state not in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE) or self._mechanism is None:
            self._move(SaslEvent.CHALLENGE)
            return self._illegal()
        which = "re-authentication" if reauthenticating else "authentication"
        try:
            step = self._mechanism.evaluate(token)
            if step.complete and reauthenticating and step.principal != self.principal:
                raise AuthenticationFailed(f"Cannot change principals during re-authentication from "
                                           f"User:{self.principal}: User:{step.principal}")
        except AuthenticationFailed as exc:
            self._move(SaslEvent.REFUSED)
            self.failure = str(exc).replace("during authentication", f"during {which}")
            return SaslDecision(Action.RESPOND, ErrorCode.sasl_authentication_failed, self.failure,
                                close_after_response=True)
        if not step.complete:
            self._move(SaslEvent.CHALLENGE)
            return SaslDecision(Action.RESPOND, auth_bytes=step.challenge or b"", raw_reply=step.challenge is not None)
        self._move(SaslEvent.AUTHENTICATED)
        self.principal = step.principal
        self.token_authenticated = step.token_authenticated
        self.reauthentications += reauthenticating
        self.can_reauthenticate = version >= 1
        assert self.mechanism is not None
        lifetime = session_lifetime_ms(now_ms, step.expires_ms, self._max_reauth_ms(self.mechanism))
        self.session_expires_ms = now_ms + lifetime if lifetime else None
        return SaslDecision(Action.RESPOND, auth_bytes=step.challenge or b"", raw_reply=step.challenge is not None,
                            session_lifetime_ms=lifetime)
