"""Property: the vectorised Arrow decoding of any batches, any codec, any offset window,
equals the reference record decoder, record by record."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.records.batch import iter_batches, read_header, write_crc
from kmirror.records.builder import build_batch
from kmirror.records.record import decode_records
from kmirror.spark.arrow_records import record_batches

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3).map(tuple)
records = st.lists(st.tuples(blobs, blobs, headers, st.integers(0, 2**41)), min_size=1, max_size=30)
batches = st.lists(st.tuples(records, st.integers(0, 4), st.integers(0, 1), st.integers(0, 5)), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(batches, st.integers(0, 200), st.integers(0, 200), st.sampled_from([1, 512, 1 << 20]))
def test_arrow_rows_equal_the_reference_decoder(spec: list, lo: int, span: int, chunk_bytes: int) -> None:
    parts, offset = [], 0
    for recs, codec, timestamp_type, gap in spec:
        parts.append(build_batch(recs, compression=codec, base_offset=offset, timestamp_type=timestamp_type,
                                 now_ms=2**41 + 7))
        offset += len(recs) + gap
    buf = b"".join(parts)
    found = list(iter_batches(buf))
    hi = lo + span
    expected = [r for pos, _ in found for r in decode_records(buf, pos) if lo <= r.offset < hi]
    out = list(record_batches("t", 1, buf, found, start_offset=lo, end_offset=hi, include_headers=True,
                              chunk_bytes=chunk_bytes))
    table = pa.Table.from_batches(out) if out else None
    rows = table.to_pylist() if table is not None else []
    micros = table.column("timestamp").cast(pa.int64()).to_pylist() if table is not None else []
    assert [(r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"] or []])
            for r in rows] == [(r.offset, r.key, r.value, list(r.headers)) for r in expected]
    assert micros == [r.timestamp * 1000 for r in expected]
    assert [r["headers"] is None for r in rows] == [not r.headers for r in expected]  # null, not [], as Spark


def test_a_header_key_that_is_not_utf8_reads_with_replacement_characters() -> None:
    """As the Kafka client decodes a header key (`Utils.utf8`), and so Spark's Kafka source."""
    good = build_batch([(b"k", b"v", (("trace", b"1"),), 0)])
    bad = good.replace(b"\ntrace", b"\ntr\xffce")  # the key's length (5, zigzag 10) kept
    fixed = bytearray(bad)
    write_crc(fixed, 0)
    assert read_header(bytes(fixed)).crc != read_header(good).crc
    (rb,) = record_batches("t", 0, bytes(fixed), list(iter_batches(bytes(fixed))), start_offset=0, end_offset=1,
                           include_headers=True)
    assert rb.to_pylist()[0]["headers"] == [{"key": "tr\ufffdce", "value": b"1"}]
