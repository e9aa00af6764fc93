"""JWTs for SASL/OAUTHBEARER (RFC 7515, RFC 7518, RFC 7519; KIP-255, KIP-768).

Two of Kafka's broker-side token checks:

* the unsecured one, `OAuthBearerUnsecuredJws` with `OAuthBearerUnsecuredValidatorCallbackHandler`:
  a compact JWS whose header says `"alg":"none"` and whose signature is empty, the default when
  no `sasl.server.callback.handler.class` is set (for development, never for production);
* the secured one, `OAuthBearerValidatorCallbackHandler` with its broker `JwtValidator`: a JWS
  signed with RS*/PS*/ES*, checked against the JWK Set served at
  `sasl.oauthbearer.jwks.endpoint.url`, then its claims against
  `sasl.oauthbearer.expected.audience`, `sasl.oauthbearer.expected.issuer`,
  `sasl.oauthbearer.sub.claim.name`, `sasl.oauthbearer.scope.claim.name` and
  `sasl.oauthbearer.clock.skew.seconds`.

Sans-IO: fetching the JWK Set is the caller's, and so is the clock (`now_ms`). Every refusal is
a `JwtError` carrying a one-line reason. `signed_token` and `public_jwk` mint tokens and publish
keys for tests and a test OIDC provider.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypedDict, Unpack

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

__all__ = [
    "JwtError",
    "Jws",
    "ValidatedToken",
    "parse_jws",
    "verify_signature",
    "validate_claims",
    "unsecured_token",
    "validate_unsecured",
    "validate_signed",
    "names_unknown_key",
    "ClaimRules",
]

# jose4j, under Kafka's validator, refuses RSA keys shorter than this.
MIN_RSA_KEY_BITS = 2048


class JwtError(ValueError):
    """A token refused: malformed, badly signed, or with claims that do not pass."""


@dataclass(frozen=True, slots=True)
class _RsaAlg:
    hash: hashes.HashAlgorithm
    pss: bool


@dataclass(frozen=True, slots=True)
class _EcAlg:
    hash: hashes.HashAlgorithm
    curve: ec.EllipticCurve
    crv: str
    coord_size: int


_ALGORITHMS: dict[str, _RsaAlg | _EcAlg] = {
    "RS256": _RsaAlg(hashes.SHA256(), pss=False),
    "RS384": _RsaAlg(hashes.SHA384(), pss=False),
    "RS512": _RsaAlg(hashes.SHA512(), pss=False),
    "PS256": _RsaAlg(hashes.SHA256(), pss=True),
    "PS384": _RsaAlg(hashes.SHA384(), pss=True),
    "PS512": _RsaAlg(hashes.SHA512(), pss=True),
    "ES256": _EcAlg(hashes.SHA256(), ec.SECP256R1(), "P-256", 32),
    "ES384": _EcAlg(hashes.SHA384(), ec.SECP384R1(), "P-384", 48),
    "ES512": _EcAlg(hashes.SHA512(), ec.SECP521R1(), "P-521", 66),
}

_B64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")


# --- compact serialization -----------------------------------------------------------------


def _b64url_decode(section: str, name: str) -> bytes:
    if not _B64URL.fullmatch(section):
        raise JwtError(f"Malformed JWT: the {name} section is not Base64URL-encoded")
    stripped = section.rstrip("=")
    try:
        return base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except (binascii.Error, ValueError):
        raise JwtError(f"Malformed JWT: the {name} section is not Base64URL-encoded") from None


def _b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _json_object(section: str, name: str) -> Mapping[str, object]:
    raw = _b64url_decode(section, name)
    try:
        value: object = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError):
        raise JwtError(f"Malformed JWT: the {name} section is not valid JSON") from None
    if not isinstance(value, dict):
        raise JwtError(f"Malformed JWT: the {name} section is not a JSON object")
    return MappingProxyType(value)


def _json_bytes(value: Mapping[str, object]) -> bytes:
    return json.dumps(dict(value), separators=(",", ":"), allow_nan=False).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Jws:
    """A parsed compact JWS: its JOSE header, its claims, the bytes signed and the signature."""

    header: Mapping[str, object]
    claims: Mapping[str, object]
    signing_input: bytes
    signature: bytes

    @property
    def alg(self) -> str:
        alg = self.header.get("alg")
        return alg if isinstance(alg, str) else ""

    @property
    def kid(self) -> str | None:
        kid = self.header.get("kid")
        return kid if isinstance(kid, str) else None


def parse_jws(token: str) -> Jws:
    """Split and decode a compact JWS (`header.claims.signature`, each Base64URL)."""
    token = token.strip()
    if not token:
        raise JwtError("Empty JWT provided; expected three sections (header, payload, and signature)")
    parts = token.split(".")
    if len(parts) != 3:
        raise JwtError(
            f"Malformed JWT: expected three sections (header, payload, and signature), "
            f"but {len(parts)} provided"
        )
    header_b64, claims_b64, signature_b64 = parts
    if not header_b64:
        raise JwtError("Malformed JWT: the header section is missing")
    if not claims_b64:
        raise JwtError("Malformed JWT: the payload section is missing")
    header = _json_object(header_b64, "header")
    claims = _json_object(claims_b64, "payload")
    signature = _b64url_decode(signature_b64, "signature")
    alg = header.get("alg")
    if not isinstance(alg, str) or not alg:
        raise JwtError("Malformed JWT: the JWS header must have an Algorithm (alg) value")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise JwtError("Malformed JWT: the Key ID (kid) header is not a string")
    if "crit" in header:
        raise JwtError(f"Unrecognized critical JWS header extension(s): {header['crit']}")
    return Jws(
        header=header,
        claims=claims,
        signing_input=f"{header_b64}.{claims_b64}".encode("ascii"),
        signature=signature,
    )


# --- signatures ----------------------------------------------------------------------------


def _algorithm(alg: str) -> _RsaAlg | _EcAlg:
    if alg == "none":
        raise JwtError("'none' is a disallowed JWS algorithm")
    spec = _ALGORITHMS.get(alg)
    if spec is None:
        raise JwtError(f"Unsupported JWS algorithm: {alg}")
    return spec


def _b64url_uint(jwk: Mapping[str, object], member: str) -> int:
    value = jwk.get(member)
    if not isinstance(value, str) or not value:
        raise JwtError(f"Malformed JWK: missing or non-string '{member}'")
    return int.from_bytes(_b64url_decode(value, f"JWK '{member}'"), "big")


def _public_key(
    jwk: Mapping[str, object], spec: _RsaAlg | _EcAlg
) -> rsa.RSAPublicKey | ec.EllipticCurvePublicKey:
    try:
        if isinstance(spec, _RsaAlg):
            key = rsa.RSAPublicNumbers(_b64url_uint(jwk, "e"), _b64url_uint(jwk, "n")).public_key()
            if key.key_size < MIN_RSA_KEY_BITS:
                raise JwtError(f"RSA key of size {key.key_size} bits is below the minimum {MIN_RSA_KEY_BITS}")
            return key
        return ec.EllipticCurvePublicNumbers(
            _b64url_uint(jwk, "x"), _b64url_uint(jwk, "y"), spec.curve
        ).public_key()
    except JwtError:
        raise
    except (ValueError, UnsupportedAlgorithm) as e:
        raise JwtError(f"Malformed JWK: {e}") from None


def _fits(jwk: Mapping[str, object], alg: str, spec: _RsaAlg | _EcAlg) -> bool:
    use = jwk.get("use")
    if use is not None and use != "sig":
        return False
    key_ops = jwk.get("key_ops")
    if isinstance(key_ops, list) and "verify" not in key_ops:
        return False
    key_alg = jwk.get("alg")
    if key_alg is not None and key_alg != alg:
        return False
    if isinstance(spec, _RsaAlg):
        return jwk.get("kty") == "RSA"
    return jwk.get("kty") == "EC" and jwk.get("crv") == spec.crv


def _rsa_padding(spec: _RsaAlg) -> padding.AsymmetricPadding:
    if spec.pss:
        return padding.PSS(mgf=padding.MGF1(spec.hash), salt_length=spec.hash.digest_size)
    return padding.PKCS1v15()


def _verifies(
    key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey, spec: _RsaAlg | _EcAlg, jws: Jws
) -> bool:
    try:
        if isinstance(spec, _RsaAlg):
            if not isinstance(key, rsa.RSAPublicKey):
                return False
            key.verify(jws.signature, jws.signing_input, _rsa_padding(spec), spec.hash)
            return True
        if not isinstance(key, ec.EllipticCurvePublicKey):
            return False
        size = spec.coord_size
        if len(jws.signature) != 2 * size:
            return False
        r = int.from_bytes(jws.signature[:size], "big")
        s = int.from_bytes(jws.signature[size:], "big")
        key.verify(encode_dss_signature(r, s), jws.signing_input, ec.ECDSA(spec.hash))
        return True
    except InvalidSignature:
        return False


def names_unknown_key(token: str, jwks: Mapping[str, object]) -> bool:
    """Whether `token` names a key id (`kid`) that no key of the JWK Set has: the identity
    provider may have rotated its keys, and the set is worth fetching again."""
    try:
        kid = parse_jws(token).kid
    except JwtError:
        return False
    keys = jwks.get("keys")
    return kid is not None and isinstance(keys, list) and not any(
        isinstance(k, Mapping) and k.get("kid") == kid for k in keys)


def verify_signature(jws: Jws, jwks: Mapping[str, object]) -> None:
    """Check the JWS signature against a JWK Set (`{"keys": [...]}`).

    With a `kid` in the header only the keys of that id are candidates; without one, every
    signing key whose type (and curve) fits the algorithm is tried.
    """
    alg = jws.alg
    spec = _algorithm(alg)
    keys = jwks.get("keys")
    if not isinstance(keys, list):
        raise JwtError("Malformed JWK Set: no 'keys' array")
    jwk_list = [k for k in keys if isinstance(k, Mapping)]
    kid = jws.kid
    if kid is not None:
        jwk_list = [k for k in jwk_list if k.get("kid") == kid]
        if not jwk_list:
            raise JwtError(f"No key with kid '{kid}' in the JWK Set")
    candidates = [k for k in jwk_list if _fits(k, alg, spec)]
    if not candidates:
        which = f"kid '{kid}' and alg {alg}" if kid is not None else f"alg {alg}"
        raise JwtError(f"Unable to find a suitable verification key for {which} in the JWK Set")
    malformed: JwtError | None = None
    for jwk in candidates:
        try:
            key = _public_key(jwk, spec)
        except JwtError as e:
            malformed = e
            continue
        if _verifies(key, spec, jws):
            return
    if malformed is not None and len(candidates) == 1:
        raise malformed
    raise JwtError("JWS signature verification failed")


# --- claims --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    """What Kafka's `OAuthBearerToken` carries past validation: principal, scope, lifetime, start."""

    principal: str
    scopes: frozenset[str]
    expires_ms: int
    start_ms: int | None


