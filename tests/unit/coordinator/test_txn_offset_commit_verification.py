"""KIP-890 part 1 for TxnOffsetCommit, on one node: the real group and transaction coordinator
services, the real ReplicaManager and logs (in-memory file system), the TxnOffsetCommit
handler and the real WriteTxnMarkers path. The group's `__consumer_offsets` partition must be
in the producer's ongoing transaction (AddOffsetsToTxn), and the append carries the
verification guard, so an ABORT marker that lands first refuses the commit."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import uuid4

import pytest
from kio.index import load_response_schema

from kmirror.broker.api import RequestContext
from kmirror.broker.handlers.txn_offset_commit import handle as txn_offset_commit
from kmirror.broker.txn_markers import MarkerEntry, write_txn_markers
from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.offsets.txn_commits import txn_commit_error
from kmirror.coordinator.transaction.config import TransactionConfig
from kmirror.coordinator.transaction.results import TxnMarker
from kmirror.coordinator.transaction.service import TransactionCoordinatorService
from kmirror.coordinator.transaction.verification import TransactionVerifier
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode as E
from kmirror.runtime.coordinator_log import ReplicatedCoordinatorLog
from kmirror.testing.groups import MemoryCoordinatorLog
from kmirror.testing.replication import data_services, request_type, single_node_image
from kmirror.types import TopicPartition

OFFSETS = TopicPartition("__consumer_offsets", 0)
TXN_ID, GROUP = "txn-offsets", "g"


class Ids:
    """The node's producer id source: one id after another."""

    def __init__(self) -> None:
        self._next = 500

    async def reserve(self) -> E:
        return E.none

    def next_producer_id(self) -> int:
        self._next += 1
        return self._next


class Verifier:
    """Passes verifications to the real coordinator, counting them; `meanwhile` runs after
    the coordinator answered and before the answer is used (what lands while it travels)."""

    def __init__(self) -> None:
        self.coordinator: TransactionVerifier | None = None
        self.calls = 0
        self.meanwhile: Callable[[], Awaitable[None]] | None = None
        self.answer: E | None = None  # instead of the coordinator's

    async def verify_partitions(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: list[TopicPartition]) -> dict[TopicPartition, E]:
        self.calls += 1
        assert self.coordinator is not None
        answers = await self.coordinator.verify_partitions(transactional_id=transactional_id, producer_id=producer_id,
                                                           producer_epoch=producer_epoch, partitions=partitions)
        if self.meanwhile is not None:
            await self.meanwhile()
        return answers if self.answer is None else dict.fromkeys(partitions, self.answer)


