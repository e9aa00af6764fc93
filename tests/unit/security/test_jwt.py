from __future__ import annotations

import base64
import json
from typing import cast

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kmirror.security.jwt import (
    Jws,
    JwtError,
    ValidatedToken,
    names_unknown_key,
    parse_jws,
    unsecured_token,
    validate_claims,
    validate_signed,
    validate_unsecured,
    verify_signature,
)
from kmirror.security.jwt_signing import public_jwk, signed_token

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000


def _pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(**extra: object) -> dict[str, object]:
    claims: dict[str, object] = {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600, "scope": "read"}
    claims.update(extra)
    return claims


@pytest.fixture(scope="module")
def rsa_pem() -> bytes:
    return _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="module")
def other_rsa_pem() -> bytes:
    return _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="module")
def ec_pem() -> bytes:
    return _pem(ec.generate_private_key(ec.SECP256R1()))


@pytest.fixture(scope="module")
def jwks(rsa_pem: bytes, ec_pem: bytes) -> dict[str, object]:
    return {"keys": [public_jwk(rsa_pem, "rsa-1"), public_jwk(ec_pem, "ec-1", alg="ES256")]}


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"])
def test_rsa_round_trip(rsa_pem: bytes, alg: str) -> None:
    token = signed_token(_claims(), rsa_pem, "k", alg=alg)
    keys = {"keys": [public_jwk(rsa_pem, "k", alg=alg)]}
    result = validate_signed(token, keys, now_ms=NOW_MS)
    assert result == ValidatedToken(
        principal="alice", scopes=frozenset({"read"}), expires_ms=(NOW_S + 3600) * 1000,
        start_ms=(NOW_S - 10) * 1000,
    )


def test_ec_p256_round_trip(ec_pem: bytes, jwks: dict[str, object]) -> None:
    token = signed_token(_claims(), ec_pem, "ec-1", alg="ES256")
    jws = parse_jws(token)
    assert jws.alg == "ES256" and jws.kid == "ec-1"
    assert len(jws.signature) == 64
    assert validate_signed(token, jwks, now_ms=NOW_MS).principal == "alice"


@pytest.mark.parametrize(("curve", "alg"), [(ec.SECP384R1(), "ES384"), (ec.SECP521R1(), "ES512")])
def test_ec_larger_curves_round_trip(curve: ec.EllipticCurve, alg: str) -> None:
    pem = _pem(ec.generate_private_key(curve))
    token = signed_token(_claims(), pem, "e", alg=alg)
    assert validate_signed(token, {"keys": [public_jwk(pem, "e", alg=alg)]}, now_ms=NOW_MS).principal == "alice"


def test_public_jwk_shapes(rsa_pem: bytes, ec_pem: bytes) -> None:
    rsa_jwk = public_jwk(rsa_pem, "r")
    assert {k: rsa_jwk[k] for k in ("kty", "kid", "use", "alg", "e")} == {
        "kty": "RSA", "kid": "r", "use": "sig", "alg": "RS256", "e": "AQAB",
    }
    ec_jwk = public_jwk(ec_pem, "e", alg="ES256")
    assert ec_jwk["kty"] == "EC" and ec_jwk["crv"] == "P-256"
    assert len(base64.urlsafe_b64decode(str(ec_jwk["x"]) + "=")) == 32


def test_key_and_algorithm_must_agree(rsa_pem: bytes, ec_pem: bytes) -> None:
    with pytest.raises(JwtError, match="RSA private key"):
        signed_token(_claims(), ec_pem, "k", alg="RS256")
    with pytest.raises(JwtError, match="P-384"):
        public_jwk(ec_pem, "k", alg="ES384")
    with pytest.raises(JwtError, match="Unsupported JWS algorithm"):
        signed_token(_claims(), rsa_pem, "k", alg="HS256")


# --- signature checks ----------------------------------------------------------------------