def _numeric_date_ms(claims: Mapping[str, object], name: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JwtError(f"The {name} claim had the incorrect type: {type(value).__name__}")
    ms = value * 1000 + 0.5
    if not math.isfinite(ms):
        raise JwtError(f"The {name} claim is out of range: {value}")
    return math.floor(ms)


def _scopes(claims: Mapping[str, object], scope_claim: str) -> frozenset[str]:
    value = claims.get(scope_claim)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        scopes: set[str] = set()
        for item in value:
            if not isinstance(item, str):
                raise JwtError(f"The {scope_claim} claim had a non-string element: {type(item).__name__}")
            if not item.strip():
                raise JwtError(
                    f"The value of the OAuth claim {scope_claim} must be non-null, non-empty, and non-whitespace"
                )
            scopes.add(item.strip())
        return frozenset(scopes)
    raise JwtError(f"The {scope_claim} claim had the incorrect type: {type(value).__name__}")


def _audiences(claims: Mapping[str, object]) -> list[str] | None:
    value = claims.get("aud")
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(a, str) for a in value):
        return [a for a in value if isinstance(a, str)]
    raise JwtError("The aud claim had the incorrect type: expected a string or an array of strings")


class ClaimRules(TypedDict, total=False):
    """What `validate_claims` checks beyond the token's own times (its keywords)."""

    clock_skew_ms: int
    principal_claim: str
    scope_claim: str
    expected_audience: Sequence[str]
    expected_issuer: str | None
    required_scopes: Sequence[str]


