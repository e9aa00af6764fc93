"""Partition over the real Log on the in-memory file system."""

from uuid import uuid4

from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.replication.outcomes import (
    READ_UNCOMMITTED,
    AppendOutcome,
    EpochEndOffset,
    PartitionError,
    ReadOutcome,
)
from kmirror.replication.partition import Partition, PartitionState
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)


def partition(epoch: int = 1, config: LogConfig | None = None) -> Partition:
    clock = ManualClock()
    fs = MemoryFileSystem()
    log = Log.open(fs, "/logs/t-0", TP, config or LogConfig(), clock, uuid4())
    state = PartitionState(leader=1, leader_epoch=epoch, partition_epoch=0, replicas=(1,), isr=(1,))
    return Partition(TP, uuid4(), log, 1, state)


def batch(*timestamps: int) -> bytes:
    return build_batch([(b"k", b"v%d" % ts, (), ts) for ts in timestamps])


def test_append_read_and_offsets_on_the_real_log() -> None:
    p = partition(epoch=3)
    first = p.append_records_to_leader(batch(10, 20), -1, 1_000)
    second = p.append_records_to_leader(batch(30), 1, 1_000)
    assert isinstance(first, AppendOutcome) and (first.base_offset, first.last_offset) == (0, 1)
    assert isinstance(second, AppendOutcome) and second.base_offset == 2
    assert p.high_watermark == 3
    read = p.read(0, 1 << 20, READ_UNCOMMITTED, 3, True)
    assert isinstance(read, ReadOutcome)
    headers = [h for _, h in iter_batches(bytes(read.records))]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 3), (2, 3)]
    found = p.fetch_offset_for_timestamp(15, READ_UNCOMMITTED, -1)
    assert found is not None and not isinstance(found, PartitionError) and (found.timestamp, found.offset) == (20, 1)
    assert p.last_offset_for_leader_epoch(-1, 3) == EpochEndOffset(3, 3)
    assert p.delete_records_on_leader(2) == 2
    out_of_range = p.read(0, 100, READ_UNCOMMITTED, -1, True)
    assert isinstance(out_of_range, PartitionError) and out_of_range.code == ErrorCode.offset_out_of_range


def test_log_validation_errors_become_partition_errors() -> None:
    p = partition()
    corrupt = bytearray(batch(10))
    corrupt[-1] ^= 0xFF
    result = p.append_records_to_leader(bytes(corrupt), 1, 1_000)
    assert isinstance(result, PartitionError) and result.code == ErrorCode.corrupt_message
    too_large = partition(config=LogConfig(max_message_bytes=10)).append_records_to_leader(batch(10), 1, 1_000)
    assert isinstance(too_large, PartitionError) and too_large.code in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
    )
    assert p.high_watermark == 0


def test_idempotent_duplicate_is_answered_with_the_original_offsets() -> None:
    p = partition()
    idempotent = build_batch([(b"k", b"v", (), 10)], producer_id=7, producer_epoch=0, base_sequence=0)
    first = p.append_records_to_leader(idempotent, -1, 1_000)
    again = p.append_records_to_leader(idempotent, -1, 1_000)
    assert isinstance(first, AppendOutcome) and isinstance(again, AppendOutcome)
    assert again.base_offset == first.base_offset and again.duplicate
    assert p.log.log_end_offset == 1
    gap = build_batch([(b"k", b"v", (), 10)], producer_id=7, producer_epoch=0, base_sequence=5)
    result = p.append_records_to_leader(gap, -1, 1_000)
    assert isinstance(result, PartitionError) and result.code == ErrorCode.out_of_order_sequence_number


def test_a_leader_epoch_below_the_log_epochs_is_not_assigned() -> None:
    # A mirror topic just removed (KIP-1279 failover): its records carry the source's epoch
    # 6, the local leader epoch is still 4 until BumpLeaderEpochs. A leader change to epoch 5
    # must not cut epoch 6 from the cache; the bumped epoch 7 is assigned.
    p = partition(epoch=4)
    p.log.append_as_follower(build_batch([(b"k", b"v", (), 1)], partition_leader_epoch=6))
    assert [(e.epoch, e.start_offset) for e in p.log.epoch_cache.entries] == [(6, 0)]
    p.update_state(PartitionState(leader=1, leader_epoch=5, partition_epoch=1, replicas=(1,), isr=(1,)), 0)
    assert [(e.epoch, e.start_offset) for e in p.log.epoch_cache.entries] == [(6, 0)]
    p.update_state(PartitionState(leader=1, leader_epoch=7, partition_epoch=2, replicas=(1,), isr=(1,)), 0)
    assert [(e.epoch, e.start_offset) for e in p.log.epoch_cache.entries] == [(6, 0), (7, 1)]
