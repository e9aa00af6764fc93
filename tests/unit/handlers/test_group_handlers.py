"""Group handlers called with kio request objects against the coordinator service and an
in-memory CoordinatorLog; every response is encoded with kio to prove it is well-formed."""

import asyncio
import datetime
import inspect
import io
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from kio.serial import entity_writer

from kmirror.broker.api import RequestContext
from kmirror.broker.handlers import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.ports import ManualClock
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.errors import ErrorCode as E
from kmirror.protocol.registry import kio_schemas
from kmirror.testing.groups import MemoryCoordinatorLog


@dataclass
class Listener:
    host: str
    port: int


class FakeServerConfig:
    def advertised_listener(self, name=None):
        return Listener("localhost", 9092)


class FakeMetadata:
    def __init__(self):
        self.created = []
        self.image = None

    async def ensure_internal_topic(self, name, *, num_partitions, replication_factor, configs):
        self.created.append((name, num_partitions, replication_factor, configs))


API_KEYS = {
    join_group: 11, sync_group: 14, heartbeat: 12, leave_group: 13, offset_commit: 8, offset_fetch: 9,
    find_coordinator: 10, list_groups: 16, describe_groups: 15, delete_groups: 42, offset_delete: 47,
}


class Node:
    def __init__(self, partitions: int = 1):
        self.clock = ManualClock()
        config = CoordinatorConfig(offsets_topic_num_partitions=partitions, group_initial_rebalance_delay_ms=0,
                                   offsets_topic_replication_factor=1)
        self.coordinator = GroupCoordinatorService(1, config, MemoryCoordinatorLog(), self.clock)
        self.metadata = FakeMetadata()
        self.services = BrokerServices(node_id=1, config=FakeServerConfig(), registry=None, clock=self.clock,
                                       metadata=self.metadata, group_coordinator=self.coordinator)

    async def start(self, partitions=(0,)):
        await self.coordinator.start()
        self.coordinator.on_partitions_led(set(partitions))
        while any(self.coordinator.is_loading(p) for p in partitions):
            await asyncio.sleep(0)

    async def call(self, module, version, **fields):
        request_type, response_type = kio_schemas(API_KEYS[module])(version)
        request = request_type(**fields)
        ctx = RequestContext(RequestHeaderView(API_KEYS[module], version, 1, "client"), response_type, "127.0.0.1", 1)
        response = module.handle(self.services, ctx, request)
        if inspect.isawaitable(response):
            response = await response
        assert isinstance(response, response_type)
        entity_writer(response_type)(io.BytesIO(), response)
        return response


def run(coro):
    return asyncio.run(coro)


def ms(n):
    return datetime.timedelta(milliseconds=n)


def join_fields(version, member_id=""):
    req, _ = kio_schemas(11)(version)
    Protocol = __import__(req.__module__, fromlist=["x"]).JoinGroupRequestProtocol
    fields = dict(group_id="g", session_timeout=ms(10_000), member_id=member_id, protocol_type="consumer",
                  protocols=(Protocol(name="range", metadata=b"\x00\x01\x00\x00\x00\x01\x00\x01t"),))
    if version >= 1:
        fields["rebalance_timeout"] = ms(10_000)
    if version >= 5:
        fields["group_instance_id"] = None
    if version >= 8:
        fields["reason"] = None
    return fields


async def consumer_lifecycle(node, join_v, sync_v):
    first = await node.call(join_group, join_v, **join_fields(join_v))
    if join_v >= 4:
        assert first.error_code == E.member_id_required
        first = await node.call(join_group, join_v, **join_fields(join_v, first.member_id))
    assert first.error_code == E.none and first.leader == first.member_id
    assert [m.member_id for m in first.members] == [first.member_id]
    req, _ = kio_schemas(14)(sync_v)
    Assignment = __import__(req.__module__, fromlist=["x"]).SyncGroupRequestAssignment
    sync_fields = dict(group_id="g", generation_id=first.generation_id, member_id=first.member_id,
                       assignments=(Assignment(member_id=first.member_id, assignment=b"A"),))
    if sync_v >= 3:
        sync_fields["group_instance_id"] = None
    if sync_v >= 5:
        sync_fields.update(protocol_type="consumer", protocol_name="range")
    synced = await node.call(sync_group, sync_v, **sync_fields)
    assert synced.error_code == E.none and synced.assignment == b"A"
    return first


