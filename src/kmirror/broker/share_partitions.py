"""The share partitions a node leads (Kafka `SharePartitionManager`): one `SharePartition` per
(share group, topic partition) this node is the leader of, the node's share sessions, and the
reads that acquire records for ShareFetch.

A share partition is created at the first ShareFetch of its group that reaches its leader. It
starts at the log start offset (`share.auto.offset.reset=earliest`) or at the high watermark
(`latest`, the default). Its state is kept in memory by the leader: a new leader (a leader
epoch change) starts the partition again from `share.auto.offset.reset`
(docs/design/share-groups.md says what that means and what persisting it will change).

Records are read up to the high watermark (`share.isolation.level=read_uncommitted`) or the
last stable offset (`read_committed`, where the records of aborted transactions are archived
and never delivered). Control batches are archived at once: they hold no record a member
could acknowledge.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kmirror.broker.services import BrokerServices
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import BatchHeader, iter_batches
from kmirror.replication.outcomes import READ_COMMITTED, PartitionError, ReadOutcome
from kmirror.share.partition import AcknowledgeType, AcquiredRecords, SharePartition
from kmirror.share.sessions import SessionKey, ShareSessionCache
from kmirror.types import TopicPartition

READ_UNCOMMITTED = 0
# (first offset, last offset, acknowledge types) of one acknowledgement batch
AcknowledgementBatch = tuple[int, int, tuple[AcknowledgeType, ...]]


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The broker's `group.share.*` settings a share partition is created with."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_share_sessions: int = 2000


@dataclass(frozen=True, slots=True)
class Acquired:
    """One partition's share fetch answer: the batches holding the acquired records, as
    stored, and the acquired ranges."""

    records: bytes
    acquired: tuple[AcquiredRecords, ...]


@dataclass
class _Hosted:
    partition: SharePartition
    leader_epoch: int


class SharePartitionManager:
    def __init__(self, replica_manager: object, settings: ShareSettings,
                 group_configs: Callable[[str], Mapping[str, str]]) -> None:
        """`group_configs(group_id)`: the group's GROUP resource configs (share.*)."""
        self._rm = replica_manager
        self.settings = settings
        self._group_configs = group_configs
        self.sessions = ShareSessionCache(settings.max_share_sessions)
        self._partitions: dict[tuple[str, TopicPartition], _Hosted] = {}

    def share_partition(self, group_id: str, tp: TopicPartition) -> SharePartition | PartitionError:
        """The group's share partition of `tp`, created when first asked for; an error when
        this node does not lead `tp`."""
        leader = self._rm.leader_partition(tp)  # type: ignore[attr-defined]
        if isinstance(leader, PartitionError):
            self._partitions.pop((group_id, tp), None)
            return leader
        if not leader.is_leader:
            self._partitions.pop((group_id, tp), None)
            return PartitionError(ErrorCode.not_leader_or_follower)
        epoch = leader.state.leader_epoch
        hosted = self._partitions.get((group_id, tp))
        if hosted is None or hosted.leader_epoch != epoch:
            log = leader.log
            earliest = self._group_configs(group_id).get("share.auto.offset.reset", "latest") == "earliest"
            start = log.log_start_offset if earliest else log.high_watermark
            hosted = self._partitions[(group_id, tp)] = _Hosted(self._new_partition(group_id, start), epoch)
        hosted.partition.advance_log_start(leader.log.log_start_offset)
        return hosted.partition

    def _new_partition(self, group_id: str, start_offset: int) -> SharePartition:
        configs = self._group_configs(group_id)
        lock_ms = int(configs.get("share.record.lock.duration.ms") or self.settings.record_lock_duration_ms)
        return SharePartition(start_offset, max_in_flight_records=self.settings.partition_max_record_locks,
                              delivery_count_limit=self.settings.delivery_count_limit, lock_duration_ms=lock_ms)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._group_configs(group_id).get("share.record.lock.duration.ms")
                   or self.settings.record_lock_duration_ms)

    def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                    batches: Sequence[AcknowledgementBatch], now_ms: int) -> ErrorCode:
        partition = self.share_partition(group_id, tp)
        if isinstance(partition, PartitionError):
            return partition.code
        partition.expire_locks(now_ms)
        return partition.acknowledge(member_id, batches)

    def release(self, group_id: str, member_id: str, partitions: Iterable[TopicPartition]) -> None:
        """The member's share session ended: what it holds in `partitions` is released."""
        for tp in partitions:
            hosted = self._partitions.get((group_id, tp))
            if hosted is not None:
                hosted.partition.release_member(member_id)

    def acquire(self, group_id: str, member_id: str, tp: TopicPartition, max_bytes: int, max_records: int,
                now_ms: int) -> Acquired | PartitionError:
        """Read `tp` from the first acquirable offset and acquire what the read holds, up to
        `max_records` (soft: whole batches)."""
        partition = self.share_partition(group_id, tp)
        if isinstance(partition, PartitionError):
            return partition
        partition.expire_locks(now_ms)
        start = partition.acquirable_from()
        if start is None or max_records <= 0:
            return Acquired(b"", ())
        read_committed = self._group_configs(group_id).get("share.isolation.level") == "read_committed"
        leader = self._rm.leader_partition(tp)  # type: ignore[attr-defined]
        read = leader.read(start, max(max_bytes, 1), READ_COMMITTED if read_committed else READ_UNCOMMITTED,
                           -1, True)
        if isinstance(read, PartitionError):
            return read
        assert isinstance(read, ReadOutcome)
        buf = bytes(read.records)
        headers = [(pos, h) for pos, h in iter_batches(buf, allow_truncated_tail=True) if h.last_offset >= start]
        aborted = _aborted_batches(headers, read.aborted_transactions) if read_committed else set()
        deliverable = [(pos, h) for pos, h in headers if not h.is_control and pos not in aborted]
        acquired = partition.acquire(member_id, [(h.base_offset, h.last_offset) for _, h in deliverable],
                                     now_ms, max_records)
        if headers:  # control batches and aborted records past the last delivered one: never delivered
            undeliverable = [h for pos, h in headers if pos not in {p for p, _ in deliverable}]
            partition.archive_undelivered([(h.base_offset, h.last_offset) for h in undeliverable])
        if not acquired:
            return Acquired(b"", ())
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        chunks = [buf[pos:pos + h.size] for pos, h in deliverable if h.last_offset >= first and h.base_offset <= last]
        return Acquired(b"".join(chunks), tuple(acquired))


