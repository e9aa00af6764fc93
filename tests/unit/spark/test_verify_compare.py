"""The verdict on one partition from both logs' batches (sans-IO): what differs is named in
Kafka's order of importance (offsets, leader epoch, CRC, size, bytes), lag is not divergence,
and the RPO is the latest source timestamp minus the last mirrored one."""

from __future__ import annotations

from kmirror.records.batch import read_header, set_partition_leader_epoch
from kmirror.records.builder import build_batch
from kmirror.spark.verify_compare import (
    PartitionComparison,
    PartitionPlan,
    batch_difference,
    buffers_equal,
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
