"""The verdict on one partition from both logs' batches (sans-IO): what differs is named in
Kafka's order of importance (offsets, leader epoch, CRC, size, bytes), lag is not divergence,
and the RPO is the latest source timestamp minus the last mirrored one."""

from __future__ import annotations

from kmirror.log.cleaner.batch_rewrite import empty_batch, rebuild_batch
from kmirror.records.batch import read_header, set_partition_leader_epoch
from kmirror.records.builder import build_batch
from kmirror.records.record import encode_record
from kmirror.spark.verify_compare import (
    PartitionComparison,
    PartitionPlan,
    batch_difference,
    buffers_equal,
    cleaned_difference,
    divergence_line,
    totals,
)

TS = 1_700_000_000_000


def batch(base: int, n: int, epoch: int = 0, value: bytes = b"v", ts: int = TS) -> bytes:
    return build_batch([(b"k", value, [], ts + i) for i in range(n)], base_offset=base, partition_leader_epoch=epoch)


def plan(src_end: int, dst_end: int, src_id: str = "id", dst_id: str = "id") -> PartitionPlan:
    return PartitionPlan("t", 0, src_id, dst_id, 0, src_end, 0, dst_end)


def test_equal_batches_do_not_differ() -> None:
    raw = batch(0, 3)
    assert batch_difference(read_header(raw), raw, read_header(raw), memoryview(raw)) is None


def test_differences_are_named_offsets_then_epoch_then_crc() -> None:
    a = batch(0, 3)
    assert "last offset 2 on the source, 3 on the destination" in str(
        batch_difference(read_header(a), a, read_header(batch(0, 4)), batch(0, 4)))
    assert "base offset" in str(batch_difference(read_header(a), a, read_header(batch(1, 2)), batch(1, 2)))
    other_epoch = bytearray(a)
    set_partition_leader_epoch(other_epoch, 0, 5)  # not CRC-covered: only the epoch differs
    assert batch_difference(read_header(a), a, read_header(other_epoch), other_epoch) == \
        "leader epoch 0 on the source, 5 on the destination"
    c = batch(0, 3, value=b"w")
    assert str(batch_difference(read_header(a), a, read_header(c), c)).startswith("batch CRC ")


def test_buffers_equal_compares_every_byte() -> None:
    raw = bytes(range(256)) * 41 + b"tail!"
    assert buffers_equal(memoryview(raw)[3:], memoryview(bytes(bytearray(raw)))[3:])
    for cut in (3, 4, 10, 11, len(raw) - 5, len(raw) - 1):  # in the words and in the tail
        other = bytearray(raw)
        other[cut] ^= 1
        assert not buffers_equal(raw, bytes(other))
        assert not buffers_equal(memoryview(raw)[3:], memoryview(other)[3:])
    assert not buffers_equal(b"abc", b"abcd")


def test_corrupt_batch_on_both_sides_is_named() -> None:
    raw = bytearray(batch(0, 3))
    raw[-1] ^= 0xFF
    assert batch_difference(read_header(raw), raw, read_header(raw), raw) == \
        "the batch's CRC does not match its bytes on both clusters"


def test_lag_is_not_divergence_and_rpo_is_the_timestamp_gap() -> None:
    c = PartitionComparison(plan(src_end=6, dst_end=3))
    first = batch(0, 3)
    assert c.pair(read_header(first), first, read_header(first), first)
    late = batch(3, 3, ts=TS + 1000)
    c.behind(read_header(late))
    r = c.result()
    assert r.divergence is None and r.status == "BEHIND"
    assert (r.records_behind, r.bytes_behind, r.bytes_compared) == (3, len(late), len(first))
    assert r.time_behind_ms == (TS + 1002) - (TS + 2)


def test_first_differing_batch_is_the_divergence() -> None:
    c = PartitionComparison(plan(src_end=6, dst_end=6))
    same, a, b = batch(0, 3), batch(3, 3, value=b"a"), batch(3, 3, value=b"b")
    assert c.pair(read_header(same), same, read_header(same), same)
    assert not c.pair(read_header(a), a, read_header(b), b)
    r = c.result()
    assert r.status == "DIVERGED" and r.divergence is not None and r.divergence.offset == 3
    assert r.divergence.source_batch and r.divergence.source_batch["base_offset"] == 3
    assert divergence_line(r).startswith("t-0 diverges at offset 3: batch CRC ")


