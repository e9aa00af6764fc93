"""A transaction marker on `__consumer_offsets` and the group coordinator's transactional
offset commits are applied to the group state in log order (Kafka
`CoordinatorRuntime.scheduleTransactionCompletion`): a TxnOffsetCommit whose batch is in the
log but whose replicas have not acknowledged it yet is completed before its producer's
marker, which comes after it in the log, so the marker commits or drops its offsets.

One node: the real ReplicaManager and logs (in-memory file system), the real group
coordinator service and WriteTxnMarkers path; the offsets log's acknowledgements of
transactional appends are held until the test releases them."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from uuid import uuid4

from kmirror.broker.txn_markers import MarkerEntry, write_txn_markers
from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.coordinator.offsets.log_adapter import CoordinatorAppendError, ReplicaManagerCoordinatorLog
from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode as E
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.coordinator_log import ReplicatedCoordinatorLog
from kmirror.testing.replication import data_services, single_node_image
from kmirror.types import TopicPartition

OFFSETS = TopicPartition("__consumer_offsets", 0)
GROUP, PID, EPOCH = "g", 4000, 0


class HeldAcksLog(ReplicatedCoordinatorLog):
    """The offsets log, whose transactional appends are written at once and acknowledged
    only when `release` is called (the ISR catching up): `held` is set while one waits."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        super().__init__(replica_manager, OFFSETS.topic)
        self.held = asyncio.Event()
        self._acks = asyncio.Event()

    def release(self) -> None:
        self._acks.set()

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, verification_guard: VerificationGuard | None = None) -> int:
        last_offset = await super().append(partition, records, producer_id=producer_id,
                                           producer_epoch=producer_epoch, verification_guard=verification_guard)
        if producer_id >= 0:
            self.held.set()
            await self._acks.wait()
        return last_offset


class UnreplicatedLog(ReplicatedCoordinatorLog):
    """The offsets log, whose transactional appends are written but never acknowledged by the
    ISR in time (REQUEST_TIMED_OUT after the write)."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        super().__init__(replica_manager, OFFSETS.topic)

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, verification_guard: VerificationGuard | None = None) -> int:
        last_offset = await ReplicaManagerCoordinatorLog.append(
            self, partition, records, producer_id=producer_id, producer_epoch=producer_epoch,
            verification_guard=verification_guard)
        if producer_id >= 0:
            raise CoordinatorAppendError(E.request_timed_out)
        return last_offset


class Node:
    def __init__(self, log_type: type[HeldAcksLog] | type[UnreplicatedLog]) -> None:
        base = data_services(single_node_image(1, {OFFSETS.topic: (uuid4(), 1), "t": (uuid4(), 1)}))
        self.rm = base.replica_manager
        self.clock = base.clock
        self.log = log_type(self.rm)
        self.groups = self._group_coordinator(self.log)
        self.services = dataclasses.replace(base, group_coordinator=self.groups)

    def _group_coordinator(self, log: ReplicatedCoordinatorLog) -> GroupCoordinatorService:
        return GroupCoordinatorService(1, CoordinatorConfig(offsets_topic_num_partitions=1), log, self.clock)

    async def start(self) -> None:
        await self.groups.start()
        self.groups.on_partitions_led({0})
        await self.groups.wait_loaded()

    async def commit_offset(self, offset: int) -> E:
        result = await self.groups.txn_commit_offsets(
            transactional_id="txn", group_id=GROUP, producer_id=PID, producer_epoch=EPOCH, generation_id=-1,
            member_id="", group_instance_id=None, offsets=[OffsetToCommit("t", 0, offset, -1, "")])
        return result.partitions[0].error

    async def marker(self, committed: bool) -> dict[TopicPartition, E]:
        [written] = await write_txn_markers(self.services, [MarkerEntry(PID, EPOCH, committed, 0, (OFFSETS,))])
        return written

    def stable_offset(self, groups: GroupCoordinatorService | None = None) -> tuple[int, E]:
        fetched = (groups or self.groups).fetch_offsets(group_id=GROUP, topics=[("t", [0])],
                                                        require_stable=True).offsets[0]
        return fetched.offset, fetched.error

    async def reloaded_stable_offset(self) -> tuple[int, E]:
        """What a fresh load of the partition's log gives (the log's word)."""
        reloaded = self._group_coordinator(ReplicatedCoordinatorLog(self.rm, OFFSETS.topic))
        await reloaded.start()
        reloaded.on_partitions_led({0})
        await reloaded.wait_loaded()
        try:
            return self.stable_offset(reloaded)
        finally:
            await reloaded.stop()


async def settle() -> None:
    """Let every runnable task go as far as it can (in-memory logs: a few loop turns)."""
    for _ in range(50):
        await asyncio.sleep(0)


def run(test: Callable[[Node], Awaitable[None]], log_type: type[HeldAcksLog] | type[UnreplicatedLog] = HeldAcksLog
        ) -> None:
    async def main() -> None:
        node = Node(log_type)
        await node.start()
        try:
            await test(node)
        finally:
            await node.groups.stop()

    asyncio.run(main())


def marker_lands_while_the_commit_awaits_its_acks(committed: bool, expected: tuple[int, E]) -> None:
    async def test(node: Node) -> None:
        commit = asyncio.ensure_future(node.commit_offset(7))
        await node.log.held.wait()  # the commit's batch is in the log, its replicas not caught up
        marker = asyncio.ensure_future(node.marker(committed))
        await settle()  # the marker is handled as far as it can be before the commit's ack
        node.log.release()
        assert await commit == E.none
        assert await marker == {OFFSETS: E.none}
        log = node.rm.get_partition(OFFSETS).log
        assert (log.log_end_offset, log.last_stable_offset) == (2, 2)  # the commit's batch, then its marker
        assert node.stable_offset() == expected
        assert await node.reloaded_stable_offset() == expected

    run(test)


def test_a_commit_marker_landing_while_the_commit_awaits_its_acks_commits_its_offsets() -> None:
    marker_lands_while_the_commit_awaits_its_acks(True, (7, E.none))


def test_an_abort_marker_landing_while_the_commit_awaits_its_acks_drops_its_offsets() -> None:
    marker_lands_while_the_commit_awaits_its_acks(False, (-1, E.none))


def test_a_marker_on_a_partition_not_loaded_here_is_written_and_its_load_replays_it() -> None:
    async def test(node: Node) -> None:
        node.log.release()
        assert await node.commit_offset(8) == E.none
        assert node.stable_offset() == (-1, E.unstable_offset_commit)
        node.groups.on_partitions_led(set())  # resigned: nothing in memory to settle
        assert await node.marker(committed=True) == {OFFSETS: E.none}
        node.groups.on_partitions_led({0})
        await node.groups.wait_loaded()
        assert node.stable_offset() == (8, E.none)

    run(test)


def test_a_commit_written_but_not_replicated_in_time_is_pending_so_its_marker_commits_it() -> None:
    async def test(node: Node) -> None:
        assert await node.commit_offset(9) == E.coordinator_not_available  # the producer retries
        assert node.stable_offset() == (-1, E.unstable_offset_commit)  # as the log says: pending
        assert await node.marker(committed=True) == {OFFSETS: E.none}
        assert node.stable_offset() == (9, E.none)
        assert await node.reloaded_stable_offset() == (9, E.none)

    run(test, UnreplicatedLog)