@pytest.mark.parametrize(("join_v", "sync_v"), [(0, 0), (3, 2), (4, 3), (7, 4), (9, 5)])
def test_join_sync_heartbeat_leave_across_versions(join_v, sync_v):
    async def main():
        node = Node()
        await node.start()
        joined = await consumer_lifecycle(node, join_v, sync_v)
        hb = await node.call(heartbeat, 4, group_id="g", generation_id=joined.generation_id,
                             member_id=joined.member_id, group_instance_id=None)
        assert hb.error_code == E.none
        hb = await node.call(heartbeat, 0, group_id="g", generation_id=99, member_id=joined.member_id)
        assert hb.error_code == E.illegal_generation
        left = await node.call(leave_group, 0, group_id="g", member_id=joined.member_id)
        assert left.error_code == E.none
        again = await node.call(leave_group, 1, group_id="g", member_id=joined.member_id)
        assert again.error_code == E.unknown_member_id
        await node.coordinator.stop()

    run(main())


def test_leave_group_v3_batch():
    async def main():
        node = Node()
        await node.start()
        joined = await consumer_lifecycle(node, 9, 5)
        from kio.schema.leave_group.v5.request import MemberIdentity

        left = await node.call(leave_group, 5, group_id="g", members=(
            MemberIdentity(member_id=joined.member_id, group_instance_id=None, reason=None),
            MemberIdentity(member_id="ghost", group_instance_id=None, reason=None),
        ))
        assert left.error_code == E.none
        assert [(m.member_id, m.error_code) for m in left.members] == [
            (joined.member_id, E.none), ("ghost", E.unknown_member_id)]
        await node.coordinator.stop()

    run(main())


def test_offset_commit_and_fetch_versions():
    async def main():
        node = Node()
        await node.start()
        from kio.schema.offset_commit.v2 import request as c2
        from kio.schema.offset_commit.v9 import request as c9

        r = await node.call(offset_commit, 2, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                            retention_time=datetime.timedelta(milliseconds=-1), topics=(
            c2.OffsetCommitRequestTopic(name="t", partitions=(
                c2.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata="m"),)),))
        assert r.topics[0].partitions[0].error_code == E.none
        r = await node.call(offset_commit, 9, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                            group_instance_id=None, topics=(
            c9.OffsetCommitRequestTopic(name="t", partitions=(
                c9.OffsetCommitRequestPartition(partition_index=1, committed_offset=9, committed_leader_epoch=2,
                                                committed_metadata=None),)),))
        assert r.topics[0].partitions[0].error_code == E.none

        from kio.schema.offset_fetch.v1 import request as f1
        from kio.schema.offset_fetch.v9 import request as f9

        f = await node.call(offset_fetch, 1, group_id="g", topics=(
            f1.OffsetFetchRequestTopic(name="t", partition_indexes=(0, 2)),))
        assert [(p.partition_index, p.committed_offset) for p in f.topics[0].partitions] == [(0, 5), (2, -1)]
        f = await node.call(offset_fetch, 7, group_id="g", topics=None, require_stable=True)
        assert f.error_code == E.none
        assert [(p.partition_index, p.committed_offset, p.committed_leader_epoch) for p in f.topics[0].partitions] == [
            (0, 5, -1), (1, 9, 2)]
        f = await node.call(offset_fetch, 9, require_stable=False, groups=(
            f9.OffsetFetchRequestGroup(group_id="g", member_id=None, member_epoch=-1, topics=None),
            f9.OffsetFetchRequestGroup(group_id="other", member_id=None, member_epoch=-1, topics=(
                f9.OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),)),
        ))
        assert [g.group_id for g in f.groups] == ["g", "other"]
        assert len(f.groups[0].topics[0].partitions) == 2
        assert f.groups[1].topics[0].partitions[0].committed_offset == -1
        await node.coordinator.stop()

    run(main())


@pytest.mark.parametrize(("version", "retention_ms", "expire_at"), [(2, 5_000, 5_000), (4, -1, None), (5, None, None)])
def test_offset_commit_retention_time_of_v2_to_v4_sets_the_expire_timestamp(version, retention_ms, expire_at):
    async def main():
        node = Node()
        await node.start()
        schema = __import__(f"kio.schema.offset_commit.v{version}.request", fromlist=["x"])
        fields = dict(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=(
            schema.OffsetCommitRequestTopic(name="t", partitions=(
                schema.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata=None),)),))
        if retention_ms is not None:
            fields["retention_time"] = ms(retention_ms)
        r = await node.call(offset_commit, version, **fields)
        assert r.topics[0].partitions[0].error_code == E.none
        (stored,) = node.coordinator.core.groups["g"].offsets.values()
        now = node.clock.now_ms()
        assert stored.expire_timestamp_ms == (None if expire_at is None else now + expire_at)
        await node.coordinator.stop()

    run(main())


def test_offset_commit_to_unknown_topic():
    async def main():
        node = Node()
        node.metadata.image = SimpleNamespace(topics={"t": object()})
        await node.start()
        from kio.schema.offset_commit.v9 import request as c9

        def topic(name):
            return c9.OffsetCommitRequestTopic(name=name, partitions=(c9.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=None),))

        r = await node.call(offset_commit, 9, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                            group_instance_id=None, topics=(topic("t"), topic("missing")))
        assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [
            ("t", E.none), ("missing", E.unknown_topic_or_partition)]
        await node.coordinator.stop()

    run(main())


