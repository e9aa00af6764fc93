"""Properties of RecordBatch v2 building, parsing, recovery and validation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    crc_ok,
    iter_batches,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    valid_prefix,
)
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.record import Record, decode_records, decode_varint, encode_varint, records_section
from kmirror.records.validation import ValidatedRecords, validate_for_append

blobs = st.one_of(st.none(), st.binary(max_size=64))
header_keys = st.text(max_size=8)
records_strategy = st.lists(
    st.builds(SimpleRecord, blobs, blobs, st.lists(st.tuples(header_keys, blobs), max_size=3).map(tuple),
              st.integers(min_value=0, max_value=2**41)),
    min_size=1, max_size=12)
codecs = st.sampled_from([0, 1, 2, 3, 4])
offsets = st.integers(min_value=0, max_value=2**62)


@st.composite
def batches(draw: st.DrawFn) -> bytes:
    return build_batch(draw(records_strategy), compression=draw(codecs), base_offset=draw(offsets),
                       partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)))


@given(records_strategy, codecs, offsets)
def test_build_decode_round_trip(records: list[SimpleRecord], codec: int, base_offset: int) -> None:
    buf = build_batch(records, compression=codec, base_offset=base_offset)
    assert crc_ok(buf)
    header = read_header(buf)
    assert header.size == len(buf) and header.records_count == len(records)
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert decode_records(buf) == [Record(base_offset + i, r.timestamp, r.key, r.value, r.headers)
                                   for i, r in enumerate(records)]


@given(st.lists(batches(), min_size=1, max_size=4), st.data())
@settings(max_examples=60)
def test_valid_prefix_of_any_truncation_is_the_whole_batch_prefix(parts: list[bytes], data: st.DataObject) -> None:
    buf = b"".join(parts)
    cut = data.draw(st.integers(0, len(buf)))
    boundaries = [0]
    for part in parts:
        boundaries.append(boundaries[-1] + len(part))
    expected = max(b for b in boundaries if b <= cut)
    n, headers = valid_prefix(buf[:cut])
    assert n == expected
    assert len(headers) == boundaries.index(expected)
    assert [pos for pos, _ in iter_batches(buf)] == boundaries[:-1]


@given(batches(), st.data())
def test_any_bit_flip_in_the_crc_covered_part_is_detected(buf: bytes, data: st.DataObject) -> None:
    position = data.draw(st.integers(CRC_OFFSET, len(buf) - 1))
    bit = data.draw(st.integers(0, 7))
    flipped = bytearray(buf)
    flipped[position] ^= 1 << bit
    assert not crc_ok(flipped)
    assert valid_prefix(bytes(flipped))[0] == 0
    assert ATTRIBUTES_OFFSET == CRC_OFFSET + 4


@given(batches(), offsets, st.integers(-1, 2**31 - 1))
def test_offset_and_epoch_assignment_keep_the_crc(buf: bytes, base_offset: int, epoch: int) -> None:
    patched = bytearray(buf)
    set_base_offset(patched, 0, base_offset)
    set_partition_leader_epoch(patched, 0, epoch)
    assert crc_ok(patched)
    header = read_header(patched)
    assert (header.base_offset, header.partition_leader_epoch) == (base_offset, epoch)
    assert [r.offset for r in decode_records(patched)] == list(range(base_offset, header.next_offset))


@given(batches())
def test_every_built_batch_passes_validation(buf: bytes) -> None:
    # max.message.bytes bounds the batch and its decompressed records (a decompression bomb)
    limit = max(len(buf), len(records_section(buf, 0, read_header(buf, 0))))
    outcome = validate_for_append(buf, max_message_bytes=limit, now_ms=0)
    assert isinstance(outcome, ValidatedRecords)
    assert outcome.valid_bytes == len(buf)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded, 0) == (value, len(encoded))
