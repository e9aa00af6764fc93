"""The PLAIN SASL mechanism (RFC 4616): one client message `authzid NUL authcid NUL passwd`.

Kafka's `PlainSaslServer`: the authorization id, when given, must equal the user name;
the password is checked against the listener's `user_<name>` JAAS options.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kmirror.security.sasl_mechanism import AuthenticationFailed, MechanismStep

PLAIN = "PLAIN"


def plain_client_token(username: str, password: str, authorization_id: str = "") -> bytes:
    return f"{authorization_id}\0{username}\0{password}".encode()


class PlainServer:
    """One PLAIN exchange on one connection."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def evaluate(self, token: bytes) -> MechanismStep:
        try:
            parts = token.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN request: not UTF-8") from None
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN request: expected 3 tokens")
        authzid, username, password = parts
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare_digest on both branches: a missing user costs as much as a wrong password
        ok = hmac.compare_digest(password.encode(), (expected or "\0" + password).encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                       "that is different from username")
        return MechanismStep(challenge=b"", complete=True, principal=username)
