"""Round-trip of the cleaner's batch rewrite for every codec: the kept records decode to the
same offsets, timestamps, keys, values and headers; the producer fields, base offset, last
offset and codec are the original batch's; a delete horizon moves only the base timestamp."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.log.cleaner.batch_rewrite import (
    empty_batch,
    rebuild_batch,
    record_timestamp,
    records_of,
    scan_keys,
    scan_records,
)
from kmirror.records.batch import crc_ok, read_header
from kmirror.records.builder import build_batch
from kmirror.records.record import InvalidRecordError, decode_records

NOW = 1_700_000_000_000

record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
    st.integers(NOW - 10**9, NOW + 10**6),
)


@settings(max_examples=200, deadline=None)
@given(records=st.lists(record, min_size=1, max_size=12), codec=st.sampled_from([0, 1, 2, 3, 4]),
       keep=st.lists(st.booleans(), min_size=12, max_size=12), horizon=st.booleans(),
       log_append_time=st.booleans(), base_offset=st.integers(0, 2**40))
def test_rebuilt_batches_keep_what_they_keep_exactly(records: list, codec: int, keep: list[bool], horizon: bool,
                                                     log_append_time: bool, base_offset: int) -> None:
    raw = build_batch(records, compression=codec, base_offset=base_offset, producer_id=42, producer_epoch=3,
                      base_sequence=100, partition_leader_epoch=7, timestamp_type=1 if log_append_time else 0,
                      now_ms=NOW)
    header = read_header(raw)
    section = records_of(raw, 0, header)
    scanned = scan_records(section, header.records_count)
    original = decode_records(raw)
    assert [(s.key, s.has_value) for s in scanned] == [(r.key, r.value is not None) for r in original]
    assert [(header.base_offset + s.offset_delta, record_timestamp(header, s)) for s in scanned] == [
        (r.offset, r.timestamp) for r in original]
    assert scan_keys(section, header.records_count) == [(s.offset_delta, s.key) for s in scanned]
    kept = [s for s, k in zip(scanned, keep, strict=False) if k]
    if not kept:
        empty = empty_batch(header)
        out = read_header(empty)
        assert crc_ok(empty) and out.records_count == 0 and decode_records(empty) == []
        assert (out.base_offset, out.last_offset, out.producer_id, out.producer_epoch, out.base_sequence,
                out.partition_leader_epoch) == (header.base_offset, header.last_offset, 42, 3, 100, 7)
        return
    delete_horizon = NOW + 86_400_000 if horizon else None
    rebuilt = rebuild_batch(header, section, kept, delete_horizon)
    out = read_header(rebuilt)
    assert crc_ok(rebuilt)
    assert (out.base_offset, out.last_offset_delta, out.producer_id, out.producer_epoch, out.base_sequence,
            out.partition_leader_epoch, out.compression, out.timestamp_type, out.records_count) == (
        header.base_offset, header.last_offset_delta, 42, 3, 100, 7, codec, header.timestamp_type, len(kept))
    assert out.has_delete_horizon == horizon
    if horizon:
        assert out.base_timestamp == delete_horizon
    wanted = [r for r, k in zip(original, keep, strict=False) if k]
    assert decode_records(rebuilt) == wanted
    if not log_append_time:
        assert out.max_timestamp == max(r.timestamp for r in wanted)


@settings(max_examples=100, deadline=None)
@given(records=st.lists(record, min_size=1, max_size=6), cut=st.integers(1, 400))
def test_both_scans_refuse_a_records_section_cut_short(records: list, cut: int) -> None:
    raw = build_batch(records, now_ms=NOW)
    header = read_header(raw)
    section = bytes(records_of(raw, 0, header))
    short = section[:max(0, len(section) - cut)]
    for scan in (scan_records, scan_keys):
        with pytest.raises(InvalidRecordError):
            scan(short, header.records_count)
