from __future__ import annotations

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.scram import (
    ScramDeletion,
    ScramUpsertion,
    alter_credentials,
    describe_credentials,
)
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    decode,
    encode,
)
from kmirror.security.scram import ScramMechanism, credential_from_salted_password, salted_password

SHA256, SHA512 = int(ScramMechanism.SCRAM_SHA_256), int(ScramMechanism.SCRAM_SHA_512)
SALT = b"salt-of-sixteen!"


def upsert(name: str, mechanism: int = SHA256, iterations: int = 8192, password: str = "pw") -> ScramUpsertion:
    salted = salted_password(ScramMechanism.from_type(mechanism), password, SALT, max(iterations, 1))
    return ScramUpsertion(name, mechanism, iterations, SALT, salted)


def applied(image: MetadataImage, deletions: list[ScramDeletion], upsertions: list[ScramUpsertion]
            ) -> tuple[MetadataImage, dict[str, ErrorCode]]:
    result = alter_credentials(image, deletions, upsertions)
    assert result.response is not None
    records = [decode(encode(r)) for r in result.records]  # through the metadata log's codec
    return image.apply(records, image.offset + len(records)), {r.user: r.error.code for r in result.response}


def test_upsertion_stores_keys_never_the_password_and_deletion_removes() -> None:
    image, errors = applied(EMPTY_IMAGE, [], [upsert("alice"), upsert("bob", SHA512, 4096)])
    assert errors == {"alice": ErrorCode.none, "bob": ErrorCode.none}
    cred = image.scram_credentials[("alice", SHA256)]
    mech = ScramMechanism.SCRAM_SHA_256
    assert cred == credential_from_salted_password(mech, SALT, salted_password(mech, "pw", SALT, 8192), 8192)
    result = alter_credentials(EMPTY_IMAGE, [], [upsert("alice")])
    record = result.records[0]
    assert isinstance(record, UserScramCredentialRecord)
    assert salted_password(mech, "pw", SALT, 8192) not in encode(record) and b"pw\"" not in encode(record)
    image, errors = applied(image, [ScramDeletion("alice", SHA256)], [])
    assert errors == {"alice": ErrorCode.none}
    assert ("alice", SHA256) not in image.scram_credentials and ("bob", SHA512) in image.scram_credentials


def test_kafka_errors_per_user() -> None:
    image, _ = applied(EMPTY_IMAGE, [], [upsert("alice")])
    result = alter_credentials(image, [ScramDeletion("ghost", SHA256), ScramDeletion("carol", 9)], [
        upsert("few", iterations=4095), upsert("many", iterations=16385), upsert("dup"), upsert("dup", SHA512),
        upsert("", SHA256), upsert("ok", iterations=16384),
    ])
    assert result.response is not None
    assert {r.user: r.error.code for r in result.response} == {
        "ghost": ErrorCode.resource_not_found, "carol": ErrorCode.unsupported_sasl_mechanism,
        "few": ErrorCode.unacceptable_credential, "many": ErrorCode.unacceptable_credential,
        "dup": ErrorCode.duplicate_resource, "": ErrorCode.unacceptable_credential, "ok": ErrorCode.none,
    }
    assert [type(r) for r in result.records] == [UserScramCredentialRecord]


def test_delete_and_upsert_of_one_user_is_a_duplicate_and_changes_nothing() -> None:
    image, _ = applied(EMPTY_IMAGE, [], [upsert("alice")])
    result = alter_credentials(image, [ScramDeletion("alice", SHA256)], [upsert("alice", SHA512)])
    assert result.records == [] and result.response is not None
    assert result.response[0].error.code == ErrorCode.duplicate_resource


def test_describe_all_named_missing_and_duplicated_users() -> None:
    image, _ = applied(EMPTY_IMAGE, [], [upsert("alice"), upsert("bob", SHA512, 4096)])
    image, _ = applied(image, [], [upsert("alice", SHA512, 10000)])
    everyone = describe_credentials(image, None)
    assert [(d.user, d.credentials) for d in everyone] == [
        ("alice", ((SHA256, 8192), (SHA512, 10000))), ("bob", ((SHA512, 4096),))]
    named = describe_credentials(image, ["bob", "nobody", "alice", "alice"])
    assert [(d.user, d.error.code) for d in named] == [
        ("bob", ErrorCode.none), ("nobody", ErrorCode.resource_not_found), ("alice", ErrorCode.duplicate_resource)]


def test_remove_record_round_trips() -> None:
    assert decode(encode(RemoveUserScramCredentialRecord("a", SHA256))) == RemoveUserScramCredentialRecord("a", SHA256)
