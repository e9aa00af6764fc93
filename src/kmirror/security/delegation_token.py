"""Delegation tokens (KIP-48): what a token's HMAC is and how a token authenticates.

A token is an id the active controller draws and an HMAC every node derives from it with
`delegation.token.secret.key` (HmacSHA512 of the id's UTF-8 bytes, as Kafka's
`DelegationTokenManager`): nodes with the same secret agree on every token's HMAC, and the
HMAC is never written to the metadata log. A client authenticates with SCRAM, the token id as
user name, the base64 of the HMAC as password and the extension `tokenauth=true`; the node's
SCRAM credential for it is derived from the same password, with the mechanism's minimum
iteration count (Kafka's `DelegationTokenCache`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from dataclasses import dataclass

from kmirror.security.scram import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
    salted_password,
)

TOKEN_AUTH_EXTENSION = "tokenauth"
USER_TYPE = "User"


def token_hmac(secret_key: str, token_id: str) -> bytes:
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def token_password(token_hmac_bytes: bytes) -> str:
    """The SCRAM password of a token: its HMAC in base64 (Kafka's `hmacAsBase64String`)."""
    return base64.b64encode(token_hmac_bytes).decode()


@functools.lru_cache(maxsize=1024)  # 4096 PBKDF2 rounds, not again at every connection
def token_scram_credential(mechanism: ScramMechanism, secret_key: str, token_id: str) -> ScramCredential:
    """The credential a node checks a token's SCRAM proof against. The salt is derived from the
    id (any salt serves: the password is a 64-byte HMAC nobody without the secret can compute)."""
    salt = hashlib.sha256(b"kmirror-delegation-token:" + token_id.encode()).digest()[:16]
    salted = salted_password(mechanism, token_password(token_hmac(secret_key, token_id)), salt, MIN_ITERATIONS)
    return credential_from_salted_password(mechanism, salt, salted, MIN_ITERATIONS)


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """`type:name`, as Kafka's `KafkaPrincipal.toString` (`User:alice`)."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice`; raises ValueError without a type (Kafka's `SecurityUtils.parseKafkaPrincipal`)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"expected a string in format principalType:principalName but got {text}")
        return cls(principal_type, name)
