"""SCRAM mechanisms and credentials (RFC 5802, RFC 7677; Kafka's `ScramMechanism`, `ScramFormatter`).

A credential is what the broker keeps for one user and mechanism: the salt, the iteration
count, `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
`ServerKey = HMAC(SaltedPassword, "Server Key")`. The password, and the salted password,
are never stored. Kafka's AlterUserScramCredentials carries the salted password computed by
the client (`Hi(password, salt, iterations)`); the controller derives the keys from it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from enum import IntEnum

# Kafka's limits: ScramMechanism's minimum, and the controller's maximum for AlterUserScramCredentials.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramMechanism(IntEnum):
    """The int8 of DescribeUserScramCredentials/AlterUserScramCredentials and the metadata records."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}[self]

    @classmethod
    def from_mechanism_name(cls, name: str) -> ScramMechanism | None:
        for m in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if m.mechanism_name == name:
                return m
        return None

    @classmethod
    def from_type(cls, value: int) -> ScramMechanism:
        return cls(value) if value in (1, 2) else cls.UNKNOWN


SCRAM_MECHANISM_NAMES = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def hmac_digest(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mechanism.hash_name).digest()


def digest(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 `Hi(Normalize(password), salt, i)`, i.e. PBKDF2 with the mechanism's HMAC.
    SASLprep is not applied, as Kafka's ScramFormatter does not."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Client Key")


def server_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Server Key")


def credential_from_salted_password(mechanism: ScramMechanism, salt: bytes, salted: bytes,
                                    iterations: int) -> ScramCredential:
    return ScramCredential(salt, digest(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted),
                           iterations)


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def client_proof(mechanism: ScramMechanism, salted: bytes, auth_message: bytes) -> bytes:
    key = client_key(mechanism, salted)
    return xor(key, hmac_digest(mechanism, digest(mechanism, key), auth_message))


def server_signature(mechanism: ScramMechanism, key: bytes, auth_message: bytes) -> bytes:
    return hmac_digest(mechanism, key, auth_message)


def verify_client_proof(mechanism: ScramMechanism, credential: ScramCredential, auth_message: bytes,
                        proof: bytes) -> bool:
    """`H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey`, in constant time."""
    signature = hmac_digest(mechanism, credential.stored_key, auth_message)
    if len(proof) != len(signature):
        return False
    return hmac.compare_digest(digest(mechanism, xor(proof, signature)), credential.stored_key)


def escape_username(name: str) -> str:
    """RFC 5802 saslname: ',' as '=2C' and '=' as '=3D'."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(name: str) -> str | None:
    """The user name of a saslname; None when it holds a '=' not followed by 2C or 3D."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1:i + 3]
            if code not in ("2C", "3D"):
                return None
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)
