"""Round-trip of the cleaner's batch rewrite for every codec: the kept records decode to the
same offsets, timestamps, keys, values and headers; the producer fields, base offset, last
offset and codec are the original batch's; a delete horizon moves only the base timestamp."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.log.cleaner.batch_rewrite import empty_batch, rebuild_batch, records_of
from kmirror.log.cleaner.record_filter import write_kept
from kmirror.records.batch import crc_ok, read_header
from kmirror.records.builder import build_batch
from kmirror.records.record import decode_records
from kmirror.records.record_scan import (
    FIELDS,
    KEY_LEN,
    KEY_START,
    OFFSET_DELTA,
    TS_DELTA,
    VALUE_LEN,
    scan_section,
)

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
    section = np.frombuffer(records_of(raw, 0, header), dtype=np.uint8)
    n = header.records_count
    fields = np.empty((FIELDS, n), dtype=np.int64)
    assert scan_section(section, 0, len(section), n, fields, 0) == (0, n)
    original = decode_records(raw)
    keys = [None if fields[KEY_LEN, i] < 0 else section[fields[KEY_START, i]:][:fields[KEY_LEN, i]].tobytes()
            for i in range(n)]
    assert [(k, v >= 0) for k, v in zip(keys, fields[VALUE_LEN], strict=True)] == [
        (r.key, r.value is not None) for r in original]
    timestamps = [header.max_timestamp if log_append_time else header.base_timestamp + int(d) for d in fields[TS_DELTA]]
    assert [(header.base_offset + int(d), t) for d, t in zip(fields[OFFSET_DELTA], timestamps, strict=True)] == [
        (r.offset, r.timestamp) for r in original]
    mask = np.array(keep[:n], dtype=np.bool_)
    kept = int(mask.sum())
    if not kept:
        empty = empty_batch(header)
        out = read_header(empty)
        assert crc_ok(empty) and out.records_count == 0 and decode_records(empty) == []
        assert (out.base_offset, out.last_offset, out.producer_id, out.producer_epoch, out.base_sequence,
                out.partition_leader_epoch) == (header.base_offset, header.last_offset, 42, 3, 100, 7)
        return
    delete_horizon = NOW + 86_400_000 if horizon else None
    out = np.empty(len(section) + 6 * n, dtype=np.uint8)
    end, max_delta = write_kept(section, fields, 0, n, 0, mask, horizon, delete_horizon or 0, header.base_timestamp,
                                header.max_timestamp, log_append_time, out, 0)
    rebuilt = rebuild_batch(header, out[:end].tobytes(), kept, int(max_delta), delete_horizon)
    out = read_header(rebuilt)
    assert crc_ok(rebuilt)
    assert (out.base_offset, out.last_offset_delta, out.producer_id, out.producer_epoch, out.base_sequence,
            out.partition_leader_epoch, out.compression, out.timestamp_type, out.records_count) == (
        header.base_offset, header.last_offset_delta, 42, 3, 100, 7, codec, header.timestamp_type, kept)
    assert out.has_delete_horizon == horizon
    if horizon:
        assert out.base_timestamp == delete_horizon
    wanted = [r for r, k in zip(original, keep, strict=False) if k]
    assert decode_records(rebuilt) == wanted
    if not log_append_time:
        assert out.max_timestamp == max(r.timestamp for r in wanted)


@settings(max_examples=100, deadline=None)
@given(records=st.lists(record, min_size=1, max_size=6), cut=st.integers(1, 400))
def test_the_scan_refuses_a_records_section_cut_short(records: list, cut: int) -> None:
    raw = build_batch(records, now_ms=NOW)
    header = read_header(raw)
    section = np.frombuffer(records_of(raw, 0, header), dtype=np.uint8)
    short = section[:max(0, len(section) - cut)]
    fields = np.empty((FIELDS, header.records_count), dtype=np.int64)
    assert scan_section(short, 0, len(short), header.records_count, fields, 0)[0] != 0
