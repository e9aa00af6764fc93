"""SASL/OAUTHBEARER (RFC 7628; Kafka's KIP-255 and KIP-768), sans-IO: the client's one
message, and the broker's side of the exchange (Kafka's `OAuthBearerSaslServer`).

The client sends `n,[a=<authzid>],` `^A` `auth=Bearer <token>` `^A` [extensions `key=value` `^A`]
`^A`. The broker validates the token (`TokenValidator`: unsecured tokens, or signed JWTs
checked against the identity provider's keys, `security/jwt.py`). A valid token authenticates
its principal, answered with an empty challenge; an invalid one is answered with
`{"status":"invalid_token"}`, the client acknowledges with a single `^A`, and the exchange
fails with that message (SASL_AUTHENTICATION_FAILED), as in Kafka, followed by the reason in
parentheses, for the broker's log and the client's error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kmirror.security.jwt import JwtError, ValidatedToken
from kmirror.security.sasl_mechanism import AuthenticationFailed, MechanismStep

OAUTHBEARER = "OAUTHBEARER"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SEPARATOR = "\x01"
_AUTH = re.compile(r"Bearer +([A-Za-z0-9\-._~+/]+=*)")
_KEY = re.compile(r"[A-Za-z]+")

TokenValidator = Callable[[str], ValidatedToken]
"""A token's validation; raises `JwtError` with the reason."""


@dataclass(frozen=True, slots=True)
class InitialResponse:
    token: str
    authorization_id: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


def client_initial_response(token: str, authorization_id: str = "",
                            extensions: Mapping[str, str] | None = None) -> bytes:
    ext = "".join(f"{k}={v}{SEPARATOR}" for k, v in (extensions or {}).items())
    authz = f"a={authorization_id}" if authorization_id else ""
    return f"n,{authz},{SEPARATOR}auth=Bearer {token}{SEPARATOR}{ext}{SEPARATOR}".encode()


def parse_initial_response(message: bytes) -> InitialResponse:
    """The client's message; `ValueError` when it is not RFC 7628's."""
    text = message.decode("utf-8")
    header, sep, rest = text.partition(SEPARATOR)
    if not sep or not header.startswith("n,") or not header.endswith(",") or not rest.endswith(SEPARATOR * 2):
        raise ValueError("Invalid OAUTHBEARER client first message")
    authz = header[2:-1]
    if authz and not authz.startswith("a="):
        raise ValueError("Invalid OAUTHBEARER client first message: bad GS2 header")
    pairs: dict[str, str] = {}
    for item in rest[:-2].split(SEPARATOR):
        key, eq, value = item.partition("=")
        if not eq or not _KEY.fullmatch(key) or key in pairs:
            raise ValueError(f"Invalid OAUTHBEARER client first message: bad key/value {key!r}")
        pairs[key] = value
    auth = _AUTH.fullmatch(pairs.pop("auth", ""))
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: no 'auth=Bearer <token>'")
    return InitialResponse(auth.group(1), authz[2:], pairs)


class OAuthBearerServer:
    """One OAUTHBEARER authentication on one connection (a `MechanismServer`)."""

    def __init__(self, validate: TokenValidator) -> None:
        self._validate = validate
        self._error: str | None = None  # the invalid_token answer sent, awaiting the client's ^A
        self._reason = ""

    def evaluate(self, token: bytes) -> MechanismStep:
        if self._error is not None:
            if token == SEPARATOR.encode():
                raise AuthenticationFailed(f"{self._error} ({self._reason})")
            raise AuthenticationFailed("Authentication failed: expected the client's acknowledgement of an error")
        try:
            response = parse_initial_response(token)
        except (ValueError, UnicodeDecodeError) as exc:
            raise AuthenticationFailed(f"Authentication failed: {exc}") from None
        try:
            validated = self._validate(response.token)
        except JwtError as exc:
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            self._reason = str(exc)
            return MechanismStep(challenge=self._error.encode(), complete=False)
        if response.authorization_id and response.authorization_id != validated.principal:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from the token's principal name")
        return MechanismStep(challenge=b"", complete=True, principal=validated.principal,
                             expires_ms=validated.expires_ms)