def test_destination_beyond_the_source_and_topic_ids() -> None:
    c = PartitionComparison(plan(src_end=3, dst_end=6))
    extra = batch(3, 3)
    c.destination_only(read_header(extra))
    r = c.result()
    assert r.divergence is not None and r.divergence.offset == 3 and r.records_behind == 0
    ids = PartitionComparison(plan(3, 3, "A", "B")).result()
    assert ids.divergence is not None and ids.divergence.what == "topic id A on the source, B on the destination"
    t = totals([r, ids])
    assert (t.partitions, t.topics, t.diverged) == (2, 1, 2)


def compacted_plan(src_end: int, dst_end: int) -> PartitionPlan:
    return PartitionPlan("t", 0, "id", "id", 0, src_end, 0, dst_end, compacted=True)


ORIGINAL = [(b"a", b"1", [], TS), (b"b", b"2", [], TS + 1), (b"a", b"3", [], TS + 2), (b"c", b"4", [], TS + 3)]


def cleaned(original: bytes, keep: list[int], values: dict[int, bytes] | None = None) -> bytes:
    """`original` as a cleaner rebuilds it keeping the records at offset deltas `keep` (their
    values replaced by `values`, to forge a change)."""
    header = read_header(original)
    body = b"".join(encode_record(d, ORIGINAL[d][3] - TS, ORIGINAL[d][0], (values or {}).get(d, ORIGINAL[d][1]), ())
                    for d in keep)
    return rebuild_batch(header, body, len(keep), max(ORIGINAL[d][3] - TS for d in keep), None)


def test_a_batch_the_source_cleaned_is_faithful_only_in_a_compacted_topic() -> None:
    mirrored = build_batch(ORIGINAL, base_offset=10, compression=1)
    at_source = cleaned(mirrored, [1, 2, 3])
    assert batch_difference(read_header(at_source), at_source, read_header(mirrored), mirrored) is not None
    assert cleaned_difference(read_header(at_source), at_source, read_header(mirrored), mirrored) is None
    comparison = PartitionComparison(compacted_plan(14, 14))
    assert comparison.pair(read_header(at_source), at_source, read_header(mirrored), mirrored)
    result = comparison.result()
    assert result.status == "IN-SYNC" and result.batches_cleaned_at_source == 1
    strict = PartitionComparison(plan(14, 14))
    assert not strict.pair(read_header(at_source), at_source, read_header(mirrored), mirrored)
    emptied = empty_batch(read_header(mirrored))  # a producer's last batch: kept as a header
    assert cleaned_difference(read_header(emptied), emptied, read_header(mirrored), mirrored) is None


def test_a_record_the_source_kept_must_be_the_one_the_destination_copied() -> None:
    mirrored = build_batch(ORIGINAL, base_offset=10)
    forged = cleaned(mirrored, [2, 3], {3: b"changed"})
    assert cleaned_difference(read_header(forged), forged, read_header(mirrored), mirrored) == \
        "the record at offset 13 differs from the one the destination copied"
    other_epoch = build_batch(ORIGINAL, base_offset=10, partition_leader_epoch=4)
    kept = cleaned(other_epoch, [3])
    assert "partition leader epoch 4 on the source, -1 on the destination" == \
        cleaned_difference(read_header(kept), kept, read_header(mirrored), mirrored)
    comparison = PartitionComparison(compacted_plan(14, 14))
    assert not comparison.pair(read_header(forged), forged, read_header(mirrored), mirrored)
    assert comparison.result().status == "DIVERGED"


def test_a_destination_batch_the_source_cleaned_away_is_faithful_below_the_source_end() -> None:
    gone = read_header(build_batch(ORIGINAL, base_offset=10))
    comparison = PartitionComparison(compacted_plan(20, 20))
    assert comparison.cleaned_away(gone) and comparison.result().batches_cleaned_at_source == 1
    assert not PartitionComparison(compacted_plan(12, 20)).cleaned_away(gone)  # past the source's end
    assert not PartitionComparison(plan(20, 20)).cleaned_away(gone)