def _aborted_batches(headers: Sequence[tuple[int, BatchHeader]],
                     aborted_transactions: Iterable[tuple[int, int]]) -> set[int]:
    """Positions of the transactional batches of aborted transactions (a consumer's
    read_committed rule: a producer's batches from its aborted transaction's first offset
    up to its abort marker)."""
    open_from: dict[int, list[int]] = {}
    for producer_id, first_offset in aborted_transactions:
        open_from.setdefault(producer_id, []).append(first_offset)
    aborting: set[int] = set()
    out: set[int] = set()
    for pos, h in headers:
        starts = open_from.get(h.producer_id)
        if starts and any(s <= h.base_offset for s in starts):
            aborting.add(h.producer_id)
        if h.producer_id in aborting:
            if h.is_control:
                aborting.discard(h.producer_id)
                open_from[h.producer_id] = [s for s in open_from[h.producer_id] if s > h.base_offset]
            elif h.is_transactional:
                out.add(pos)
    return out


def session_key(group_id: str, member_id: str) -> SessionKey:
    return (group_id, member_id)


_MANAGERS: weakref.WeakKeyDictionary[Any, SharePartitionManager] = weakref.WeakKeyDictionary()


def share_manager(services: BrokerServices) -> SharePartitionManager:
    """The node's share partitions and sessions (one manager per replica manager)."""
    rm = services.replica_manager
    manager = _MANAGERS.get(rm)
    if manager is None:
        config = services.config
        settings = ShareSettings(
            record_lock_duration_ms=int(config.get("group.share.record.lock.duration.ms")),
            delivery_count_limit=int(config.get("group.share.delivery.count.limit")),
            partition_max_record_locks=int(config.get("group.share.partition.max.record.locks")),
            max_share_sessions=int(config.get("group.share.max.share.sessions")))
        manager = _MANAGERS[rm] = SharePartitionManager(rm, settings, lambda g: group_configs(services, g))
    return manager


def group_configs(services: BrokerServices, group_id: str) -> dict[str, str]:
    """The group's GROUP resource configs, from the metadata image."""
    image = getattr(services.metadata, "image", None)
    if image is None:
        return {}
    return {k: str(v) for k, v in image.configs.get(ConfigResource(ConfigResourceType.GROUP, group_id), {}).items()}