def test_tampered_payload_refused(rsa_pem: bytes, jwks: dict[str, object]) -> None:
    header, _, signature = signed_token(_claims(), rsa_pem, "rsa-1").split(".")
    forged = _b64(json.dumps(_claims(sub="mallory")).encode())
    with pytest.raises(JwtError, match="signature verification failed"):
        validate_signed(f"{header}.{forged}.{signature}", jwks, now_ms=NOW_MS)


def test_tampered_ec_signature_refused(ec_pem: bytes, jwks: dict[str, object]) -> None:
    header, payload, signature = signed_token(_claims(), ec_pem, "ec-1", alg="ES256").split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=="))
    raw[5] ^= 0x01
    with pytest.raises(JwtError, match="signature verification failed"):
        validate_signed(f"{header}.{payload}.{_b64(bytes(raw))}", jwks, now_ms=NOW_MS)


def test_wrong_key_refused(other_rsa_pem: bytes, jwks: dict[str, object]) -> None:
    token = signed_token(_claims(), other_rsa_pem, "rsa-1")
    with pytest.raises(JwtError, match="signature verification failed"):
        validate_signed(token, jwks, now_ms=NOW_MS)


def test_unknown_kid_named(rsa_pem: bytes, jwks: dict[str, object]) -> None:
    token = signed_token(_claims(), rsa_pem, "rotated-away")
    with pytest.raises(JwtError, match="rotated-away"):
        validate_signed(token, jwks, now_ms=NOW_MS)


def test_without_kid_every_fitting_key_is_tried(rsa_pem: bytes, other_rsa_pem: bytes) -> None:
    token = signed_token(_claims(), rsa_pem, "ignored")
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header["kid"] == "ignored"
    jws = parse_jws(token)
    no_kid = Jws(
        header={"alg": "RS256"}, claims=jws.claims, signing_input=jws.signing_input, signature=jws.signature
    )
    keys = {"keys": [public_jwk(other_rsa_pem, "a"), public_jwk(rsa_pem, "b")]}
    verify_signature(no_kid, keys)
    with pytest.raises(JwtError, match="signature verification failed"):
        verify_signature(no_kid, {"keys": [public_jwk(other_rsa_pem, "a")]})


def test_encryption_keys_and_other_key_types_skipped(rsa_pem: bytes, ec_pem: bytes) -> None:
    token = signed_token(_claims(), rsa_pem, "k")
    enc_only = public_jwk(rsa_pem, "k") | {"use": "enc"}
    with pytest.raises(JwtError, match="suitable verification key"):
        validate_signed(token, {"keys": [enc_only]}, now_ms=NOW_MS)
    ec_under_same_kid = public_jwk(ec_pem, "k", alg="ES256")
    with pytest.raises(JwtError, match="suitable verification key"):
        validate_signed(token, {"keys": [ec_under_same_kid]}, now_ms=NOW_MS)


def test_alg_none_refused_by_signed_validation(jwks: dict[str, object]) -> None:
    with pytest.raises(JwtError, match="'none'"):
        validate_signed(unsecured_token(_claims()), jwks, now_ms=NOW_MS)


def test_unknown_alg_refused(jwks: dict[str, object]) -> None:
    hs_header = _b64(json.dumps({"alg": "HS256"}).encode())
    token = f"{hs_header}.{_b64(json.dumps(_claims()).encode())}.{_b64(b'x' * 32)}"
    with pytest.raises(JwtError, match="Unsupported JWS algorithm: HS256"):
        validate_signed(token, jwks, now_ms=NOW_MS)


def test_jwks_without_keys_array(rsa_pem: bytes) -> None:
    with pytest.raises(JwtError, match="'keys'"):
        validate_signed(signed_token(_claims(), rsa_pem, "k"), {}, now_ms=NOW_MS)


def test_short_rsa_key_refused() -> None:
    small = _pem(rsa.generate_private_key(public_exponent=65537, key_size=1024))
    token = signed_token(_claims(), small, "s")
    with pytest.raises(JwtError, match="minimum 2048"):
        validate_signed(token, {"keys": [public_jwk(small, "s")]}, now_ms=NOW_MS)