def test_offset_fetch_v1_reports_not_coordinator_per_partition():
    async def main():
        node = Node()
        await node.start(partitions=())
        from kio.schema.offset_fetch.v1 import request as f1

        f = await node.call(offset_fetch, 1, group_id="g", topics=(
            f1.OffsetFetchRequestTopic(name="t", partition_indexes=(0,)),))
        assert f.topics[0].partitions[0].error_code == E.not_coordinator
        await node.coordinator.stop()

    run(main())


@pytest.mark.parametrize("version", [0, 1, 3, 4, 6])
def test_find_coordinator(version):
    async def main():
        node = Node()
        await node.start()
        if version >= 4:
            r = await node.call(find_coordinator, version, key_type=0, coordinator_keys=("g", "h"))
            assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in r.coordinators] == [
                ("g", 1, "localhost", 9092, E.none), ("h", 1, "localhost", 9092, E.none)]
            r = await node.call(find_coordinator, version, key_type=1, coordinator_keys=("tx",))
            assert r.coordinators[0].error_code == E.coordinator_not_available
            r = await node.call(find_coordinator, version, key_type=3, coordinator_keys=("m",))
            assert r.coordinators[0].error_code == E.invalid_request
        else:
            fields = {"key": "g"} if version == 0 else {"key": "g", "key_type": 0}
            r = await node.call(find_coordinator, version, **fields)
            assert (r.error_code, r.node_id, r.host, r.port) == (E.none, 1, "localhost", 9092)
        assert node.metadata.created[0] == ("__consumer_offsets", 1, 1, {
            "cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"})
        await node.coordinator.stop()

    run(main())


def test_find_coordinator_while_not_loaded():
    async def main():
        node = Node()
        await node.start(partitions=())
        r = await node.call(find_coordinator, 3, key="g", key_type=0)
        assert r.error_code == E.coordinator_not_available
        await node.coordinator.stop()

    run(main())


def test_list_describe_delete_and_offset_delete():
    async def main():
        node = Node()
        await node.start()
        joined = await consumer_lifecycle(node, 9, 5)
        from kio.schema.offset_commit.v9 import request as c9

        for group, gen, member in (("g", joined.generation_id, joined.member_id), ("simple", -1, "")):
            await node.call(offset_commit, 9, group_id=group, generation_id_or_member_epoch=gen, member_id=member,
                            group_instance_id=None, topics=(c9.OffsetCommitRequestTopic(name="t", partitions=(
                                c9.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                committed_leader_epoch=-1, committed_metadata=""),)),
                                c9.OffsetCommitRequestTopic(name="u", partitions=(
                                    c9.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                    committed_leader_epoch=-1,
                                                                    committed_metadata=""),))))
        listed = await node.call(list_groups, 0)
        assert [(g.group_id, g.protocol_type) for g in listed.groups] == [("g", "consumer"), ("simple", "")]
        listed = await node.call(list_groups, 5, states_filter=("Stable",), types_filter=())
        assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [("g", "Stable", "classic")]

        described = await node.call(describe_groups, 6, groups=("g", "nope"), include_authorized_operations=False)
        g, nope = described.groups
        assert (g.group_state, g.protocol_data, g.members[0].member_assignment) == ("Stable", "range", b"A")
        assert g.members[0].client_id == "client" and g.members[0].client_host == "/127.0.0.1"
        assert nope.error_code == E.group_id_not_found
        described = await node.call(describe_groups, 0, groups=("nope",))
        assert (described.groups[0].error_code, described.groups[0].group_state) == (E.none, "Dead")

        from kio.schema.offset_delete.v0 import request as d0

        r = await node.call(offset_delete, 0, group_id="g", topics=(
            d0.OffsetDeleteRequestTopic(name="t", partitions=(d0.OffsetDeleteRequestPartition(partition_index=0),)),
            d0.OffsetDeleteRequestTopic(name="u", partitions=(d0.OffsetDeleteRequestPartition(partition_index=0),)),
        ))
        # The member's subscription (consumer protocol) names topic "t".
        assert [t.partitions[0].error_code for t in r.topics] == [E.group_subscribed_to_topic, E.none]

        r = await node.call(delete_groups, 2, groups_names=("g", "simple", "nope"))
        assert [(x.group_id, x.error_code) for x in r.results] == [
            ("g", E.non_empty_group), ("simple", E.none), ("nope", E.group_id_not_found)]
        await node.coordinator.stop()

    run(main())


def test_handlers_register_their_versions():
    from kmirror.broker.api import load_handlers

    served = {d.api_key: (d.min_version, d.max_version) for d in load_handlers()}
    assert served[11] == (0, 9) and served[10] == (0, 6) and served[8] == (2, 10) and served[9] == (1, 10)
