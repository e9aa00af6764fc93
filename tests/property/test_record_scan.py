"""The compiled record walk (`record_scan.scan_section`) against the Python decoder, over
varints of every length: one- and two-byte fields take its fast path, longer ones (keys
and values of 8 KiB and more, large timestamp deltas) its general path, and a section cut
short anywhere is an error, never a wrong record. Produce validation's Python walk
(`record_walk.walk_python`) agrees with the compiled one on any bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.records.record import InvalidRecordError, decode_entries, encode_record
from kmirror.records.record_scan import (
    FIELDS,
    HEADER_COUNT,
    KEY_LEN,
    KEY_START,
    OFFSET_DELTA,
    RECORD_END,
    TS_DELTA,
    VALUE_LEN,
    VALUE_START,
    scan_section,
)
from kmirror.records.record_walk import walk_compiled, walk_python

sizes = st.one_of(st.none(), st.integers(0, 200), st.sampled_from([63, 64, 8191, 8192, 20_000]))
deltas = st.one_of(st.integers(-70, 70), st.integers(-(2**40), 2**40))
headers = st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2)
records = st.lists(st.tuples(deltas, sizes, sizes, headers), min_size=1, max_size=8)


def _section(entries: list[tuple[int, int | None, int | None, list[tuple[str, bytes | None]]]],
             misplaced: int = -1) -> bytes:
    """The records, record `misplaced` with the offset delta of the next one."""
    out = bytearray()
    for i, (ts_delta, key_size, value_size, hs) in enumerate(entries):
        key = None if key_size is None else bytes([i % 251]) * key_size
        value = None if value_size is None else bytes([(i + 7) % 251]) * value_size
        out += encode_record(i + (i == misplaced), ts_delta, key, value, tuple(hs))
    return bytes(out)


@settings(max_examples=150, deadline=None)
@given(records)
def test_the_compiled_walk_reads_every_field_as_the_decoder_does(entries):
    data = _section(entries)
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((FIELDS, len(entries)), dtype=np.int64)
    error, n = scan_section(buf, 0, len(data), len(entries), out, 0)
    assert (error, n) == (0, len(entries))
    for i, entry in enumerate(decode_entries(data, len(entries))):
        assert out[OFFSET_DELTA, i] == entry.offset_delta == i
        assert out[TS_DELTA, i] == entry.timestamp_delta
        for start, length, expected in ((KEY_START, KEY_LEN, entry.key), (VALUE_START, VALUE_LEN, entry.value)):
            if expected is None:
                assert out[length, i] == -1
            else:
                assert data[out[start, i]:out[start, i] + out[length, i]] == expected
        assert out[HEADER_COUNT, i] == len(entry.headers)
    assert out[RECORD_END, len(entries) - 1] == len(data)


@settings(max_examples=150, deadline=None)
@given(records, st.data())
def test_a_section_cut_short_is_an_error(entries, data):
    section = _section(entries)
    cut = data.draw(st.integers(0, len(section) - 1))
    buf = np.frombuffer(section[:cut], dtype=np.uint8)
    out = np.empty((FIELDS, len(entries)), dtype=np.int64)
    error, n = scan_section(buf, 0, cut, len(entries), out, 0)
    assert error != 0
    assert n < len(entries)


def _outcome(walk, data: bytes, count: int):
    try:
        return tuple(a.tolist() for a in walk(data, 0, len(data), count))
    except InvalidRecordError as error:
        return str(error)


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_the_python_walk_and_the_compiled_walk_agree_on_any_bytes(entries, data):
    """Produce validation walks in Python until the node has loaded the compiled walk: both
    accept the same sections with the same fields, and refuse the others with the same error."""
    section = bytearray(_section(entries, data.draw(st.integers(-1, len(entries) - 1))))
    for _ in range(data.draw(st.integers(0, 3))):
        section[data.draw(st.integers(0, len(section) - 1))] = data.draw(st.integers(0, 255))
    count = len(entries) + data.draw(st.sampled_from([0, 0, 0, -1, 1, 2**31]))
    section = bytes(section)
    assert _outcome(walk_python, section, count) == _outcome(walk_compiled, section, count)


def test_a_negative_header_key_size_is_refused():
    good = encode_record(0, 0, b"k", b"v", (("h", b"x"),))
    bad = good.replace(b"\x02h", b"\x01h")  # the header key's length 1 -> -1
    assert _outcome(walk_python, bad, 1) == _outcome(walk_compiled, bad, 1) == "invalid negative header key size"


@pytest.mark.parametrize("misplaced, broken", [(-1, -1), (70_000, -1), (-1, 69_000), (69_500, 69_000), (68_000, 69_000)])
def test_the_walks_agree_across_the_compiled_walks_chunks(misplaced, broken):
    """The compiled walk goes 65,536 records at a time: the first error in record order is
    the one reported, wherever the chunks end, and a section's records fill it across them."""
    records = [encode_record(i + (i == misplaced), 0, b"k" if i % 3 else None, b"") for i in range(80_000)]
    if broken >= 0:
        records[broken] = records[broken][:-1] + b"\x7f"  # a negative header count
    section = b"".join(records)
    outcome = _outcome(walk_compiled, section, len(records))
    assert outcome == _outcome(walk_python, section, len(records))
    if misplaced < 0 and broken < 0:
        assert outcome[1] == [i % 3 == 0 for i in range(80_000)]
    assert _outcome(walk_compiled, section, len(records) - 1) == _outcome(walk_python, section, len(records) - 1)
