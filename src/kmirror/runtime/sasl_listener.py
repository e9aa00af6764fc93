"""The SASL side of a listener (`runtime/server.py`): the mechanism servers its connections'
`SaslServer`s run, with SCRAM credentials read from the node's current metadata image
(KIP-554: they live in the metadata log), and the SaslHandshake / SaslAuthenticate responses
built from a `SaslDecision`."""

from __future__ import annotations

import datetime
import secrets
import time
from collections.abc import Callable

from kmirror.metadata.controller.delegation_tokens import login_credential
from kmirror.metadata.image import MetadataImage
from kmirror.protocol.codec import DecodedRequest
from kmirror.protocol.entities import build
from kmirror.runtime.kerberos import gssapi_server
from kmirror.security.gssapi import GSSAPI
from kmirror.security.listener_config import SaslServerSettings
from kmirror.security.oauthbearer import OAUTHBEARER, OAuthBearerServer, TokenValidator
from kmirror.security.plain import PLAIN, PlainServer
from kmirror.security.sasl_mechanism import MechanismServer
from kmirror.security.sasl_server import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslDecision, SaslServer
from kmirror.security.scram import ScramCredential, ScramMechanism
from kmirror.security.scram_server import ScramServer, TokenCredential, TokenLookup

CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]


def mechanism_server(settings: SaslServerSettings, mechanism: str, credentials: CredentialLookup,
                     token_validator: TokenValidator | None = None, tokens: TokenLookup | None = None
                     ) -> MechanismServer:
    """The server side of one authentication with `mechanism` (one of the listener's enabled ones)."""
    if mechanism == OAUTHBEARER:
        assert token_validator is not None
        return OAuthBearerServer(token_validator)
    if mechanism == PLAIN:
        return PlainServer(settings.plain_users)
    if mechanism == GSSAPI:
        assert settings.kerberos is not None
        return gssapi_server(settings.kerberos)
    scram = ScramMechanism.from_mechanism_name(mechanism)
    assert scram is not None, mechanism
    if tokens is None:
        return ScramServer(scram, credentials, _scram_nonce)
    return ScramServer(scram, credentials, _scram_nonce, tokens, lambda: int(time.time() * 1000))


def sasl_mechanisms(settings: SaslServerSettings | None, image: Callable[[], MetadataImage],
                    token_validator: Callable[[], TokenValidator | None],
                    token_secret_key: Callable[[], str | None] = lambda: None) -> Callable[[str], MechanismServer]:
    """A listener's mechanism servers; SCRAM's credentials, and the delegation tokens SCRAM
    accepts when `token_secret_key()` is set, from the node's current metadata image."""
    def credential(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        found: ScramCredential | None = image().scram_credentials.get((user, int(mechanism)))
        return found

    def server(mechanism: str) -> MechanismServer:
        assert settings is not None
        secret = token_secret_key() if ScramMechanism.from_mechanism_name(mechanism) else None

        def token(token_id: str, scram: ScramMechanism) -> TokenCredential | None:
            return login_credential(image(), secret, token_id, scram)

        return mechanism_server(settings, mechanism, credential, token_validator(), token if secret else None)
    return server


def sasl_decision(sasl: SaslServer, now_ms: int, req: DecodedRequest | None, token: bytes = b"") -> SaslDecision:
    """`sasl`'s decision, at wall-clock `now_ms`, on a request of an unauthenticated (or
    re-authenticating) connection, or on a SaslHandshake; `req` None: a bare token after
    SaslHandshake v0."""
    if req is None:
        return sasl.on_authenticate(token, now_ms, version=0)
    key = req.header.api_key
    if key == SASL_HANDSHAKE:
        return sasl.on_handshake(str(req.body.mechanism), req.header.api_version)
    if key == SASL_AUTHENTICATE:
        return sasl.on_authenticate(bytes(req.body.auth_bytes), now_ms, req.header.api_version)
    return sasl.on_request(key)


def session_text(decision: SaslDecision) -> str:
    lifetime = decision.session_lifetime_ms
    return f" (session lifetime {lifetime} ms)" if lifetime else ""


def sasl_response(req: DecodedRequest, decision: SaslDecision) -> object:
    rt = req.spec.response_type(req.header.api_version)
    if req.header.api_key == SASL_HANDSHAKE:
        return build(rt, error_code=decision.error, mechanisms=decision.mechanisms)
    return build(rt, error_code=decision.error, error_message=decision.message, auth_bytes=decision.auth_bytes,
                 session_lifetime=datetime.timedelta(milliseconds=decision.session_lifetime_ms))


def _scram_nonce() -> str:
    """RFC 5802 server nonce part: printable, no ','; token_urlsafe never yields one."""
    return secrets.token_urlsafe(24)