class Node:
    def __init__(self) -> None:
        base = data_services(single_node_image(1, {OFFSETS.topic: (uuid4(), 1), "t": (uuid4(), 1)}))
        self.rm = base.replica_manager
        self.verifier = Verifier()
        self.txn = TransactionCoordinatorService(
            1, TransactionConfig(transaction_state_log_num_partitions=1), MemoryCoordinatorLog(), base.clock,
            producer_ids=Ids(), write_markers=self._write_markers, leader_of=lambda tp: 1,
            coordinator_epoch_of=lambda p: 0)
        self.verifier.coordinator = self.txn
        self.groups = GroupCoordinatorService(
            1, CoordinatorConfig(offsets_topic_num_partitions=1),
            ReplicatedCoordinatorLog(self.rm, OFFSETS.topic, verifier=self.verifier), base.clock)
        self.services = dataclasses.replace(base, group_coordinator=self.groups, transaction_coordinator=self.txn)

    async def _write_markers(self, leader: int, marker: TxnMarker,
                             partitions: list[TopicPartition]) -> dict[TopicPartition, E]:
        [written] = await write_txn_markers(self.services, [MarkerEntry(
            marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch, tuple(partitions))])
        return written

    async def start(self) -> tuple[int, int]:
        for service in (self.txn, self.groups):
            await service.start()
            service.on_partitions_led({0})
            await service.wait_loaded()
        init = await self.txn.init_producer_id(transactional_id=TXN_ID, transaction_timeout_ms=60_000)
        assert init.error == E.none
        return init.producer_id, init.producer_epoch

    async def stop(self) -> None:
        await self.groups.stop()
        await self.txn.stop()

    async def add(self, pid: int, epoch: int, tp: TopicPartition) -> None:
        """AddPartitionsToTxn, or AddOffsetsToTxn when `tp` is the group's offsets partition."""
        assert await self.txn.add_partitions(transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch,
                                             partitions=[tp]) == E.none

    async def end(self, pid: int, epoch: int, committed: bool) -> None:
        """EndTxn, until its marker is written and the transaction completed."""
        assert await self.txn.end_txn(transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch,
                                      committed=committed) == E.none
        completed = "CompleteCommit" if committed else "CompleteAbort"
        for _ in range(1000):  # in-memory logs: a few turns of the loop
            if self.txn.describe(TXN_ID).state == completed:
                return
            await asyncio.sleep(0)
        raise AssertionError(f"the transaction did not reach {completed}")

    async def commit_offset(self, pid: int, epoch: int, offset: int, version: int = 3) -> int:
        """A TxnOffsetCommit through its handler: the partition's error code."""
        R = request_type(28, version)
        request = build(R, transactional_id=TXN_ID, group_id=GROUP, producer_id=pid, producer_epoch=epoch,
                        generation_id=-1, member_id="", group_instance_id=None, topics=(
                            nested(R, "TxnOffsetCommitRequestTopic")(name="t", partitions=(
                                build(nested(R, "TxnOffsetCommitRequestPartition"),
                                      partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                      committed_metadata=""),)),))
        ctx = RequestContext(RequestHeaderView(28, version, 1, "test"), load_response_schema(28, version),
                             "127.0.0.1", 1)
        response = await txn_offset_commit(self.services, ctx, request)
        return int(response.topics[0].partitions[0].error_code)

    def offsets_log(self) -> tuple[int, int, int]:
        """(log end, high watermark, last stable offset) of the group's offsets partition."""
        log = self.rm.get_partition(OFFSETS).log
        return log.log_end_offset, log.high_watermark, log.last_stable_offset

    def stable_offset(self) -> tuple[int, E]:
        fetched = self.groups.fetch_offsets(group_id=GROUP, topics=[("t", [0])], require_stable=True).offsets[0]
        return fetched.offset, fetched.error


def run(test: Callable[[Node, int, int], Awaitable[None]]) -> None:
    async def main() -> None:
        node = Node()
        pid, epoch = await node.start()
        try:
            await test(node, pid, epoch)
        finally:
            await node.stop()

    asyncio.run(main())


def test_a_commit_whose_transaction_does_not_hold_the_offsets_partition_is_refused() -> None:
    async def test(node: Node, pid: int, epoch: int) -> None:
        assert await node.commit_offset(pid, epoch, 5) == E.invalid_txn_state  # no transaction at all
        await node.add(pid, epoch, TopicPartition("t", 0))  # a transaction without AddOffsetsToTxn
        assert await node.commit_offset(pid, epoch, 5) == E.invalid_txn_state
        assert node.offsets_log() == (0, 0, 0)  # nothing written: no transaction opened here
        assert node.stable_offset() == (-1, E.none)

    run(test)


def test_a_commit_after_add_offsets_to_txn_is_written_and_its_commit_marker_commits_it() -> None:
    async def test(node: Node, pid: int, epoch: int) -> None:
        await node.add(pid, epoch, OFFSETS)
        assert await node.commit_offset(pid, epoch, 7) == E.none
        assert node.offsets_log() == (1, 1, 0)  # the producer's open transaction holds the LSO
        assert node.stable_offset() == (-1, E.unstable_offset_commit)
        assert node.verifier.calls == 1
        # its transaction is open on the partition now: a second commit is not verified again
        assert await node.commit_offset(pid, epoch, 8) == E.none
        assert node.verifier.calls == 1
        await node.end(pid, epoch, committed=True)
        assert node.offsets_log() == (3, 3, 3)
        assert node.stable_offset() == (8, E.none)

    run(test)