# --- time claims ---------------------------------------------------------------------------


def test_expired_refused_and_within_skew_accepted(rsa_pem: bytes, jwks: dict[str, object]) -> None:
    token = signed_token(_claims(iat=NOW_S - 100, exp=NOW_S - 10), rsa_pem, "rsa-1")
    assert validate_signed(token, jwks, now_ms=NOW_MS, clock_skew_ms=30_000).principal == "alice"
    with pytest.raises(JwtError, match="expired"):
        validate_signed(token, jwks, now_ms=NOW_MS, clock_skew_ms=5_000)
    with pytest.raises(JwtError, match="expired"):
        validate_claims(_claims(exp=NOW_S), now_ms=NOW_MS, clock_skew_ms=0)


def test_exp_required_and_numeric() -> None:
    claims = _claims()
    del claims["exp"]
    with pytest.raises(JwtError, match="Required claim missing: exp"):
        validate_claims(claims, now_ms=NOW_MS)
    with pytest.raises(JwtError, match="exp claim had the incorrect type"):
        validate_claims(_claims(exp=str(NOW_S + 60)), now_ms=NOW_MS)
    with pytest.raises(JwtError, match="exp claim had the incorrect type"):
        validate_claims(_claims(exp=True), now_ms=NOW_MS)


def test_fractional_times_in_milliseconds() -> None:
    result = validate_claims(_claims(iat=NOW_S - 1.25, exp=NOW_S + 60.5), now_ms=NOW_MS)
    assert result.expires_ms == NOW_MS + 60_500
    assert result.start_ms == NOW_MS - 1_250


def test_iat_in_future_refused_beyond_skew() -> None:
    with pytest.raises(JwtError, match="Issued At"):
        validate_claims(_claims(iat=NOW_S + 120), now_ms=NOW_MS, clock_skew_ms=30_000)
    assert validate_claims(_claims(iat=NOW_S + 20), now_ms=NOW_MS, clock_skew_ms=30_000).start_ms == NOW_MS + 20_000


def test_iat_optional() -> None:
    claims = _claims()
    del claims["iat"]
    assert validate_claims(claims, now_ms=NOW_MS).start_ms is None


def test_exp_must_follow_iat() -> None:
    with pytest.raises(JwtError, match="not after the Issued At"):
        validate_claims(_claims(iat=NOW_S + 5, exp=NOW_S + 5), now_ms=NOW_MS)


def test_nbf_respected() -> None:
    with pytest.raises(JwtError, match="not yet valid"):
        validate_claims(_claims(nbf=NOW_S + 120), now_ms=NOW_MS, clock_skew_ms=30_000)
    assert validate_claims(_claims(nbf=NOW_S + 20), now_ms=NOW_MS, clock_skew_ms=30_000).principal == "alice"
    assert validate_claims(_claims(nbf=NOW_S - 20), now_ms=NOW_MS, clock_skew_ms=0).principal == "alice"


def test_negative_skew_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="clock skew"):
        validate_claims(_claims(), now_ms=NOW_MS, clock_skew_ms=-1)


# --- audience, issuer ----------------------------------------------------------------------


def test_audience_list_must_intersect() -> None:
    claims = _claims(aud=["other", "kafka-broker"])
    assert validate_claims(claims, now_ms=NOW_MS, expected_audience=["kafka-broker", "x"]).principal == "alice"
    with pytest.raises(JwtError, match="acceptable identifier"):
        validate_claims(claims, now_ms=NOW_MS, expected_audience=["nope"])


def test_audience_string_and_missing() -> None:
    assert validate_claims(_claims(aud="kafka"), now_ms=NOW_MS, expected_audience=["kafka"]).principal == "alice"
    with pytest.raises(JwtError, match="acceptable identifier"):
        validate_claims(_claims(aud="kafka"), now_ms=NOW_MS, expected_audience=["kafka-2"])
    with pytest.raises(JwtError, match="No Audience"):
        validate_claims(_claims(), now_ms=NOW_MS, expected_audience=["kafka"])


