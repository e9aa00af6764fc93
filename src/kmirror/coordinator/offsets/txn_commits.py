"""Offsets committed inside a transaction (TxnOffsetCommit, KIP-98; Kafka
`OffsetMetadataManager.replayTransactionalOffsetCommit` / `replayEndTransactionMarker`).

Before it is written, the group's `__consumer_offsets` partition is verified with the
transaction coordinator (KIP-890 part 1; the runtime asks `CoordinatorLog`'s
`maybe_start_transaction_verification`): a commit of a producer whose ongoing transaction
does not hold that partition (AddOffsetsToTxn never sent, or its transaction already ended:
a late retry, a zombie) is refused, and the append carries the verification guard, so it
cannot open a transaction on `__consumer_offsets` that no marker will close.

A transactional commit is written to the group's `__consumer_offsets` partition as a
transactional batch of the producer (answered once written), and is pending: OffsetFetch does
not return it, and with `require_stable` a partition with a pending commit answers
UNSTABLE_OFFSET_COMMIT, until the transaction's marker reaches that partition. The COMMIT
marker (WriteTxnMarkers, written by the runtime in turn with the partition's other appends,
acks=all) makes the offsets committed, an ABORT drops them; loading the partition replays the same (`ReplicaManagerCoordinatorLog.read_all`), and offsets of
transactions still open at the log end come back pending (`restore_pending`).
"""

from __future__ import annotations

from dataclasses import replace

from kmirror.coordinator.consumer_group import admin as consumer_admin
from kmirror.coordinator.group.coordinator import GroupCoordinator
from kmirror.coordinator.group.group import ClassicGroup, OffsetAndMetadata
from kmirror.coordinator.group.sensors import GroupSensor
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.group.static_members import group_metadata_append_error, validate_member
from kmirror.coordinator.offsets import replay
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.coordinator.offsets.records import OffsetCommitKey, decode_key, decode_offset_commit_value
from kmirror.coordinator.results import (
    CommitResult,
    FetchedOffset,
    FetchOffsetsResult,
    Output,
    PartitionResult,
)
from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

E = ErrorCode


def validate_txn_offset_commit(group: ClassicGroup | None, generation_id: int, member_id: str,
                               group_instance_id: str | None) -> ErrorCode:
    """Kafka `ClassicGroup.validateOffsetCommit(isTransactional=true)`: member checks only
    when the producer names its consumer's member (KIP-447)."""
    if group is None:
        return E.none if generation_id < 0 and not member_id else E.illegal_generation
    if group.is_in(GroupState.DEAD):
        return E.coordinator_not_available
    if generation_id >= 0 or member_id or group_instance_id is not None:
        member_error = validate_member(group, member_id, group_instance_id)
        if member_error != E.none:
            return member_error
        if generation_id != group.generation_id:
            return E.illegal_generation
    return E.none


WRITTEN_NOT_REPLICATED = frozenset({E.not_enough_replicas_after_append, E.request_timed_out})
"""Append errors raised after the leader wrote the batch: the ISR did not take it in time."""


def txn_commit_error(error: ErrorCode) -> ErrorCode:
    """A failed verification or append as TxnOffsetCommit answers it (Kafka
    `CoordinatorOperationExceptionHelper.handleOperationException`): errors of the partition
    or its replicas become the coordinator errors the producer retries on; the transaction
    coordinator's answers (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS,
    ...) and the log's refusals reach the producer as they are."""
    if error == E.network_exception:
        # the transaction coordinator could not be reached: retried without a new lookup
        return E.coordinator_load_in_progress
    if error == E.not_enough_replicas_after_append:
        return E.coordinator_not_available
    if error in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.invalid_commit_offset_size
    return group_metadata_append_error(error)


