"""Signing JWTs and publishing their keys (RSA and EC, the algorithms of `security/jwt.py`):
what an identity provider does; kmirror's test identity provider (`testing/oidc.py`) mints its
tokens and its JWK Set with these.
"""

from __future__ import annotations

from collections.abc import Mapping

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from kmirror.security.jwt import (
    JwtError,
    _algorithm,
    _b64url_encode,
    _EcAlg,
    _json_bytes,
    _rsa_padding,
    _RsaAlg,
)


def _private_key(private_key_pem: bytes) -> rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise JwtError(f"Unable to load the private key: {e}") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise JwtError(f"Unsupported private key type: {type(key).__name__}")
    return key


def _key_mismatch(alg: str, spec: _RsaAlg | _EcAlg) -> JwtError:
    if isinstance(spec, _RsaAlg):
        return JwtError(f"Algorithm {alg} needs an RSA private key")
    return JwtError(f"Algorithm {alg} needs an EC private key on curve {spec.crv}")


def signed_token(claims: Mapping[str, object], private_key_pem: bytes, kid: str, alg: str = "RS256") -> str:
    """A compact JWS of `claims`, signed with an unencrypted PEM private key (RSA or EC)."""
    spec = _algorithm(alg)
    key = _private_key(private_key_pem)
    header = {"alg": alg, "typ": "JWT", "kid": kid}
    signing_input = f"{_b64url_encode(_json_bytes(header))}.{_b64url_encode(_json_bytes(claims))}"
    data = signing_input.encode("ascii")
    if isinstance(spec, _RsaAlg) and isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(data, _rsa_padding(spec), spec.hash)
    elif (
        isinstance(spec, _EcAlg)
        and isinstance(key, ec.EllipticCurvePrivateKey)
        and key.curve.name == spec.curve.name
    ):
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(spec.hash)))
        signature = r.to_bytes(spec.coord_size, "big") + s.to_bytes(spec.coord_size, "big")
    else:
        raise _key_mismatch(alg, spec)
    return f"{signing_input}.{_b64url_encode(signature)}"


def _b64url_uint_encode(value: int, size: int | None = None) -> str:
    return _b64url_encode(value.to_bytes(size if size is not None else (value.bit_length() + 7) // 8, "big"))


def public_jwk(private_key_pem: bytes, kid: str, alg: str = "RS256") -> dict[str, object]:
    """The public half of an unencrypted PEM private key as a JWK, for a JWK Set's `keys`."""
    spec = _algorithm(alg)
    key = _private_key(private_key_pem)
    if isinstance(spec, _RsaAlg) and isinstance(key, rsa.RSAPrivateKey):
        numbers = key.public_key().public_numbers()
        return {
            "kty": "RSA",
            "kid": kid,
            "use": "sig",
            "alg": alg,
            "n": _b64url_uint_encode(numbers.n),
            "e": _b64url_uint_encode(numbers.e),
        }
    if (
        isinstance(spec, _EcAlg)
        and isinstance(key, ec.EllipticCurvePrivateKey)
        and key.curve.name == spec.curve.name
    ):
        point = key.public_key().public_numbers()
        return {
            "kty": "EC",
            "kid": kid,
            "use": "sig",
            "alg": alg,
            "crv": spec.crv,
            "x": _b64url_uint_encode(point.x, spec.coord_size),
            "y": _b64url_uint_encode(point.y, spec.coord_size),
        }
    raise _key_mismatch(alg, spec)
