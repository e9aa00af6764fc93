"""The share partitions a node leads (Kafka `SharePartitionManager`): one `SharePartition` per
(share group, topic partition) this node is the leader of, the node's share sessions, and the
reads that acquire records for ShareFetch.

A share partition is loaded at the first request of its group that reaches its leader, from
the state stored at the group's coordinator (`SharePersister`), and otherwise created at the
log start offset (`share.auto.offset.reset=earliest`) or at the high watermark (`latest`, the
default) and stored at once. Its state is stored again after each acknowledgement (answered
once stored) and each release; a new leader (a leader epoch change) loads it again, with the
records that were acquired available again. A write from a leader that lost the partition is
fenced at the coordinator, and that leader unloads it.

Records are read up to the high watermark (`share.isolation.level=read_uncommitted`) or the
last stable offset (`read_committed`, where the records of aborted transactions are archived
and never delivered). Control batches are archived at once: they hold no record a member
could acknowledge.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kmirror.broker.services import BrokerServices, SharePersister
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import BatchHeader, iter_batches
from kmirror.replication.outcomes import READ_COMMITTED, PartitionError, ReadOutcome
from kmirror.share.partition import AcknowledgeType, AcquiredRecords, RecordState, SharePartition, StateBatch
from kmirror.share.sessions import SessionKey, ShareSessionCache
from kmirror.types import TopicPartition

log = logging.getLogger("kmirror.share")
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
    key: ShareStateKey
    state_epoch: int


class SharePartitionManager:
    def __init__(self, replica_manager: Any, settings: ShareSettings,
                 group_configs: Callable[[str], Mapping[str, str]], persister: SharePersister | None = None) -> None:
        """`group_configs(group_id)`: the group's GROUP resource configs (share.*); without a
        `persister` the states live in this node's memory only."""
        self._rm = replica_manager
        self.settings = settings
        self._group_configs = group_configs
        self._persister = persister
        self.sessions = ShareSessionCache(settings.max_share_sessions)
        self._partitions: dict[tuple[str, TopicPartition], _Hosted] = {}

    def _leader(self, group_id: str, tp: TopicPartition) -> Any:
        """`tp`'s partition when this node leads it, else the error (and its share partitions go)."""
        leader = self._rm.leader_partition(tp)
        if not isinstance(leader, PartitionError) and not leader.is_leader:
            leader = PartitionError(ErrorCode.not_leader_or_follower)
        if isinstance(leader, PartitionError):
            self._partitions.pop((group_id, tp), None)
        return leader

    def hosted(self, group_id: str, tp: TopicPartition) -> SharePartition | PartitionError | None:
        """The group's share partition of `tp` if loaded at the current leader epoch; None
        when it must be loaded first (`load`)."""
        leader = self._leader(group_id, tp)
        if isinstance(leader, PartitionError):
            return leader
        hosted = self._partitions.get((group_id, tp))
        if hosted is None or hosted.leader_epoch != leader.state.leader_epoch:
            return None
        hosted.partition.advance_log_start(leader.log.log_start_offset)
        return hosted.partition

    async def load(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Load the share partitions of `partitions` this node leads and has not loaded: from
        their stored state (Kafka's `SharePartition.maybeInitialize`), else a new one at
        `share.auto.offset.reset`, stored at once. One whose state cannot be read now (its
        coordinator is moving) stays unloaded until a later request."""
        for tp in partitions:
            if self.hosted(group_id, tp) is None:
                await self._load(group_id, tp)

    async def _load(self, group_id: str, tp: TopicPartition) -> None:
        leader = self._leader(group_id, tp)
        topic_id = self._rm.topic_id(tp.topic)
        if isinstance(leader, PartitionError) or topic_id is None:
            return
        epoch = leader.state.leader_epoch
        key = ShareStateKey(group_id, topic_id, tp.partition)
        snapshot: ShareSnapshot | None = None
        if self._persister is not None:
            found = await self._persister.read(key, epoch)
            if isinstance(found, ErrorCode):
                log.debug("The state of share partition %s of group %s cannot be read now: %s", tp, group_id,
                         found.name)
                return
            snapshot = found
            if self.hosted(group_id, tp) is not None:  # another request loaded it meanwhile
                return
        configs = self._group_configs(group_id)
        limits = {"max_in_flight_records": self.settings.partition_max_record_locks,
                  "delivery_count_limit": self.settings.delivery_count_limit,
                  "lock_duration_ms": self.lock_duration_ms(group_id)}
        if snapshot is not None:
            partition = SharePartition.from_state(
                snapshot.start_offset, [StateBatch(f, last, RecordState(s), c) for f, last, s, c in snapshot.state_batches],
                **limits)
        else:
            log_ = leader.log
            earliest = configs.get("share.auto.offset.reset", "latest") == "earliest"
            partition = SharePartition(log_.log_start_offset if earliest else log_.high_watermark, **limits)
        self._partitions[(group_id, tp)] = _Hosted(partition, epoch, key, snapshot.state_epoch if snapshot else 0)
        if snapshot is None:
            await self.persist(group_id, [tp])

    async def refresh(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """A member opens a share session: a loaded share partition whose stored state has a
        newer state epoch (its group's offsets were altered while it had no member) is loaded
        again at its next use."""
        if self._persister is None:
            return
        for tp in partitions:
            hosted = self._partitions.get((group_id, tp))
            if hosted is None:
                continue
            found = await self._persister.read(hosted.key, hosted.leader_epoch)
            if isinstance(found, ShareSnapshot) and found.state_epoch > hosted.state_epoch:
                self._partitions.pop((group_id, tp), None)

    async def persist(self, group_id: str, partitions: Iterable[TopicPartition]) -> ErrorCode:
        """Store the share partitions' states (whole snapshots) at their coordinator; the first
        error. A fenced one (another leader, or its group's offsets reset) is unloaded."""
        first_error = ErrorCode.none
        for tp in partitions:
            hosted = self._partitions.get((group_id, tp))
            if hosted is None or self._persister is None:
                continue
            p = hosted.partition
            snapshot = ShareSnapshot(hosted.state_epoch, hosted.leader_epoch, p.start_offset, tuple(
                (b.first_offset, b.last_offset, int(b.state), b.delivery_count) for b in p.state_batches()))
            error = await self._persister.write(hosted.key, snapshot)
            if error in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch):
                self._partitions.pop((group_id, tp), None)
            if error != ErrorCode.none and first_error == ErrorCode.none:
                first_error = error
        return first_error

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._group_configs(group_id).get("share.record.lock.duration.ms")
                   or self.settings.record_lock_duration_ms)

    async def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                          batches: Sequence[AcknowledgementBatch], now_ms: int) -> ErrorCode:
        """Apply the acknowledgements, then store the state: answered with the store's error."""
        await self.load(group_id, [tp])
        partition = self.hosted(group_id, tp)
        if partition is None:
            return ErrorCode.coordinator_not_available
        if isinstance(partition, PartitionError):
            return partition.code
        partition.expire_locks(now_ms)
        error = partition.acknowledge(member_id, batches)
        return error if error != ErrorCode.none else await self.persist(group_id, [tp])

    async def release(self, group_id: str, member_id: str, partitions: Iterable[TopicPartition]) -> None:
        """The member's share session ended: what it holds in `partitions` is released."""
        released = []
        for tp in partitions:
            hosted = self._partitions.get((group_id, tp))
            if hosted is not None and hosted.partition.release_member(member_id):
                released.append(tp)
        await self.persist(group_id, released)

    def acquire(self, group_id: str, member_id: str, tp: TopicPartition, max_bytes: int, max_records: int,
                now_ms: int) -> Acquired | PartitionError:
        """Read `tp` from the first acquirable offset and acquire what the read holds, up to
        `max_records` (soft: whole batches)."""
        partition = self.hosted(group_id, tp)
        if isinstance(partition, PartitionError):
            return partition
        if partition is None:  # not loaded (`load`): nothing to acquire now
            return Acquired(b"", ())
        partition.expire_locks(now_ms)
        start = partition.acquirable_from()
        if start is None or max_records <= 0:
            return Acquired(b"", ())
        read_committed = self._group_configs(group_id).get("share.isolation.level") == "read_committed"
        read = self._rm.leader_partition(tp).read(start, max(max_bytes, 1), READ_COMMITTED if read_committed else READ_UNCOMMITTED,
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
        if len(deliverable) < len(headers):  # control batches, aborted records: never delivered
            delivered = {pos for pos, _ in deliverable}
            partition.archive_undelivered([(h.base_offset, h.last_offset) for pos, h in headers if pos not in delivered])
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


def request_member(request: Any) -> SessionKey | None:
    """(group id, member id) of a ShareFetch or ShareAcknowledge, its share session's key;
    None when either is missing (the request is INVALID_REQUEST)."""
    group_id, member_id = request.group_id or "", request.member_id or ""
    return (group_id, member_id) if group_id and member_id else None


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
        manager = _MANAGERS[rm] = SharePartitionManager(rm, settings, lambda g: group_configs(services, g),
                                                        services.share_persister)
    return manager


def group_configs(services: BrokerServices, group_id: str) -> dict[str, str]:
    """The group's GROUP resource configs, from the metadata image."""
    image = getattr(services.metadata, "image", None)
    if image is None:
        return {}
    return {k: str(v) for k, v in image.configs.get(ConfigResource(ConfigResourceType.GROUP, group_id), {}).items()}