def txn_commit_offsets(core: GroupCoordinator, request_id: int, *, group_id: str, producer_id: int,
                       producer_epoch: int, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: list[OffsetToCommit],
                       verification: VerificationGuard | ErrorCode | None = None) -> Output:
    """`verification`: what `CoordinatorLog.maybe_start_transaction_verification` answered for
    the group's partition (KIP-890 part 1): an error refuses the commit before anything else
    is checked, as Kafka verifies before it runs the write; a guard goes with the append;
    None: not verified."""

    def reply(error_of: dict[tuple[str, int], ErrorCode], default: ErrorCode) -> Output:
        parts = tuple(PartitionResult(o.topic, o.partition, error_of.get((o.topic, o.partition), default))
                      for o in offsets)
        return Output(responses=[(request_id, CommitResult(parts))])

    err = core.coordinator_error(group_id)
    if err is not None:
        return reply({}, err)
    if isinstance(verification, ErrorCode):
        return reply({}, txn_commit_error(verification))
    consumer_group = core.consumer_groups.get(group_id)
    if consumer_group is not None:
        err = consumer_admin.validate_txn_offset_commit(consumer_group, member_id, generation_id)
    else:
        err = validate_txn_offset_commit(core.groups.get(group_id), generation_id, member_id, group_instance_id)
    if err != E.none:
        return reply({}, err)
    now_wall = core.clock.now_ms()
    errors: dict[tuple[str, int], ErrorCode] = {}
    accepted: dict[TopicPartition, OffsetAndMetadata] = {}
    for o in offsets:
        metadata = o.metadata or ""
        if len(metadata.encode()) > core.config.offset_metadata_max_bytes:
            errors[(o.topic, o.partition)] = E.offset_metadata_too_large
        else:
            accepted[TopicPartition(o.topic, o.partition)] = OffsetAndMetadata(o.offset, o.leader_epoch, metadata,
                                                                               now_wall)
    if not accepted:
        return reply(errors, E.none)

    def written() -> Output:
        core.state.pending_txn_offsets.setdefault(group_id, {}).setdefault(producer_id, {}).update(accepted)
        return reply(errors, E.none)

    def failed(error: ErrorCode) -> Output:
        if error in WRITTEN_NOT_REPLICATED:
            # the batch is in the leader's log, so the transaction's marker must find it pending
            # (Kafka applies a coordinator's records once appended, whatever the replicas do)
            written()
        return reply(errors, txn_commit_error(error))

    records = [replay.offset_commit_record(group_id, tp, v) for tp, v in accepted.items()]
    core.sensors.record(GroupSensor.OFFSET_COMMITS, len(records))
    out = core.append(group_id, records, written, failed)
    out.appends[:] = [replace(a, producer_id=producer_id, producer_epoch=producer_epoch, verification_guard=verification)
                      for a in out.appends]
    return out


def replay_end_transaction_marker(core: GroupCoordinator, partition: int, *, producer_id: int,
                                  committed: bool) -> None:
    """Kafka `OffsetMetadataManager.replayEndTransactionMarker`: the marker of `producer_id`'s
    transaction is in `partition`'s log, after every transactional commit of the producer
    the core has applied (the runtime applies both in log order): its pending offsets of the
    groups there become committed, or are dropped."""
    for group_id in [g for g in core.state.pending_txn_offsets if core.partition_for(g) == partition]:
        by_producer = core.state.pending_txn_offsets[group_id]
        offsets = by_producer.pop(producer_id, None)
        if not by_producer:
            del core.state.pending_txn_offsets[group_id]
        if offsets and committed:
            consumer_group = core.consumer_groups.get(group_id)
            if consumer_group is not None:
                consumer_group.offsets.update(offsets)
                continue
            group = core.groups.get(group_id)
            if group is None:
                group = core.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=core.clock.now_ms())
            group.offsets.update(offsets)


def restore_pending(core: GroupCoordinator, partition: int,
                    open_transactions: dict[int, list[tuple[bytes, bytes | None]]]) -> None:
    """After loading `partition`: the offset commits of transactions still open there are
    pending again (whatever this node held for the partition before is replaced)."""
    for group_id in [g for g in core.state.pending_txn_offsets if core.partition_for(g) == partition]:
        del core.state.pending_txn_offsets[group_id]
    for producer_id, records in open_transactions.items():
        for key_bytes, value_bytes in records:
            key = decode_key(key_bytes)
            if not isinstance(key, OffsetCommitKey) or value_bytes is None:
                continue
            pending = core.state.pending_txn_offsets.setdefault(key.group, {}).setdefault(producer_id, {})
            pending[TopicPartition(key.topic, key.partition)] = decode_offset_commit_value(value_bytes)


def with_pending_marked_unstable(core: GroupCoordinator, result: FetchOffsetsResult) -> FetchOffsetsResult:
    """OffsetFetch with `require_stable`: partitions with a pending transactional commit
    answer UNSTABLE_OFFSET_COMMIT (the client retries)."""
    pending = core.state.pending_txn_offsets.get(result.group_id)
    if not pending or result.error != E.none:
        return result
    unstable = {tp for offsets in pending.values() for tp in offsets}
    return FetchOffsetsResult(result.group_id, result.error, tuple(
        FetchedOffset(o.topic, o.partition, -1, -1, "", E.unstable_offset_commit)
        if TopicPartition(o.topic, o.partition) in unstable else o for o in result.offsets))