def test_audience_unchecked_when_none_expected() -> None:
    assert validate_claims(_claims(aud="anyone"), now_ms=NOW_MS).principal == "alice"


def test_issuer() -> None:
    issuer = "https://idp.example/"
    assert validate_claims(_claims(iss=issuer), now_ms=NOW_MS, expected_issuer=issuer).principal == "alice"
    with pytest.raises(JwtError, match="doesn't match expected"):
        validate_claims(_claims(iss="https://evil.example/"), now_ms=NOW_MS, expected_issuer=issuer)
    with pytest.raises(JwtError, match="No Issuer"):
        validate_claims(_claims(), now_ms=NOW_MS, expected_issuer=issuer)


def test_issuer_and_audience_through_signed_validation(rsa_pem: bytes, jwks: dict[str, object]) -> None:
    token = signed_token(_claims(iss="idp", aud=["kafka"]), rsa_pem, "rsa-1")
    ok = validate_signed(token, jwks, now_ms=NOW_MS, expected_issuer="idp", expected_audience=["kafka"])
    assert ok.principal == "alice"
    with pytest.raises(JwtError, match="Issuer"):
        validate_signed(token, jwks, now_ms=NOW_MS, expected_issuer="idp2")


# --- principal, scope ----------------------------------------------------------------------


def test_scope_as_space_separated_string() -> None:
    result = validate_claims(_claims(scope="read  write admin"), now_ms=NOW_MS)
    assert result.scopes == frozenset({"read", "write", "admin"})


def test_scope_as_list() -> None:
    result = validate_claims(_claims(scope=["read", "write"]), now_ms=NOW_MS)
    assert result.scopes == frozenset({"read", "write"})
    with pytest.raises(JwtError, match="non-string element"):
        validate_claims(_claims(scope=["read", 7]), now_ms=NOW_MS)
    with pytest.raises(JwtError, match="incorrect type"):
        validate_claims(_claims(scope={"read": True}), now_ms=NOW_MS)


def test_scope_absent_is_empty() -> None:
    claims = _claims()
    del claims["scope"]
    assert validate_claims(claims, now_ms=NOW_MS).scopes == frozenset()


def test_custom_scope_claim_name() -> None:
    result = validate_claims(_claims(scp=["kafka"]), now_ms=NOW_MS, scope_claim="scp")
    assert result.scopes == frozenset({"kafka"})


def test_missing_required_scope_named() -> None:
    with pytest.raises(JwtError, match=r"\['admin', 'write'\]"):
        validate_claims(_claims(scope="read"), now_ms=NOW_MS, required_scopes=["read", "write", "admin"])
    ok = validate_claims(_claims(scope="read write"), now_ms=NOW_MS, required_scopes=["write"])
    assert ok.scopes == frozenset({"read", "write"})


def test_principal_from_custom_claim(rsa_pem: bytes, jwks: dict[str, object]) -> None:
    token = signed_token(_claims(sub="svc-123", client_id="orders-service"), rsa_pem, "rsa-1")
    assert validate_signed(token, jwks, now_ms=NOW_MS, principal_claim="client_id").principal == "orders-service"
    with pytest.raises(JwtError, match="Required claim missing: email"):
        validate_signed(token, jwks, now_ms=NOW_MS, principal_claim="email")


def test_principal_must_be_non_blank_string() -> None:
    with pytest.raises(JwtError, match="No principal name in JWT claim: sub"):
        validate_claims(_claims(sub="   "), now_ms=NOW_MS)
    with pytest.raises(JwtError, match="sub claim had the incorrect type"):
        validate_claims(_claims(sub=42), now_ms=NOW_MS)


# --- unsecured tokens ----------------------------------------------------------------------


