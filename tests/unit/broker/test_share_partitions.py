"""The share partitions a node leads, over a fake leader and a fake persister: loading from
the stored state or at `share.auto.offset.reset`, storing after acknowledgements, control
batches and aborted transactions never delivered, fencing, and a reload after the group's
offsets were altered."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from kmirror.broker.share_partitions import Acquired, SharePartitionManager, ShareSettings
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.control import build_end_txn_marker
from kmirror.replication.outcomes import PartitionError, ReadOutcome
from kmirror.share.partition import AcknowledgeType
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)
T = uuid.UUID(int=9)
KEY = ShareStateKey("g", T, 0)
ACCEPT = (AcknowledgeType.ACCEPT,)


def data(base: int, n: int, **kw: object) -> bytes:
    return build_batch([(None, b"v", (), 0)] * n, base_offset=base, **kw)  # type: ignore[arg-type]


@dataclass
class FakeLog:
    log_start_offset: int = 0
    high_watermark: int = 0
    last_stable_offset: int = 0


@dataclass
class FakeState:
    leader_epoch: int = 1


@dataclass
class FakeLeader:
    """A leader whose log is `batches`; `aborted` its aborted transactions (producer, first)."""

    batches: list[bytes] = field(default_factory=list)
    aborted: tuple[tuple[int, int], ...] = ()
    is_leader: bool = True
    state: FakeState = field(default_factory=FakeState)
    log: FakeLog = field(default_factory=FakeLog)

    def append(self, batch: bytes) -> None:
        self.batches.append(batch)
        (_, header), = iter_batches(batch)
        self.log.high_watermark = self.log.last_stable_offset = header.next_offset

    def read(self, offset: int, max_bytes: int, isolation: int, epoch: int, min_one: bool) -> ReadOutcome:
        out = b"".join(b for b in self.batches if next(iter_batches(b))[1].last_offset >= offset)
        return ReadOutcome(out, self.log.high_watermark, self.log.last_stable_offset, 0, self.log.high_watermark,
                           self.aborted if isolation == 1 else ())


@dataclass
class FakeReplicaManager:
    leader: FakeLeader

    def leader_partition(self, tp: TopicPartition) -> FakeLeader | PartitionError:
        return self.leader if tp == TP else PartitionError(ErrorCode.unknown_topic_or_partition)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return T if topic == "t" else None


@dataclass
class FakePersister:
    stored: dict[ShareStateKey, ShareSnapshot] = field(default_factory=dict)
    read_error: ErrorCode | None = None
    write_error: ErrorCode = ErrorCode.none
    writes: int = 0

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareSnapshot | None | ErrorCode:
        return self.read_error or self.stored.get(key)

    async def write(self, key: ShareStateKey, snapshot: ShareSnapshot) -> ErrorCode:
        self.writes += 1
        if self.write_error == ErrorCode.none:
            self.stored[key] = snapshot
        return self.write_error


def manager(leader: FakeLeader, persister: FakePersister, configs: dict[str, str] | None = None
            ) -> SharePartitionManager:
    return SharePartitionManager(FakeReplicaManager(leader), ShareSettings(), lambda g: configs or {}, persister)


def acquire(m: SharePartitionManager) -> Acquired:
    asyncio.run(m.load("g", [TP]))
    got = m.acquire("g", "m1", TP, 1 << 20, 500, 0)
    assert isinstance(got, Acquired)
    return got


def test_a_new_share_partition_starts_at_the_high_watermark_and_is_stored() -> None:
    leader, persister = FakeLeader(), FakePersister()
    leader.append(data(0, 3))
    m = manager(leader, persister)
    assert acquire(m).acquired == ()
    assert persister.stored[KEY] == ShareSnapshot(0, 1, 3)
    leader.append(data(3, 2))
    got = acquire(m)
    assert [(a.first_offset, a.last_offset) for a in got.acquired] == [(3, 4)]
    assert asyncio.run(m.acknowledge("g", "m1", TP, [(3, 4, ACCEPT)], 0)) == ErrorCode.none
    assert persister.stored[KEY].start_offset == 5


def test_a_stored_state_is_loaded_with_acquired_records_available_again() -> None:
    leader = FakeLeader()
    for base in range(0, 10, 2):
        leader.append(data(base, 2))
    persister = FakePersister({KEY: ShareSnapshot(0, 1, 4, ((4, 5, 1, 1), (6, 7, 2, 1)))})
    got = acquire(manager(leader, persister, {"share.auto.offset.reset": "earliest"}))
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got.acquired] == [(4, 5, 2), (8, 9, 1)]


def test_an_unreadable_state_leaves_the_partition_unloaded_until_later() -> None:
    leader, persister = FakeLeader(), FakePersister(read_error=ErrorCode.coordinator_not_available)
    leader.append(data(0, 1))
    m = manager(leader, persister, {"share.auto.offset.reset": "earliest"})
    assert acquire(m).acquired == ()
    assert m.hosted("g", TP) is None
    persister.read_error = None
    assert len(acquire(m).acquired) == 1


def test_a_failed_store_is_the_acknowledgements_error_and_fencing_unloads() -> None:
    leader, persister = FakeLeader(), FakePersister()
    m = manager(leader, persister)
    acquire(m)
    leader.append(data(0, 1))
    acquire(m)
    persister.write_error = ErrorCode.fenced_leader_epoch
    assert asyncio.run(m.acknowledge("g", "m1", TP, [(0, 0, ACCEPT)], 0)) == ErrorCode.fenced_leader_epoch
    assert m.hosted("g", TP) is None


def test_control_batches_and_aborted_records_are_never_delivered() -> None:
    leader, persister = FakeLeader(), FakePersister()
    m = manager(leader, persister, {"share.auto.offset.reset": "earliest",
                                    "share.isolation.level": "read_committed"})
    leader.append(data(0, 2, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True))
    leader.append(data(2, 1))
    leader.append(_at(build_end_txn_marker(False, 7, 0, 0, 0), 3))
    leader.aborted = ((7, 0),)
    got = acquire(m)
    assert [(a.first_offset, a.last_offset) for a in got.acquired] == [(2, 2)]
    partition = m.hosted("g", TP)
    assert partition is not None and not isinstance(partition, PartitionError)
    assert partition.end_offset == 4  # the abort marker is archived too: the next read starts after it


def _at(batch: bytes, base_offset: int) -> bytes:
    """`batch` moved to `base_offset` (the base offset is outside the CRC)."""
    return base_offset.to_bytes(8, "big") + batch[8:]


def test_a_member_opening_a_session_reloads_a_partition_whose_offsets_were_altered() -> None:
    leader, persister = FakeLeader(), FakePersister()
    for base in range(0, 6, 2):
        leader.append(data(base, 2))
    m = manager(leader, persister)
    acquire(m)  # loaded at the high watermark, 6
    persister.stored[KEY] = ShareSnapshot(1, 1, 2)  # AlterShareGroupOffsets to 2
    asyncio.run(m.refresh("g", [TP]))
    got = acquire(m)
    assert [(a.first_offset, a.last_offset) for a in got.acquired] == [(2, 5)]
