"""AlterPartition requests built for the controller's version, answers fed back to partitions."""

import asyncio
from types import SimpleNamespace
from uuid import uuid4

import pytest
from kio.index import load_request_schema, load_response_schema

from kmirror.metadata.image import PartitionRegistration
from kmirror.ports import ManualClock
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.alter_partition_sender import AlterPartitionSender
from kmirror.replication.replica_manager import FetchPartitionRequest, ReplicaManager
from kmirror.testing.replication import image_with, memory_log_manager, server_config
from kmirror.types import TopicPartition

T_ID = uuid4()
TP = TopicPartition("t", 0)


class FakeChannel:
    def __init__(self, version: int, answer) -> None:
        self.version = version
        self.answer = answer
        self.sent: list[object] = []

    async def connection(self):
        return SimpleNamespace(request_type=lambda key: load_request_schema(key, self.version))

    async def send(self, api_key: int, timeout_ms=None, **fields):
        request = build(load_request_schema(api_key, self.version), **fields)
        self.sent.append(request)
        return self.answer(request, load_response_schema(api_key, self.version))


def leader_with_pending_expand() -> ReplicaManager:
    clock = ManualClock()
    rm = ReplicaManager(1, memory_log_manager(clock), clock, server_config(1))
    rm.apply_image(None, image_with({"t": (T_ID, {0: PartitionRegistration((1, 2), (1,), 1, 3, 7)})}))
    rm.fetch([FetchPartitionRequest(TP, 0, 1 << 20)], 1 << 20, 0, replica_id=2)
    return rm


def committed(request, rt):
    p = request.topics[0].partitions[0]
    isr = tuple(b.broker_id for b in p.new_isr_with_epochs) if hasattr(p, "new_isr_with_epochs") else tuple(p.new_isr)
    part = build(nested(rt, "PartitionData"), partition_index=0, error_code=ErrorCode.none, leader_id=1,
                 leader_epoch=p.leader_epoch, isr=isr, leader_recovery_state=0, partition_epoch=p.partition_epoch + 1)
    return build(rt, throttle_time=0, error_code=ErrorCode.none,
                 topics=(build(nested(rt, "TopicData"), topic_id=T_ID, topic_name="t", partitions=(part,)),))


@pytest.mark.parametrize("version", [2, 3])
def test_expansion_is_sent_and_committed(version: int) -> None:
    rm = leader_with_pending_expand()
    channel = FakeChannel(version, committed)
    sender = AlterPartitionSender(channel, rm, broker_id=1, broker_epoch=lambda: 42)
    (item,) = rm.alter_partition.drain()

    async def run() -> None:
        sender.submit(item)
        await asyncio.sleep(0.01)

    asyncio.run(run())
    (request,) = channel.sent
    assert (request.broker_id, request.broker_epoch) == (1, 42)
    p = request.topics[0].partitions[0]
    assert (p.leader_epoch, p.partition_epoch) == (3, 7)
    partition = rm.get_partition(TP)
    assert partition.isr == (1, 2) and partition.partition_epoch == 8 and partition.isr_expands == 1


def test_a_refused_request_reverts_the_pending_change() -> None:
    rm = leader_with_pending_expand()

    def refuse(request, rt):
        return build(rt, throttle_time=0, error_code=ErrorCode.stale_broker_epoch, topics=())

    sender = AlterPartitionSender(FakeChannel(3, refuse), rm, broker_id=1)
    (item,) = rm.alter_partition.drain()

    async def run() -> None:
        sender.submit(item)
        await asyncio.sleep(0.01)

    asyncio.run(run())
    partition = rm.get_partition(TP)
    assert not partition.isr_state.is_inflight and partition.isr == (1,)


def test_role_listener_announces_partitions_to_follow_and_to_stop_following() -> None:
    clock = ManualClock()
    rm = ReplicaManager(2, memory_log_manager(clock), clock, server_config(2))
    events: list[tuple[list, list]] = []
    rm.add_role_listener(lambda follow, unfollow: events.append((follow, unfollow)))

    def image(leader: int, epoch: int, pe: int):
        return image_with({"t": (T_ID, {0: PartitionRegistration((1, 2), (1, 2), leader, epoch, pe)})})

    rm.apply_image(None, image(1, 1, 0))
    ((follow, unfollow),) = events
    assert [(f.topic_partition, f.leader_id, f.leader_epoch) for f in follow] == [(TP, 1, 1)] and unfollow == []
    rm.apply_image(None, image(1, 1, 1))  # ISR-only change: nothing to refetch
    assert len(events) == 1
    rm.apply_image(None, image(2, 2, 2))  # this broker leads now
    assert events[-1] == ([], [TP])
    rm.apply_image(None, image(1, 3, 3))
    assert [(f.leader_id, f.leader_epoch) for f in events[-1][0]] == [(1, 3)]
    assert [f.topic_partition for f in rm.followed_partitions()] == [TP]