def test_unsecured_round_trip() -> None:
    token = unsecured_token(_claims(scope=["a", "b"]))
    assert token.endswith(".")
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header == {"alg": "none"}
    result = validate_unsecured(token, now_ms=NOW_MS, required_scopes=["a"])
    assert result.principal == "alice" and result.scopes == frozenset({"a", "b"})


def test_unsecured_refuses_signed_token(rsa_pem: bytes) -> None:
    with pytest.raises(JwtError, match="must have 'none'"):
        validate_unsecured(signed_token(_claims(), rsa_pem, "k"), now_ms=NOW_MS)


def test_unsecured_refuses_a_signature() -> None:
    with pytest.raises(JwtError, match="must not contain a digital signature"):
        validate_unsecured(unsecured_token(_claims()) + "c2ln", now_ms=NOW_MS)


def test_unsecured_skew_defaults_to_zero() -> None:
    token = unsecured_token(_claims(iat=NOW_S - 100, exp=NOW_S - 1))
    with pytest.raises(JwtError, match="expired"):
        validate_unsecured(token, now_ms=NOW_MS)
    assert validate_unsecured(token, now_ms=NOW_MS, clock_skew_ms=5_000).principal == "alice"


# --- malformed tokens ----------------------------------------------------------------------


def test_two_parts_refused() -> None:
    header, payload, _ = unsecured_token(_claims()).split(".")
    with pytest.raises(JwtError, match="but 2 provided"):
        parse_jws(f"{header}.{payload}")


def test_empty_token_refused() -> None:
    with pytest.raises(JwtError, match="Empty JWT"):
        parse_jws("  ")


def test_bad_base64_refused() -> None:
    payload = _b64(json.dumps(_claims()).encode())
    with pytest.raises(JwtError, match="header section is not Base64URL"):
        parse_jws(f"ey$$.{payload}.")
    with pytest.raises(JwtError, match="payload section is not Base64URL"):
        parse_jws(f"{_b64(b'{}')}.a.")


def test_padding_tolerated() -> None:
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').decode()
    payload = base64.urlsafe_b64encode(json.dumps(_claims()).encode()).decode()
    assert "=" in header + payload
    assert parse_jws(f"{header}.{payload}.").claims["sub"] == "alice"


def test_non_object_json_refused() -> None:
    header = _b64(b'{"alg":"none"}')
    with pytest.raises(JwtError, match="payload section is not a JSON object"):
        parse_jws(f"{header}.{_b64(b'[1, 2]')}.")
    with pytest.raises(JwtError, match="header section is not a JSON object"):
        parse_jws(f"{_b64(json.dumps('none').encode())}.{_b64(b'{}')}.")
    with pytest.raises(JwtError, match="not valid JSON"):
        parse_jws(f"{header}.{_b64(b'{not json')}.")


def test_header_without_alg_refused() -> None:
    with pytest.raises(JwtError, match="Algorithm"):
        parse_jws(f"{_b64(json.dumps({'typ': 'JWT'}).encode())}.{_b64(b'{}')}.")


def test_parsed_jws_is_read_only() -> None:
    jws = parse_jws(unsecured_token(_claims()))
    assert jws.alg == "none" and jws.kid is None and jws.signature == b""
    with pytest.raises(TypeError):
        cast("dict[str, object]", jws.claims)["sub"] = "mallory"


def test_names_unknown_key_tells_a_rotated_key_from_a_known_one(rsa_pem: bytes) -> None:
    jwks = {"keys": [public_jwk(rsa_pem, "key-1")]}
    assert not names_unknown_key(signed_token(_claims(), rsa_pem, "key-1"), jwks)
    assert names_unknown_key(signed_token(_claims(), rsa_pem, "key-2"), jwks)
    assert not names_unknown_key(unsecured_token(_claims()), jwks)  # no kid: nothing to fetch
    assert not names_unknown_key("not a token", jwks)
