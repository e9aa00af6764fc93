"""The transaction coordinator's asyncio shell with fake ports: markers are retried until the
leader writes them, dropped for deleted topics, and the transaction completes; the state
survives a reload from the log. Pending transactional offsets wait for their marker."""

from __future__ import annotations

import asyncio
import itertools

from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.coordinator.transaction.config import TransactionConfig
from kmirror.coordinator.transaction.results import TxnMarker
from kmirror.coordinator.transaction.service import TOPIC_DELETED, TransactionCoordinatorService
from kmirror.kip1279.errors import MirrorError, kio_error_code
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode as E
from kmirror.testing.groups import MemoryCoordinatorLog
from kmirror.types import TopicPartition

TP0, TP1, GONE = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("deleted", 0)
READ_ONLY = kio_error_code(int(MirrorError.READ_ONLY_TOPIC))


class Ids:
    def __init__(self) -> None:
        self._ids = itertools.count(500)
        self._ready: int | None = None

    async def reserve(self) -> E:
        if self._ready is None:
            self._ready = next(self._ids)
        return E.none

    def next_producer_id(self) -> int:
        producer_id, self._ready = self._ready, None
        assert producer_id is not None
        return producer_id


class Leaders:
    """Partition leaders that refuse (NOT_LEADER_OR_FOLLOWER) a set number of times first."""

    def __init__(self, refusals: int, read_only: frozenset[TopicPartition] = frozenset()) -> None:
        self.refusals = refusals
        self.read_only = read_only
        self.written: list[tuple[int, TopicPartition, bool]] = []
        self.refused_read_only: list[TopicPartition] = []

    async def write(self, leader: int, marker: TxnMarker, partitions: list[TopicPartition]) -> dict[TopicPartition, E]:
        if self.refusals > 0:
            self.refusals -= 1
            return dict.fromkeys(partitions, E.not_leader_or_follower)
        self.refused_read_only.extend(tp for tp in partitions if tp in self.read_only)
        self.written.extend((leader, tp, marker.commit) for tp in partitions if tp not in self.read_only)
        return {tp: READ_ONLY if tp in self.read_only else E.none for tp in partitions}


def leader_of(tp: TopicPartition) -> int | None:
    return TOPIC_DELETED if tp.topic == "deleted" else tp.partition + 1


def service(log: MemoryCoordinatorLog, leaders: Leaders) -> TransactionCoordinatorService:
    return TransactionCoordinatorService(
        1, TransactionConfig(transaction_state_log_num_partitions=1), log, ManualClock(), producer_ids=Ids(),
        write_markers=leaders.write, leader_of=leader_of, coordinator_epoch_of=lambda p: 3)


async def loaded(svc: TransactionCoordinatorService) -> None:
    await svc.start()
    svc.on_partitions_led({0})
    while svc.is_loading(0):
        await asyncio.sleep(0)


async def until(condition: object, what: str) -> None:
    for _ in range(200):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


def test_markers_are_retried_until_written_and_the_commit_completes() -> None:
    async def main() -> None:
        log, leaders = MemoryCoordinatorLog(), Leaders(refusals=2)
        svc = service(log, leaders)
        await loaded(svc)
        init = await svc.init_producer_id(transactional_id="t", transaction_timeout_ms=60_000)
        assert (init.error, init.producer_id, init.producer_epoch) == (E.none, 500, 0)
        assert await svc.add_partitions(transactional_id="t", producer_id=500, producer_epoch=0,
                                        partitions=[TP0, TP1, GONE]) == E.none
        assert await svc.end_txn(transactional_id="t", producer_id=500, producer_epoch=0, committed=True) == E.none
        await until(lambda: svc.describe("t").state == "CompleteCommit", "CompleteCommit")
        assert sorted(leaders.written, key=str) == sorted([(1, TP0, True), (2, TP1, True)], key=str)
        await svc.stop()

        again = service(log, Leaders(refusals=0))
        await loaded(again)
        described = again.describe("t")
        assert (described.state, described.producer_epoch) == ("CompleteCommit", 0)
        bumped = await again.init_producer_id(transactional_id="t", transaction_timeout_ms=60_000)
        assert (bumped.producer_id, bumped.producer_epoch) == (500, 1)
        await again.stop()

    asyncio.run(main())


