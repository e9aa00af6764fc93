"""validate_for_append: Kafka's produce-path checks as values, one rule per test."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from kmirror.records.batch import read_header, set_base_offset, write_crc
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.records.record import encode_record
from kmirror.records.validation import InvalidRecords, ValidatedRecords, validate_for_append

NOW = 1_700_000_000_000
LIMIT = 1_048_588


def batch(n: int = 3, *, compression: int = 0, ts: int = NOW, keys: bool = True, **kwargs: object) -> bytes:
    records = [SimpleRecord(b"k%d" % i if keys else None, b"v" * 100, (), ts + i) for i in range(n)]
    return build_batch(records, compression=compression, **kwargs)  # type: ignore[arg-type]


def validate(records: bytes, **kwargs: object) -> ValidatedRecords | InvalidRecords:
    options: dict[str, object] = {"max_message_bytes": LIMIT, "now_ms": NOW}
    options.update(kwargs)
    return validate_for_append(records, **options)  # type: ignore[arg-type]


def error_of(outcome: ValidatedRecords | InvalidRecords) -> ErrorCode | None:
    return outcome.error if isinstance(outcome, InvalidRecords) else None


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_valid_batch(compression: int) -> None:
    buf = batch(5, compression=compression, producer_id=3, producer_epoch=0, base_sequence=0)
    outcome = validate(buf)
    assert isinstance(outcome, ValidatedRecords)
    assert outcome.valid_bytes == len(buf) and outcome.records_count == 5
    (only,) = outcome.batches
    assert (only.position, only.max_timestamp, only.offset_delta_of_max_timestamp) == (0, NOW + 4, 4)
    assert only.header == read_header(buf)


def test_validation_does_not_modify_input() -> None:
    buf = bytearray(batch(3, compression=4))
    before = bytes(buf)
    validate(bytes(buf), message_timestamp_type="LogAppendTime")
    assert bytes(buf) == before


@pytest.mark.parametrize("records", [b"", b"\x00" * 10, batch(3)[:-1], batch(3)[:40]])
def test_no_whole_batch_is_invalid_record(records: bytes) -> None:
    assert error_of(validate(records)) == ErrorCode.invalid_record


def test_legacy_magic_is_invalid_record_and_unknown_magic_corrupt() -> None:
    legacy = bytearray(batch(1))
    legacy[16] = 1
    assert error_of(validate(bytes(legacy))) == ErrorCode.invalid_record
    future = bytearray(batch(1))
    future[16] = 3
    assert error_of(validate(bytes(future))) == ErrorCode.corrupt_message


def test_exactly_one_batch_and_partial_tail_trimmed() -> None:
    a, b = batch(2), batch(3)
    assert error_of(validate(a + b)) == ErrorCode.invalid_record
    outcome = validate(a + b[:-3])
    assert isinstance(outcome, ValidatedRecords) and outcome.valid_bytes == len(a)


def test_bad_crc_is_corrupt_message() -> None:
    buf = bytearray(batch(3))
    buf[-1] ^= 1
    assert error_of(validate(bytes(buf))) == ErrorCode.corrupt_message


def test_size_limits() -> None:
    buf = batch(3)
    assert error_of(validate(buf, max_message_bytes=len(buf) - 1)) == ErrorCode.message_too_large
    assert isinstance(validate(buf, max_message_bytes=len(buf)), ValidatedRecords)
    assert error_of(validate(buf, segment_bytes=len(buf) - 1)) == ErrorCode.record_list_too_large


def test_control_batches_from_clients_are_invalid() -> None:
    marker = build_control_batch(ControlType.COMMIT, 5, 0, NOW)
    assert error_of(validate(marker)) == ErrorCode.invalid_record


def test_producer_id_without_sequence_is_invalid() -> None:
    assert error_of(validate(batch(2, producer_id=5, producer_epoch=0))) == ErrorCode.invalid_record


def test_count_must_match_offset_range() -> None:
    buf = bytearray(batch(3))
    struct.pack_into(">i", buf, 57, 4)  # recordsCount 4 with lastOffsetDelta 2
    write_crc(buf)
    assert error_of(validate(bytes(buf))) == ErrorCode.invalid_record


@pytest.mark.parametrize("compression", [1, 4])
def test_compressed_inner_offsets_must_be_consecutive(compression: int) -> None:
    from kmirror.records.compression import compress

    body = encode_record(0, 0, b"k", b"v") + encode_record(2, 0, b"k", b"v")
    raw = bytearray(build_batch([(b"k", b"v", (), NOW), (b"k", b"v", (), NOW)], compression=compression))
    compressed = compress(compression, body)
    buf = raw[:61] + compressed
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    write_crc(buf)
    assert error_of(validate(bytes(buf))) == ErrorCode.invalid_record


def test_compressed_record_count_must_match() -> None:
    from kmirror.records.compression import compress

    body = encode_record(0, 0, b"k", b"v")  # one record, header says two
    raw = bytearray(build_batch([(b"k", b"v", (), NOW), (b"k", b"v", (), NOW)], compression=1))
    buf = raw[:61] + compress(1, body)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    write_crc(buf)
    assert error_of(validate(bytes(buf))) == ErrorCode.invalid_record


def test_corrupt_compressed_payload_is_corrupt_message() -> None:
    raw = bytearray(batch(3, compression=4))
    buf = raw[:61] + b"not zstd at all"
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    write_crc(buf)
    assert error_of(validate(bytes(buf))) == ErrorCode.corrupt_message


def test_unknown_codec_is_corrupt() -> None:
    buf = bytearray(batch(1))
    struct.pack_into(">h", buf, 21, 5)
    write_crc(buf)
    assert error_of(validate(bytes(buf))) == ErrorCode.corrupt_message


def test_zstd_needs_produce_v7() -> None:
    buf = batch(2, compression=4)
    assert error_of(validate(buf, produce_version=6)) == ErrorCode.unsupported_compression_type
    assert isinstance(validate(buf, produce_version=7), ValidatedRecords)


@pytest.mark.parametrize("compression", [0, 4])
def test_timestamps_out_of_range(compression: int) -> None:
    old = batch(3, compression=compression, ts=NOW - 10_000)
    outcome = validate(old, timestamp_before_max_ms=5_000)
    assert isinstance(outcome, InvalidRecords) and outcome.error == ErrorCode.invalid_timestamp
    assert [e.batch_index for e in outcome.record_errors] == [0, 1, 2]
    future = batch(3, compression=compression, ts=NOW + 10_000)
    assert error_of(validate(future, timestamp_after_max_ms=5_000)) == ErrorCode.invalid_timestamp
    assert isinstance(validate(future, timestamp_after_max_ms=20_000), ValidatedRecords)
    # LogAppendTime topics do not check producer timestamps.
    assert isinstance(validate(old, timestamp_before_max_ms=5_000, message_timestamp_type="LogAppendTime"),
                      ValidatedRecords)


def test_only_the_offending_record_is_reported() -> None:
    records = [(b"k", b"v", (), NOW), (b"k", b"v", (), NOW - 60_000), (b"k", b"v", (), NOW)]
    outcome = validate(build_batch(records), timestamp_before_max_ms=1_000)
    assert isinstance(outcome, InvalidRecords)
    assert [e.batch_index for e in outcome.record_errors] == [1]


def test_producer_may_not_claim_log_append_time_on_log_append_time_topic() -> None:
    buf = build_batch([(b"k", b"v", (), NOW)], timestamp_type=1, now_ms=NOW)
    assert error_of(validate(buf, message_timestamp_type="LogAppendTime")) == ErrorCode.invalid_timestamp
    assert isinstance(validate(buf), ValidatedRecords)


@pytest.mark.parametrize("compression", [0, 3])
def test_compacted_topics_need_keys(compression: int) -> None:
    keyless = batch(2, compression=compression, keys=False)
    outcome = validate(keyless, compacted=True)
    assert isinstance(outcome, InvalidRecords) and outcome.error == ErrorCode.invalid_record
    assert len(outcome.record_errors) == 2
    assert isinstance(validate(keyless), ValidatedRecords)
    assert isinstance(validate(batch(2, compression=compression), compacted=True), ValidatedRecords)


def test_malformed_uncompressed_records_are_found_when_walked() -> None:
    buf = bytearray(batch(2))
    buf[61] = 0x7E  # first record's length varint now claims 63 bytes
    write_crc(buf)
    assert error_of(validate(bytes(buf), compacted=True)) == ErrorCode.invalid_record


def test_base_offset_sent_by_the_producer_is_irrelevant() -> None:
    buf = bytearray(batch(2))
    set_base_offset(buf, 0, 12345)
    assert isinstance(validate(bytes(buf)), ValidatedRecords)


def test_after_bound_alone_is_decided_by_the_batch_max_timestamp() -> None:
    # Kafka 4 defaults bound only the future (message.timestamp.after.max.ms = 1 hour): an
    # uncompressed batch is judged by its header's max timestamp without walking records.
    records = [(b"k", b"v", (), NOW), (b"k", b"v", (), NOW + 10_000), (b"k", b"v", (), NOW)]
    outcome = validate(build_batch(records), timestamp_after_max_ms=5_000)
    assert isinstance(outcome, InvalidRecords) and outcome.error == ErrorCode.invalid_timestamp
    ok = validate(build_batch(records), timestamp_after_max_ms=20_000)
    assert isinstance(ok, ValidatedRecords) and ok.batches[0].max_timestamp == NOW + 10_000


@pytest.mark.parametrize("compression", [1, 3, 4])  # snappy's ratio stays under ~22: no bomb
def test_decompression_bomb_is_record_list_too_large(compression: int) -> None:
    """One record of 16 MiB of zeros compresses to at most 70 KB; the decompressed size is
    bounded by DECOMPRESSION_RATIO_BOUND times max.message.bytes (6.4 MB here)."""
    bomb = build_batch([(None, b"\x00" * (16 << 20), (), NOW)], compression=compression)
    assert len(bomb) < 100_000
    outcome = validate(bomb, max_message_bytes=100_000)
    assert error_of(outcome) == ErrorCode.record_list_too_large
    assert "64 times max.message.bytes" in outcome.message


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_a_batch_decompressing_past_max_message_bytes_is_accepted_as_kafka_accepts_it(compression: int) -> None:
    """Kafka checks max.message.bytes against the batch as sent (compressed): 4 MiB of JSON-like
    records in a batch well under 1 MiB is a valid produce."""
    records = [(b"k%d" % i, b'{"user": %d, "event": "page_view", "path": "/home", "pad": "%s"}' % (i, b"x" * 300),
                (), NOW) for i in range(11_000)]
    batch = build_batch(records, compression=compression)
    assert len(batch) < 1_048_588 < sum(len(v) for _, v, _, _ in records)
    assert isinstance(validate(batch, max_message_bytes=1_048_588), ValidatedRecords)


def test_the_first_of_the_largest_timestamps_is_the_batch_max() -> None:
    records = [SimpleRecord(b"k", b"v", (), ts) for ts in (NOW, NOW + 7, NOW + 7, NOW + 2)]
    outcome = validate(build_batch(records, compression=3))
    assert isinstance(outcome, ValidatedRecords)
    assert (outcome.batches[0].max_timestamp, outcome.batches[0].offset_delta_of_max_timestamp) == (NOW + 7, 1)
