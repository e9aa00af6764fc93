"""The client side of one SCRAM exchange (RFC 5802; Kafka's `ScramSaslClient`), sans-IO.

`first_message()` gives the client-first message; `final_message(server_first)` checks the
server's nonce and iteration count and gives the client-final message with the proof;
`verify_server_final(server_final)` checks the server's signature, so a server that does not
hold the credential is detected. The client nonce is given by the caller.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re

from kmirror.security.delegation_token import TOKEN_AUTH_EXTENSION
from kmirror.security.scram import (
    MIN_ITERATIONS,
    ScramMechanism,
    client_proof,
    escape_username,
    salted_password,
    server_key,
    server_signature,
)

_SERVER_FIRST = re.compile(r"r=(?P<nonce>[\x21-\x2B\x2D-\x7E]+),s=(?P<salt>[A-Za-z0-9+/]*={0,2}),i=(?P<i>[0-9]+)(?:,.*)?")
_GS2_HEADER = "n,,"


class ScramClientError(Exception):
    """The server's SCRAM messages are refused; `str()` says why."""


class ScramClient:
    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str,
                 token_auth: bool = False) -> None:
        """`token_auth`: `username` and `password` are a delegation token's id and HMAC (the
        extension `tokenauth=true`, KIP-48)."""
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce
        extensions = f",{TOKEN_AUTH_EXTENSION}=true" if token_auth else ""
        self._client_first_bare = f"n={escape_username(username)},r={nonce}{extensions}"
        self._expected_server_signature = b""

    def first_message(self) -> bytes:
        return (_GS2_HEADER + self._client_first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        m = _SERVER_FIRST.fullmatch(text)
        if m is None:
            raise ScramClientError("Invalid SCRAM server first message format")
        if not m["nonce"].startswith(self._nonce) or m["nonce"] == self._nonce:
            raise ScramClientError("Invalid server nonce: does not start with client nonce")
        iterations = int(m["i"])
        if iterations < MIN_ITERATIONS:
            raise ScramClientError(f"Requested iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                                   f"for {self.mechanism.mechanism_name}")
        try:
            salt = base64.b64decode(m["salt"], validate=True)
        except (binascii.Error, ValueError):
            raise ScramClientError("Invalid SCRAM server first message: bad salt") from None
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        channel = base64.b64encode(_GS2_HEADER.encode()).decode()
        without_proof = f"c={channel},r={m['nonce']}"
        auth_message = ",".join((self._client_first_bare, text, without_proof)).encode()
        proof = client_proof(self.mechanism, salted, auth_message)
        self._expected_server_signature = server_signature(self.mechanism, server_key(self.mechanism, salted),
                                                           auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ScramClientError(f"SCRAM authentication failed: {text[2:]}")
        if not text.startswith("v="):
            raise ScramClientError("Invalid SCRAM server final message format")
        try:
            signature = base64.b64decode(text[2:].split(",", 1)[0], validate=True)
        except (binascii.Error, ValueError):
            raise ScramClientError("Invalid SCRAM server final message: bad signature") from None
        if not hmac.compare_digest(signature, self._expected_server_signature):
            raise ScramClientError("Invalid server signature in server final message")
