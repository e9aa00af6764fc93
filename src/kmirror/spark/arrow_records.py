"""Fetched record batches of one partition -> one `pyarrow.RecordBatch` in Spark's Kafka
source schema, vectorised.

Per chunk of about a MiB: the batches' record sections are decompressed (C codecs) and
decoded where each lies (an uncompressed batch in the fetched buffer itself), never joined;
one compiled pass (`record_scan`) reads every record's fields (each record's position
depends on the previous one's length, so this walk is sequential); keys and values are
copied once, into contiguous Arrow value buffers, by a second compiled pass; offsets,
timestamps and the other columns are numpy arithmetic over those fields, handed to Arrow
without copies. No Python object is made per record.
Records with headers have their headers parsed one by one, only when `includeHeaders`
is set (Spark's Kafka source: a record without headers has a null `headers`).

Layout checks are Kafka's (`DefaultRecord.readFrom`): a record whose fields do not end
exactly at its length, or records that do not fill the batch, raise `CorruptRecordError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

import numpy as np
import pyarrow as pa

from kmirror.records import record_scan
from kmirror.records.batch import BatchHeader, Buffer, CorruptRecordError
from kmirror.records.record import InvalidRecordError, records_section
from kmirror.records.record_walk import ERRORS

HEADER_TYPE: Final = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
TIMESTAMP_TYPE: Final = pa.timestamp("us", tz="UTC")
BASE_FIELDS: Final = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
SCHEMA: Final = pa.schema(BASE_FIELDS)
SCHEMA_WITH_HEADERS: Final = pa.schema([*BASE_FIELDS, pa.field("headers", HEADER_TYPE)])
CHUNK_BYTES: Final = 1024 * 1024


def arrow_schema(include_headers: bool) -> pa.Schema:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


def empty_batch(include_headers: bool) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def _scan(sections: Sequence[bytes | memoryview], batches: Sequence[BatchHeader],
          counts: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Every record's fields (`record_scan`'s rows), checked as Kafka checks them, section
    by section where each lies: (the sections as uint8 arrays, the fields, where each
    section's records begin among the fields)."""
    if (counts < 0).any():
        raise InvalidRecordError("negative record count")
    firsts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=firsts[1:])
    fields = np.empty((record_scan.FIELDS, int(firsts[-1])), dtype=np.int64)
    bufs = []
    for i, section in enumerate(sections):
        buf = np.frombuffer(section, dtype=np.uint8)
        bufs.append(buf)
        error, n = record_scan.scan_records(buf, np.array([len(buf)], dtype=np.int64), counts[i:i + 1], fields,
                                            int(firsts[i]))
        if error != record_scan.OK:
            raise InvalidRecordError(f"{ERRORS[error]} (record {n} of the batch at offset "
                                     f"{batches[i].base_offset})")
    return bufs, fields, firsts


def _binary_array(bufs: Sequence[np.ndarray], firsts: np.ndarray, lo: int, hi: int, starts: np.ndarray,
                  lengths: np.ndarray) -> pa.Array:
    """A binary array of the records [lo, hi) of the fields: bufs[s][start:start+length] for
    each record of section s, null where length is -1; values are copied once, from the
    decompressed sections into the Arrow value buffer."""
    n = hi - lo
    lengths = lengths[lo:hi]
    valid = lengths >= 0
    total = int(lengths[valid].sum())
    if total > 2**31 - 1:
        raise CorruptRecordError("more than 2 GiB of keys or values in one fetch")
    values = np.empty(total, dtype=np.uint8)
    offsets = np.empty(n + 1, dtype=np.int32)
    o = 0
    for s, buf in enumerate(bufs):
        a, b = max(int(firsts[s]), lo), min(int(firsts[s + 1]), hi)
        if a < b:
            o = record_scan.gather(buf, starts[a:b], lengths[a - lo:b - lo], values, offsets, a - lo, o)
    offsets[n] = o
    null_count = n - int(np.count_nonzero(valid))
    validity = None if null_count == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(values)],
                                 null_count=null_count)


