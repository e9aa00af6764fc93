"""The broker side of one SCRAM exchange (RFC 5802; Kafka's `ScramSaslServer`), sans-IO.

Two client tokens. The client-first message `n,[a=authzid],n=user,r=cnonce[,ext]` is answered
with the server-first message `r=cnonce+snonce,s=salt,i=iterations`; the client-final
message `c=biws,r=nonce,p=proof` is answered with `v=ServerSignature` once the proof checks
against the stored key. Channel binding is not offered (gs2 flag `n` only, as Kafka). An
authorization id other than the user name, an unknown user, a nonce that is not the
server's and a wrong proof are refused. The server nonce comes from the `nonce` port.

With the extension `tokenauth=true` the user name is a delegation token's id (KIP-48): the
proof is checked against the token's credential, and the session is the token owner's, no
longer than the token lives. An unknown or expired token is refused as an unknown user is.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kmirror.security.delegation_token import TOKEN_AUTH_EXTENSION
from kmirror.security.sasl_mechanism import AuthenticationFailed, MechanismStep
from kmirror.security.scram import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    server_signature,
    unescape_username,
    verify_client_proof,
)

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_EXTENSIONS = r"(?:,[A-Za-z]+=[\x01-\x7F]+)*"
CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS}))")
CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")

INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"

CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]


@dataclass(frozen=True, slots=True)
class TokenCredential:
    """What a delegation token authenticates as: its owner's name, until its expiry."""

    credential: ScramCredential
    owner: str
    expiry_timestamp_ms: int


TokenLookup = Callable[[str, ScramMechanism], TokenCredential | None]
"""(token id, mechanism) -> the token's credential; None: no such token, or tokens disabled."""


def _no_tokens(token_id: str, mechanism: ScramMechanism) -> TokenCredential | None:
    return None


def _extensions(text: str) -> dict[str, str]:
    """`,key=value,...` of a client-first message (Kafka's `ScramExtensions`)."""
    return dict(item.partition("=")[::2] for item in text.split(",")[1:])


class ScramState(Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = "RECEIVE_CLIENT_FIRST_MESSAGE"
    RECEIVE_CLIENT_FINAL_MESSAGE = "RECEIVE_CLIENT_FINAL_MESSAGE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class ScramServer:
    """One SCRAM exchange on one connection."""

    def __init__(self, mechanism: ScramMechanism, credentials: CredentialLookup, nonce: Callable[[], str],
                 tokens: TokenLookup = _no_tokens, now_ms: Callable[[], int] = lambda: 0) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._tokens = tokens
        self._now_ms = now_ms
        self._token: TokenCredential | None = None
        self._nonce = nonce
        self.state = ScramState.RECEIVE_CLIENT_FIRST_MESSAGE
        self._username = ""
        self._credential: ScramCredential | None = None
        self._gs2_header = b""
        self._client_first_bare = b""
        self._server_first = b""
        self._server_nonce = ""

    def evaluate(self, token: bytes) -> MechanismStep:
        try:
            if self.state is ScramState.RECEIVE_CLIENT_FIRST_MESSAGE:
                return self._client_first(token)
            if self.state is ScramState.RECEIVE_CLIENT_FINAL_MESSAGE:
                return self._client_final(token)
            raise AuthenticationFailed(f"Unexpected SCRAM message in state {self.state.name}")
        except AuthenticationFailed:
            self.state = ScramState.FAILED
            self._credential = None
            raise

    def _client_first(self, token: bytes) -> MechanismStep:
        m = CLIENT_FIRST.fullmatch(_text(token))
        if m is None:
            raise AuthenticationFailed("Invalid SCRAM client first message format")
        username = unescape_username(m["saslname"])
        if username is None:
            raise AuthenticationFailed("Invalid SCRAM client first message: bad user name encoding")
        authzid = m["authzid"]
        if authzid is not None and unescape_username(authzid) != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        if _extensions(m["extensions"]).get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            # a delegation token: the user name is its id (KIP-48); an expired one is unknown
            self._token = self._tokens(username, self.mechanism)
            if self._token is None or self._token.expiry_timestamp_ms < self._now_ms():
                raise AuthenticationFailed(INVALID_CREDENTIALS)
            credential: ScramCredential | None = self._token.credential
        else:
            credential = self._credentials(username, self.mechanism)
        if credential is None:
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        if credential.iterations < MIN_ITERATIONS:
            raise AuthenticationFailed(f"Iterations {credential.iterations} is less than the minimum "
                                       f"{MIN_ITERATIONS} for {self.mechanism.mechanism_name}")
        self._username = username
        self._credential = credential
        self._gs2_header = m.string[:m.start("bare")].encode()
        self._client_first_bare = m["bare"].encode()
        self._server_nonce = m["nonce"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._server_nonce},s={salt},i={credential.iterations}".encode()
        self.state = ScramState.RECEIVE_CLIENT_FINAL_MESSAGE
        return MechanismStep(challenge=self._server_first, complete=False)

    def _client_final(self, token: bytes) -> MechanismStep:
        m = CLIENT_FINAL.fullmatch(_text(token))
        if m is None:
            raise AuthenticationFailed("Invalid SCRAM client final message format")
        if m["nonce"] != self._server_nonce:
            raise AuthenticationFailed("Invalid client nonce in the final client message.")
        if _b64(m["channel"]) != self._gs2_header:
            raise AuthenticationFailed("Invalid channel binding in the final client message.")
        assert self._credential is not None
        auth_message = b",".join((self._client_first_bare, self._server_first, m["without_proof"].encode()))
        if not verify_client_proof(self.mechanism, self._credential, auth_message, _b64(m["proof"])):
            raise AuthenticationFailed("Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism.mechanism_name}")
        signature = server_signature(self.mechanism, self._credential.server_key, auth_message)
        self.state = ScramState.COMPLETE
        self._credential = None
        challenge = b"v=" + base64.b64encode(signature)
        if self._token is not None:  # the owner's principal, for no longer than the token lives
            return MechanismStep(challenge=challenge, complete=True, principal=self._token.owner,
                                 expires_ms=self._token.expiry_timestamp_ms, token_authenticated=True)
        return MechanismStep(challenge=challenge, complete=True, principal=self._username)


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid SCRAM message: not UTF-8") from None


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise AuthenticationFailed("Invalid SCRAM message: bad base64") from None
