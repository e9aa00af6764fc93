"""Spark sink rows (Arrow columns) to Kafka records, vectorised (sans-IO).

The hot path of the sink: for an Arrow batch of rows, the target partition of every row
(Kafka's murmur2 of the key, computed for all keys at once), then the records section of
v2 record batches (Kafka's `DefaultRecord` layout) built column-wise: every varint of every
record comes from numpy, and the bytes of each record are joined by one Arrow kernel
(`binary_join_element_wise`), so no Python code runs per row. The output is byte-identical
to `kmirror.records.record.encode_record` with timestamp delta 0 (every record of a batch
takes the batch's timestamp, as a producer stamps CreateTime at send).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)
_EMPTY = pa.scalar(b"", pa.binary())


@dataclass(frozen=True, slots=True)
class EncodedRecords:
    """A records section of `count` records (offset deltas 0..count-1), uncompressed."""

    records: memoryview
    count: int


def _binary(column: pa.Array) -> pa.Array:
    """A string or binary column as `binary` (a string column is cast without copying)."""
    if pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type):
        column = column.cast(pa.large_binary()).cast(pa.binary())
    elif not pa.types.is_binary(column.type):
        column = column.cast(pa.binary())
    return column


def _offsets_and_data(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary array's value offsets (n+1, int64, from 0) and its data bytes."""
    buffers = column.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def murmur2(keys: pa.Array) -> np.ndarray:
    """Kafka's `Utils.murmur2` of every key (nulls give 0), as uint32."""
    keys = _binary(keys)
    offsets, data = _offsets_and_data(keys)
    starts = offsets[:-1]
    lengths = (offsets[1:] - starts).astype(np.int64)
    if data.size < 4:
        data = np.concatenate([data, np.zeros(4, np.uint8)])
    h = _SEED ^ lengths.astype(np.uint32)
    blocks = lengths // 4
    for i in range(int(blocks.max(initial=0))):
        rows = np.nonzero(blocks > i)[0]
        at = starts[rows] + 4 * i
        k = (data[at].astype(np.uint32) | (data[at + 1].astype(np.uint32) << 8)
             | (data[at + 2].astype(np.uint32) << 16) | (data[at + 3].astype(np.uint32) << 24))
        k *= _M
        k ^= k >> np.uint32(24)
        k *= _M
        hr = h[rows] * _M
        h[rows] = hr ^ k
    extra = lengths % 4
    tail = starts + (lengths & ~3)
    for n, shift in ((3, 16), (2, 8)):
        rows = np.nonzero(extra >= n)[0]
        h[rows] ^= data[tail[rows] + n - 1].astype(np.uint32) << np.uint32(shift)
    rows = np.nonzero(extra >= 1)[0]
    h[rows] ^= data[tail[rows]].astype(np.uint32)
    h[rows] *= _M
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    return h


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Kafka's default partition of each keyed record: (murmur2(key) & 0x7fffffff) % n."""
    return ((murmur2(keys) & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints (Kafka's `ByteUtils.writeVarint`) of int32-range values: a (n, 5) byte
    matrix and each varint's length."""
    z = ((values.astype(np.int64) << 1) ^ (values.astype(np.int64) >> 63)).astype(np.uint64)
    lengths = np.ones(len(values), dtype=np.int64)
    for limit in (1 << 7, 1 << 14, 1 << 21, 1 << 28):
        lengths += z >= limit
    out = np.empty((len(values), 5), dtype=np.uint8)
    for j in range(5):
        byte = (z >> np.uint64(7 * j)) & np.uint64(0x7F)
        more = (lengths > j + 1).astype(np.uint64) << np.uint64(7)
        out[:, j] = (byte | more).astype(np.uint8)
    return out, lengths


def _pack(parts: list[tuple[np.ndarray, np.ndarray]]) -> pa.Array:
    """Per row, the concatenation of variable-length byte fields (matrix, lengths), as a
    binary array."""
    matrix = np.concatenate([m for m, _ in parts], axis=1)
    widths = [m.shape[1] for m, _ in parts]
    mask = np.concatenate([np.arange(w)[None, :] < n[:, None] for w, (_, n) in zip(widths, parts, strict=True)],
                          axis=1)
    data = matrix[mask]
    offsets = np.zeros(len(matrix) + 1, dtype=np.int32)
    np.cumsum(mask.sum(axis=1), out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(matrix), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed(n: int, byte: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((n, 1), byte, dtype=np.uint8), np.ones(n, dtype=np.int64)


def _lengths(column: pa.Array) -> np.ndarray:
    """Byte lengths, -1 for null (Kafka's length prefix)."""
    return pc.binary_length(column).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def _encoded_headers(headers: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Each row's headers section (count varint, then key and value of each header) and its
    byte length."""
    n = len(headers)
    counts = pc.list_value_length(headers).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    elements = headers.flatten()
    hkeys = _binary(elements.field("key"))
    hvalues = _binary(elements.field("value"))
    klens, vlens = _lengths(hkeys), _lengths(hvalues)
    encoded = pc.binary_join_element_wise(
        _pack([_varints(klens)]), hkeys.fill_null(b""), _pack([_varints(vlens)]), hvalues.fill_null(b""), _EMPTY)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    per_row = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), encoded), _EMPTY)
    count_varints = _varints(counts)
    section = pc.binary_join_element_wise(_pack([count_varints]), per_row, _EMPTY)
    return section, _lengths(section)


def encode_records(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None,
                   records_per_batch: int) -> pa.Array:
    """Each row as one Kafka record (length prefix included), offset delta = row index modulo
    `records_per_batch`, so that rows [k*r, (k+1)*r) form the records section of one batch."""
    n = len(values)
    values = _binary(values)
    keys = _binary(keys) if keys is not None else pa.nulls(n, pa.binary())
    klens, vlens = _lengths(keys), _lengths(values)
    offset_deltas = np.arange(n, dtype=np.int64) % records_per_batch
    od, od_len = _varints(offset_deltas)
    kl, kl_len = _varints(klens)
    vl, vl_len = _varints(vlens)
    if headers is None:
        header_section: pa.Array | pa.Scalar = pa.scalar(b"\x00", pa.binary())
        header_lengths = np.ones(n, dtype=np.int64)
    else:
        header_section, header_lengths = _encoded_headers(headers)
    # attributes (1) + timestamp delta 0 (1) + offset delta + key length + key + value length + value + headers
    body_lengths = 2 + od_len + kl_len + np.maximum(klens, 0) + vl_len + np.maximum(vlens, 0) + header_lengths
    prefix = _pack([_varints(body_lengths), _fixed(n, 0), _fixed(n, 0), (od, od_len), (kl, kl_len)])
    return pc.binary_join_element_wise(prefix, keys.fill_null(b""), _pack([(vl, vl_len)]), values.fill_null(b""),
                                       header_section, _EMPTY)


def batches_of(encoded: pa.Array, records_per_batch: int) -> Iterator[EncodedRecords]:
    """The records sections of `encode_records`' output: consecutive slices, zero-copy."""
    offsets, data = _offsets_and_data(encoded)
    view = memoryview(data.data)
    for start in range(0, len(encoded), records_per_batch):
        end = min(start + records_per_batch, len(encoded))
        yield EncodedRecords(view[offsets[start]:offsets[end]], end - start)