def test_a_partition_that_became_a_mirror_partition_gets_no_marker_and_the_abort_completes() -> None:
    """READ_ONLY_TOPIC from the leader (the topic is a mirror topic again) is final: the marker
    is not retried into the mirror partition, and the other partitions' markers end the
    transaction."""
    async def main() -> None:
        leaders = Leaders(refusals=0, read_only=frozenset({TP1}))
        svc = service(MemoryCoordinatorLog(), leaders)
        await loaded(svc)
        init = await svc.init_producer_id(transactional_id="t", transaction_timeout_ms=60_000)
        assert await svc.add_partitions(transactional_id="t", producer_id=init.producer_id,
                                        producer_epoch=init.producer_epoch, partitions=[TP0, TP1]) == E.none
        assert await svc.end_txn(transactional_id="t", producer_id=init.producer_id,
                                 producer_epoch=init.producer_epoch, committed=False) == E.none
        await until(lambda: svc.describe("t").state == "CompleteAbort", "CompleteAbort")
        assert leaders.written == [(1, TP0, False)] and leaders.refused_read_only == [TP1]
        await svc.stop()

    asyncio.run(main())


async def group_service(log: MemoryCoordinatorLog) -> GroupCoordinatorService:
    groups = GroupCoordinatorService(0, CoordinatorConfig(offsets_topic_num_partitions=1), log, ManualClock())
    await groups.start()
    groups.on_partitions_led({0})
    while groups.is_loading(0):
        await asyncio.sleep(0)
    return groups


def offset_of(groups: GroupCoordinatorService) -> tuple[int, E]:
    fetched = groups.fetch_offsets(group_id="g", topics=[("t", [0])], require_stable=True).offsets[0]
    return fetched.offset, fetched.error


async def marker(groups: GroupCoordinatorService, producer_id: int, *, committed: bool) -> E:
    """WriteTxnMarkers for `__consumer_offsets-0`, which the group coordinator writes."""
    return await groups.complete_transaction(0, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0,
                                             committed=committed)


def test_txn_offsets_are_pending_until_the_commit_marker_and_survive_a_reload() -> None:
    async def main() -> None:
        log = MemoryCoordinatorLog()
        groups = await group_service(log)

        async def txn_commit(offset: int) -> None:
            result = await groups.txn_commit_offsets(
                transactional_id="tx", group_id="g", producer_id=9, producer_epoch=0, generation_id=-1, member_id="",
                group_instance_id=None, offsets=[OffsetToCommit("t", 0, offset, -1, "")])
            assert [p.error for p in result.partitions] == [E.none]

        await txn_commit(42)
        assert log.transactional[0][9] and not log.partitions.get(0)  # written as the producer's batch
        assert groups.fetch_offsets(group_id="g", topics=[("t", [0])]).offsets[0].offset == -1
        assert offset_of(groups) == (-1, E.unstable_offset_commit)
        # another coordinator loads the partition while the transaction is open: still pending
        await groups.stop()
        groups = await group_service(log)
        assert offset_of(groups) == (-1, E.unstable_offset_commit)
        # an abort marker of another producer changes nothing; this producer's commit commits
        assert await marker(groups, 8, committed=False) == E.none
        assert await marker(groups, 9, committed=True) == E.none
        assert offset_of(groups) == (42, E.none)
        # an aborted transaction's offsets never show, before or after a reload
        await txn_commit(99)
        assert await marker(groups, 9, committed=False) == E.none
        assert offset_of(groups) == (42, E.none)
        await groups.stop()
        groups = await group_service(log)
        assert offset_of(groups) == (42, E.none)
        await groups.stop()

    asyncio.run(main())
