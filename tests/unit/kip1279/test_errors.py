import io

from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.response import PartitionProduceResponse
from kio.serial import entity_writer

from kmirror.kip1279.errors import (
    MirrorError,
    error_message,
    error_name,
    install_in_kio,
    is_retriable,
    kio_error_code,
    mirror_error,
)

# The KIP's error table, in its order (codes TBD there: numbered from 134).
KIP_TABLE = [
    ("MIRROR_AUTHORIZATION_FAILED", "Mirror authorization failed"),
    ("READ_ONLY_TOPIC", "The topic is read-only because it is a mirror topic on the target cluster"),
    ("INVALID_MIRROR_NAME", "The mirror name does not meet the naming rules"),
    ("UNKNOWN_MIRROR", "The topic is not assigned to any mirror"),
    ("TOPIC_ALREADY_IN_MIRROR", "The topic is already assigned to a mirror"),
    ("TOPIC_NOT_IN_MIRROR", "The topic does not belong to the specified mirror"),
    ("MIRROR_TOPIC_ALREADY_PAUSED", "The mirror topic is already paused"),
    ("MIRROR_TOPIC_NOT_PAUSED", "The mirror topic is not paused"),
    ("MIRROR_TOPIC_BEING_REMOVED", "The mirror topic is being removed"),
    ("MIRROR_NOT_EMPTY", "The mirror still has active or non-removed topics"),
]


def test_error_table_matches_the_kip() -> None:
    assert [(e.name, e.message) for e in MirrorError] == KIP_TABLE
    assert [int(e) for e in MirrorError] == list(range(134, 144))
    assert not any(e.retriable for e in MirrorError)


def test_new_codes_do_not_collide_with_kafka() -> None:
    assert not {int(e) for e in MirrorError} & {int(c) for c in ErrorCode}


def test_reused_codes_carry_the_kip_messages() -> None:
    assert error_message(35).startswith("Cluster mirroring is disabled (mirror.version=0); enable it with `kmirror features")
    assert error_message(15) == "The mirror coordinator is not active"
    assert error_message(31) == "The client is not authorized to perform the mirror operation"
    assert error_message(3) == "The topic does not exist on the target cluster"
    assert error_message(0) is None


def test_lookups_by_code() -> None:
    assert error_name(135) == "READ_ONLY_TOPIC"
    assert error_name(35) == "UNSUPPORTED_VERSION"
    assert error_name(30000) == "UNKNOWN_ERROR_CODE_30000"
    assert mirror_error(143) is MirrorError.MIRROR_NOT_EMPTY and mirror_error(3) is None
    assert is_retriable(15) and not is_retriable(137) and not is_retriable(30000)


def test_kio_error_code_lets_existing_schemas_write_new_codes() -> None:
    install_in_kio()
    install_in_kio()  # idempotent
    code = kio_error_code(MirrorError.READ_ONLY_TOPIC)
    assert isinstance(code, ErrorCode) and int(code) == 135 and ErrorCode(135) is code
    assert kio_error_code(6) is ErrorCode.not_leader_or_follower
    buf = io.BytesIO()
    entity_writer(PartitionProduceResponse)(buf, PartitionProduceResponse(
        index=0, error_code=code, base_offset=-1, log_append_time=None, log_start_offset=-1,
        record_errors=(), error_message=None))
    assert buf.getvalue()[4:6] == b"\x00\x87"