def validate_claims(
    claims: Mapping[str, object],
    *,
    now_ms: int,
    clock_skew_ms: int = 30_000,
    principal_claim: str = "sub",
    scope_claim: str = "scope",
    expected_audience: Sequence[str] = (),
    expected_issuer: str | None = None,
    required_scopes: Sequence[str] = (),
) -> ValidatedToken:
    """Check a token's claims at `now_ms`, allowing `clock_skew_ms` either way.

    `exp` is required; `iat` and `nbf` are checked when present; the principal comes from
    `principal_claim` and the scope from `scope_claim` (a space-separated string or an array).
    """
    if clock_skew_ms < 0:
        raise ValueError(f"Allowable clock skew must not be negative: {clock_skew_ms}")
    principal_claim = principal_claim.strip()
    scope_claim = scope_claim.strip()
    if not principal_claim:
        raise ValueError("Must specify a non-blank principal claim name")
    if not scope_claim:
        raise ValueError("Must specify a non-blank scope claim name")

    expires_ms = _numeric_date_ms(claims, "exp")
    if expires_ms is None:
        raise JwtError("Required claim missing: exp")
    if expires_ms < 0:
        raise JwtError(f"exp value must be non-negative; value given was {expires_ms} ms")
    if now_ms - clock_skew_ms >= expires_ms:
        raise JwtError(
            f"The token has expired: the time ({now_ms} ms) minus allowable clock skew "
            f"({clock_skew_ms} ms) is on or after the Expiration Time ({expires_ms} ms)"
        )

    issued_ms = _numeric_date_ms(claims, "iat")
    if issued_ms is not None:
        if issued_ms < 0:
            raise JwtError(f"iat value must be null or non-negative; value given was {issued_ms} ms")
        if issued_ms > now_ms + clock_skew_ms:
            raise JwtError(
                f"The Issued At time ({issued_ms} ms) is after the time ({now_ms} ms) "
                f"plus allowable clock skew ({clock_skew_ms} ms)"
            )
        if expires_ms <= issued_ms:
            raise JwtError(
                f"The Expiration Time ({expires_ms} ms) is not after the Issued At time ({issued_ms} ms)"
            )

    not_before_ms = _numeric_date_ms(claims, "nbf")
    if not_before_ms is not None and now_ms + clock_skew_ms < not_before_ms:
        raise JwtError(
            f"The token is not yet valid: the time ({now_ms} ms) plus allowable clock skew "
            f"({clock_skew_ms} ms) is before the Not Before time ({not_before_ms} ms)"
        )

    if expected_audience:
        audiences = _audiences(claims)
        if audiences is None:
            raise JwtError("No Audience (aud) claim present")
        if not set(audiences) & set(expected_audience):
            raise JwtError(
                f"Audience (aud) claim {audiences} doesn't contain an acceptable identifier; "
                f"expected one of {sorted(set(expected_audience))}"
            )
    else:
        _audiences(claims)

    if expected_issuer is not None:
        issuer = claims.get("iss")
        if issuer is None:
            raise JwtError("No Issuer (iss) claim present")
        if issuer != expected_issuer:
            raise JwtError(f"Issuer (iss) claim value ({issuer}) doesn't match expected value of {expected_issuer}")

    principal = claims.get(principal_claim)
    if principal is None:
        raise JwtError(f"Required claim missing: {principal_claim}")
    if not isinstance(principal, str):
        raise JwtError(f"The {principal_claim} claim had the incorrect type: {type(principal).__name__}")
    if not principal.strip():
        raise JwtError(f"No principal name in JWT claim: {principal_claim}")

    scopes = _scopes(claims, scope_claim)
    missing = sorted(set(required_scopes) - scopes)
    if missing:
        raise JwtError(
            f"The provided scope ({sorted(scopes)}) was missing required scope(s) {missing}; "
            f"all required scope elements: {list(required_scopes)}"
        )

    return ValidatedToken(
        principal=principal.strip(), scopes=scopes, expires_ms=expires_ms, start_ms=issued_ms
    )


