from __future__ import annotations

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.delegation_tokens import (
    TokenSettings,
    create_token,
    describable_tokens,
    expire_token,
    login_credential,
    remove_expired_tokens,
    renew_token,
)
from kmirror.metadata.controller.result import ControllerResult
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import DelegationTokenRecord, RemoveDelegationTokenRecord, decode, encode
from kmirror.metadata.snapshot import snapshot_records
from kmirror.security.delegation_token import KafkaPrincipal, token_hmac, token_scram_credential
from kmirror.security.scram import ScramMechanism

SETTINGS = TokenSettings("secret", max_lifetime_ms=10_000, expiry_time_ms=4_000)
BOB = KafkaPrincipal("User", "bob")


def applied(image: MetadataImage, result: ControllerResult[object]) -> MetadataImage:
    records = [decode(encode(r)) for r in result.records]  # through the metadata log's codec
    return image.apply(records, image.offset + len(records))


def created(image: MetadataImage = EMPTY_IMAGE, now_ms: int = 1_000, token_id: str = "t1",
            max_lifetime_ms: int = -1, owner: str | None = None) -> tuple[MetadataImage, DelegationTokenRecord]:
    result = create_token(image, SETTINGS, "User:alice", owner, [BOB], max_lifetime_ms, now_ms, token_id)
    assert result.response is not None and result.response.token is not None
    assert result.response.hmac == token_hmac("secret", token_id)
    return applied(image, result), result.response.token


def test_a_token_lives_until_its_expiry_and_never_past_its_max_lifetime() -> None:
    image, token = created()
    assert image.delegation_tokens["t1"] == token == DelegationTokenRecord(
        "User:alice", "User:alice", ("User:bob",), 1_000, 11_000, 5_000, "t1")
    _, short = created(max_lifetime_ms=2_000)
    assert (short.max_timestamp, short.expiration_timestamp) == (3_000, 3_000)
    _, capped = created(max_lifetime_ms=60_000)  # never more than delegation.token.max.lifetime.ms
    assert capped.max_timestamp == 11_000
    mac = token_hmac("secret", "t1")
    renewed = renew_token(image, SETTINGS, "User:bob", mac, -1, 4_500)  # a renewer
    assert renewed.response is not None and renewed.response.expiry_timestamp_ms == 8_500
    image = applied(image, renewed)
    late = renew_token(image, SETTINGS, "User:alice", mac, 4_000, 8_000)
    assert late.response is not None and late.response.expiry_timestamp_ms == 11_000  # the max lifetime
    expire = expire_token(image, SETTINGS, "User:alice", mac, 100, 5_000)
    assert expire.response is not None and expire.response.expiry_timestamp_ms == 5_100
    assert not remove_expired_tokens(applied(image, expire), 5_100)
    assert remove_expired_tokens(applied(image, expire), 5_101) == [RemoveDelegationTokenRecord("t1")]
    at_once = expire_token(image, SETTINGS, "User:alice", mac, -1, 5_000)
    assert at_once.records == [RemoveDelegationTokenRecord("t1")]
    assert applied(image, at_once).delegation_tokens == {}


def test_kafka_errors() -> None:
    image, _ = created()
    mac = token_hmac("secret", "t1")

    def renew_error(principal: str, mac: bytes = mac, now_ms: int = 2_000,
                    settings: TokenSettings = SETTINGS) -> ErrorCode:
        result = renew_token(image, settings, principal, mac, -1, now_ms)
        assert result.response is not None and not result.records
        return result.response.error.code

    assert renew_error("User:carol") == ErrorCode.delegation_token_owner_mismatch
    assert renew_error("User:alice", mac=token_hmac("another secret", "t1")) == ErrorCode.delegation_token_not_found
    assert renew_error("User:alice", now_ms=5_001) == ErrorCode.delegation_token_expired
    disabled = TokenSettings(None, 10_000, 4_000)
    assert renew_error("User:alice", settings=disabled) == ErrorCode.delegation_token_auth_disabled
    result = create_token(image, disabled, "User:alice", None, [], -1, 0, "t2")
    assert result.response is not None and result.response.error.code == ErrorCode.delegation_token_auth_disabled
    result = create_token(image, SETTINGS, "User:alice", None, [KafkaPrincipal("Group", "g")], -1, 0, "t2")
    assert result.response is not None and result.response.error.code == ErrorCode.invalid_principal_type
    assert not result.records
    expired = expire_token(image, SETTINGS, "User:carol", mac, -1, 2_000)
    assert expired.response is not None and expired.response.error.code == ErrorCode.delegation_token_owner_mismatch


def test_owners_describe_and_snapshots_keep_tokens() -> None:
    image, _ = created()
    image, _ = created(image, now_ms=2_000, token_id="t2", owner="User:carol")
    assert [t.token_id for t in describable_tokens(image, None)] == ["t1", "t2"]
    assert [t.token_id for t in describable_tokens(image, ["User:carol"])] == ["t2"]
    assert describable_tokens(image, []) == []
    records = snapshot_records(image)
    assert EMPTY_IMAGE.apply(records, len(records) - 1).delegation_tokens == image.delegation_tokens


def test_a_token_logs_in_as_its_owner_until_its_expiry_only_with_the_secret() -> None:
    image, _ = created(max_lifetime_ms=2_000)  # expiry 3_000 = max lifetime
    found = login_credential(image, "secret", "t1", ScramMechanism.SCRAM_SHA_512)
    assert found is not None and (found.owner, found.expiry_timestamp_ms) == ("alice", 3_000)
    assert found.credential == token_scram_credential(ScramMechanism.SCRAM_SHA_512, "secret", "t1")
    assert login_credential(image, None, "t1", ScramMechanism.SCRAM_SHA_512) is None
    assert login_credential(image, "secret", "t2", ScramMechanism.SCRAM_SHA_512) is None