def test_a_verified_commit_whose_abort_marker_lands_first_is_refused_by_the_guard() -> None:
    """The coordinator answers "in the transaction", then aborts it, and its ABORT marker
    reaches `__consumer_offsets` before the answer is used: the guard is gone with the marker."""

    async def test(node: Node, pid: int, epoch: int) -> None:
        await node.add(pid, epoch, OFFSETS)

        async def abort_lands() -> None:
            node.verifier.meanwhile = None
            await node.end(pid, epoch, committed=False)

        node.verifier.meanwhile = abort_lands
        assert await node.commit_offset(pid, epoch, 9) == E.invalid_txn_state
        assert node.offsets_log() == (1, 1, 1)  # the ABORT marker alone; the LSO is not held
        assert node.stable_offset() == (-1, E.none)
        # the producer's next transaction commits offsets as usual
        await node.add(pid, epoch, OFFSETS)
        assert await node.commit_offset(pid, epoch, 10) == E.none
        await node.end(pid, epoch, committed=True)
        assert node.stable_offset() == (10, E.none)
        assert node.offsets_log()[1:] == (3, 3)

    run(test)


def test_a_late_commit_after_its_transaction_aborted_is_refused() -> None:
    async def test(node: Node, pid: int, epoch: int) -> None:
        await node.add(pid, epoch, OFFSETS)
        await node.end(pid, epoch, committed=False)
        assert await node.commit_offset(pid, epoch, 11) == E.invalid_txn_state
        assert node.offsets_log() == (1, 1, 1)
        assert node.stable_offset() == (-1, E.none)

    run(test)


def test_a_fenced_producer_gets_invalid_producer_epoch() -> None:
    async def test(node: Node, pid: int, epoch: int) -> None:
        bumped = await node.txn.init_producer_id(transactional_id=TXN_ID, transaction_timeout_ms=60_000,
                                                 producer_id=pid, producer_epoch=epoch)
        assert (bumped.error, bumped.producer_epoch) == (E.none, epoch + 1)
        await node.add(pid, epoch + 1, OFFSETS)
        for version in (0, 3):  # PRODUCER_FENCED reaches the partition as INVALID_PRODUCER_EPOCH
            assert await node.commit_offset(pid, epoch, 12, version) == E.invalid_producer_epoch
        assert node.offsets_log() == (0, 0, 0)

    run(test)


@pytest.mark.parametrize(("answer", "expected"), [
    (E.network_exception, E.coordinator_load_in_progress),  # the coordinator could not be reached
    (E.coordinator_not_available, E.coordinator_not_available),
    (E.not_coordinator, E.not_coordinator),
    (E.coordinator_load_in_progress, E.coordinator_load_in_progress),
    (E.concurrent_transactions, E.concurrent_transactions),
    (E.invalid_producer_id_mapping, E.invalid_producer_id_mapping),
])
def test_the_coordinators_other_answers_reach_the_producer_as_kafka_answers_them(answer: E, expected: E) -> None:
    async def test(node: Node, pid: int, epoch: int) -> None:
        await node.add(pid, epoch, OFFSETS)
        node.verifier.answer = answer
        assert await node.commit_offset(pid, epoch, 13) == expected
        assert node.offsets_log() == (0, 0, 0)
        node.verifier.answer = None  # a retry is verified again and goes through
        assert await node.commit_offset(pid, epoch, 13) == E.none

    run(test)


def test_txn_commit_error_maps_partition_errors_to_coordinator_errors() -> None:
    cases: dict[E, Any] = {
        E.not_leader_or_follower: E.not_coordinator, E.kafka_storage_error: E.not_coordinator,
        E.not_enough_replicas: E.coordinator_not_available, E.request_timed_out: E.coordinator_not_available,
        E.unknown_topic_or_partition: E.coordinator_not_available,
        E.message_too_large: E.invalid_commit_offset_size, E.invalid_txn_state: E.invalid_txn_state,
        E.invalid_producer_epoch: E.invalid_producer_epoch,
    }
    assert {error: txn_commit_error(error) for error in cases} == cases