# --- unsecured tokens ----------------------------------------------------------------------


def unsecured_token(claims: Mapping[str, object]) -> str:
    """Kafka's unsecured login token: header `{"alg":"none"}`, the claims, an empty signature."""
    return f"{_b64url_encode(_json_bytes({'alg': 'none'}))}.{_b64url_encode(_json_bytes(claims))}."


def validate_unsecured(token: str, *, now_ms: int, **rules: Unpack[ClaimRules]) -> ValidatedToken:
    """Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`: an `alg` "none" token, unsigned.

    The clock skew defaults to 0, as Kafka's `unsecuredValidatorAllowableClockSkewMs`.
    """
    jws = parse_jws(token)
    if jws.alg != "none":
        raise JwtError("Unsecured JWS must have 'none' for an algorithm")
    if jws.signature:
        raise JwtError("Unsecured JWS must not contain a digital signature")
    rules.setdefault("clock_skew_ms", 0)  # Kafka's unsecuredValidatorAllowableClockSkewMs
    return validate_claims(jws.claims, now_ms=now_ms, **rules)


def validate_signed(token: str, jwks: Mapping[str, object], *, now_ms: int,
                    **rules: Unpack[ClaimRules]) -> ValidatedToken:
    """Kafka's broker `JwtValidator`: parse, verify against the JWK Set, then check the claims."""
    jws = parse_jws(token)
    verify_signature(jws, jwks)
    return validate_claims(jws.claims, now_ms=now_ms, **rules)