def record_batches(
    topic: str,
    partition: int,
    records: Buffer,
    batches: Sequence[tuple[int, BatchHeader]],
    *,
    start_offset: int,
    end_offset: int,
    include_headers: bool,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[pa.RecordBatch]:
    """The records of `batches` (positions in `records`) with offsets in
    [start_offset, end_offset), as RecordBatches of about `chunk_bytes` decompressed bytes
    each (chunks that stay in the CPU caches decode about twice as fast as 64 MiB ones)."""
    sections: list[bytes | memoryview] = []
    headers: list[BatchHeader] = []
    size = 0
    for pos, header in batches:
        if header.next_offset <= start_offset or header.base_offset >= end_offset:
            continue
        section = records_section(records, pos, header)
        sections.append(section)
        headers.append(header)
        size += len(section)
        if size >= chunk_bytes:
            rb = _to_record_batch(topic, partition, sections, headers, start_offset, end_offset, include_headers)
            if rb is not None:
                yield rb
            sections, headers, size = [], [], 0
    rb = _to_record_batch(topic, partition, sections, headers, start_offset, end_offset, include_headers)
    if rb is not None:
        yield rb


def _to_record_batch(
    topic: str,
    partition: int,
    sections: Sequence[bytes | memoryview],
    batches: Sequence[BatchHeader],
    start_offset: int,
    end_offset: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    if not batches:
        return None
    counts = np.fromiter((h.records_count for h in batches), dtype=np.int64, count=len(batches))
    bufs, fields, firsts = _scan(sections, batches, counts)
    n = fields.shape[1]
    if n == 0:
        return None
    base_offsets = np.repeat(np.fromiter((h.base_offset for h in batches), dtype=np.int64), counts)
    log_append = np.repeat(np.fromiter((h.timestamp_type for h in batches), dtype=np.int32), counts)
    base_ts = np.repeat(np.fromiter(
        (h.max_timestamp if h.timestamp_type == 1 else h.base_timestamp for h in batches), dtype=np.int64), counts)
    offsets = base_offsets + fields[record_scan.OFFSET_DELTA]
    lo = int(np.searchsorted(offsets, start_offset, side="left"))
    hi = int(np.searchsorted(offsets, end_offset, side="left"))
    if lo >= hi:
        return None
    sl = slice(lo, hi)
    n = hi - lo
    log_append = log_append[sl]
    timestamps_us = np.where(log_append == 1, base_ts[sl], base_ts[sl] + fields[record_scan.TS_DELTA, sl]) * 1000
    columns: list[Any] = [
        _binary_array(bufs, firsts, lo, hi, fields[record_scan.KEY_START], fields[record_scan.KEY_LEN]),
        _binary_array(bufs, firsts, lo, hi, fields[record_scan.VALUE_START], fields[record_scan.VALUE_LEN]),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets[sl]),
        # Spark's timestamp (microseconds, UTC) over the numpy buffer, no cast kernel
        pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(timestamps_us)]),
        pa.array(log_append),
    ]
    if include_headers:
        columns.append(_header_column(bufs, fields, firsts, lo, hi))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _header_column(bufs: Sequence[np.ndarray], fields: np.ndarray, firsts: np.ndarray, lo: int,
                   hi: int) -> pa.Array:
    """The `headers` column of the records [lo, hi): null for a record without headers, as
    Spark's Kafka source. Keys and values are copied once into Arrow buffers (compiled),
    section by section; a key that is not UTF-8 reads with U+FFFD in place of its bad bytes,
    as the Kafka client decodes it."""
    counts = fields[record_scan.HEADER_COUNT, lo:hi]
    n = hi - lo
    list_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=list_offsets[1:])
    total = int(list_offsets[-1])
    if total > 2**31 - 1:
        raise CorruptRecordError("more than 2**31 headers in one fetch")
    key_start, key_len, value_start, value_len = (np.empty(total, dtype=np.int64) for _ in range(4))
    # where each section's headers begin among the headers of [lo, hi)
    header_firsts = list_offsets[np.clip(firsts - lo, 0, n)]
    for s, buf in enumerate(bufs):
        a, b = max(int(firsts[s]), lo), min(int(firsts[s + 1]), hi)
        if a < b:
            record_scan.scan_headers(buf, fields[record_scan.HEADER_START, a:b], counts[a - lo:b - lo], key_start,
                                     key_len, value_start, value_len, int(header_firsts[s]))
    keys = _binary_array(bufs, header_firsts, 0, total, key_start, key_len)
    values = _binary_array(bufs, header_firsts, 0, total, value_start, value_len)
    key_strings = keys.view(pa.string())
    try:
        key_strings.validate(full=True)
    except pa.ArrowInvalid:
        key_strings = pa.array([k.decode("utf-8", "replace") for k in keys.to_pylist()], type=pa.string())
    entries = pa.StructArray.from_arrays([key_strings, values], fields=list(HEADER_TYPE.value_type))
    return pa.ListArray.from_arrays(pa.array(list_offsets.astype(np.int32)), entries, type=HEADER_TYPE,
                                    mask=pa.array(counts == 0))
