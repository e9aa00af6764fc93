"""Consumer-group records in `__consumer_offsets`: round trips, and a coordinator that loads
the partition (a coordinator move or a restart) rebuilds the same group."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmirror.cli.common import kafka_uuid
from kmirror.cli.dump_log import decode_offsets_record
from kmirror.coordinator.consumer_group import records
from kmirror.coordinator.consumer_group.member import ClassicMemberMetadata, ConsumerGroupMember
from kmirror.coordinator.consumer_group.state import MemberState
from kmirror.coordinator.group.coordinator import GroupCoordinator
from kmirror.coordinator.group.member import Protocol
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.consumer_groups import ConsumerGroups, T
from kmirror.testing.groups import ManualClock

E = ErrorCode

names = st.text(min_size=0, max_size=12)
tps = st.dictionaries(st.integers(1, 5).map(lambda i: uuid.UUID(int=i)),
                      st.frozensets(st.integers(0, 100), min_size=1), max_size=3)


@given(names, names, st.none() | names, st.tuples(names, names), st.none() | names, st.integers(-1, 2**31 - 1))
def test_member_metadata_round_trips(group, member_id, instance, topics, regex, timeout):
    m = ConsumerGroupMember(member_id, instance_id=instance, client_id="c", client_host="/h",
                            subscribed_topic_names=topics, subscribed_topic_regex=regex, server_assignor="range",
                            rebalance_timeout_ms=timeout)
    key, value = records.member_metadata_record(group, m)
    assert records.decode_key(key) == records.ConsumerGroupKey(records.MEMBER_METADATA, group, member_id)
    assert value is not None
    assert records.decode_member_metadata(member_id, value) == m


def test_member_metadata_value_has_kafkas_field_order():
    """ConsumerGroupMemberMetadataValue v0: ..., SubscribedTopicRegex, RebalanceTimeoutMs, ServerAssignor."""
    m = ConsumerGroupMember("m", client_id="c", client_host="h", subscribed_topic_names=("t",),
                            server_assignor="range", rebalance_timeout_ms=30_000)
    _, value = records.member_metadata_record("g", m)
    assert value == (b"\x00\x00"  # version 0
                     b"\x00\x00"  # InstanceId, RackId: null
                     b"\x02c\x02h"  # ClientId, ClientHost
                     b"\x02\x02t"  # SubscribedTopicNames
                     b"\x00"  # SubscribedTopicRegex: null
                     b"\x00\x00\x75\x30"  # RebalanceTimeoutMs
                     b"\x06range"  # ServerAssignor
                     b"\x00")  # no tagged fields


@pytest.mark.parametrize("assignor", [b"\x06range", b"\x00"], ids=["range", "none"])
def test_member_metadata_written_in_kmirrors_earlier_field_order_still_loads(assignor):
    value = b"\x00\x00\x00\x00\x02c\x02h\x02\x02t\x00" + assignor + b"\x00\x00\x75\x30\x00"
    m = records.decode_member_metadata("m", value)
    assert (m.rebalance_timeout_ms, m.server_assignor, m.client_id) == (30_000, assignor[1:].decode() or None, "c")


@given(tps, tps, st.integers(-2, 1000), st.sampled_from(list(MemberState)[:3]))
def test_current_assignment_round_trips(assigned, revoking, epoch, state):
    m = ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1, state=state,
                            assigned=assigned, pending_revocation=revoking)
    _, value = records.current_assignment_record("g", m)
    assert value is not None
    assert records.apply_current_assignment(ConsumerGroupMember("m"), value) == m


def test_a_loaded_partition_rebuilds_the_group_and_its_offsets():
    cg = ConsumerGroups()
    for m in ("a", "b", "c"):
        cg.join(m)
    cg.settle()
    group = cg.core.consumer_groups["g"]
    log = cg.h.log.partitions[0]

    reloaded = GroupCoordinator(cg.h.config, ManualClock(), lambda: "x")
    reloaded.begin_load(0)
    reloaded.complete_load(0, log)
    again = reloaded.consumer_groups["g"]
    assert (again.group_epoch, again.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
    assert again.target == group.target
    assert again.members == group.members
    assert again.owners == group.owners
    assert sorted(again.session_deadline_ms) == ["a", "b", "c"]
    assert "g" not in reloaded.groups


def test_a_left_member_and_a_deleted_group_stay_gone_after_a_load():
    cg = ConsumerGroups()
    cg.join("a")
    cg.join("b")
    cg.settle()
    cg.h.advance(60_000)  # both sessions expire: the group is empty
    reloaded = GroupCoordinator(cg.h.config, ManualClock(), lambda: "x")
    reloaded.begin_load(0)
    reloaded.complete_load(0, cg.h.log.partitions[0])
    assert reloaded.consumer_groups["g"].members == {}
    assert reloaded.consumer_groups["g"].owners == {}
    assert T not in {t for tps_ in reloaded.consumer_groups["g"].target.values() for t in tps_}


def test_members_keep_their_epochs_across_a_coordinator_move():
    cg = ConsumerGroups()
    for m in ("a", "b"):
        cg.join(m)
    cg.settle()
    epoch = cg.core.consumer_groups["g"].group_epoch
    moved = ConsumerGroups()
    moved.h.core.begin_load(0)
    moved.h.core.complete_load(0, cg.h.log.partitions[0])
    moved.clients = cg.clients
    for m in ("a", "b"):
        result = moved.beat(m)
        assert (result.error, result.member_epoch) == (E.none, epoch)
    assert moved.core.consumer_groups["g"].group_epoch == epoch


def test_a_coordinator_that_no_longer_leads_the_partition_answers_not_coordinator():
    cg = ConsumerGroups()
    cg.join("a")
    cg.h.run(cg.core.unload(0))
    assert cg.core.consumer_groups == {}
    assert cg.beat("a").error == E.not_coordinator
    assert cg.core.next_deadline_ms() is None


def test_dump_log_offsets_decoder_prints_consumer_group_records_as_kafka_json():
    cg = ConsumerGroups()
    cg.join("a")
    lines = [decode_offsets_record(k, v) for k, v in cg.h.log.partitions[0]]
    keys = [k for k, _ in lines]
    assert '{"type":"3","data":{"groupId":"g"}}' in keys
    assert '{"type":"5","data":{"groupId":"g","memberId":"a"}}' in keys
    target = dict(lines)['{"type":"7","data":{"groupId":"g","memberId":"a"}}']
    topic_id = kafka_uuid(T)
    assert target == '{"version":"0","data":{"topicPartitions":[{"topicId":"' + topic_id + '","partitions":[0,1,2,3,4,5]}]}}'
    current = dict(lines)['{"type":"8","data":{"groupId":"g","memberId":"a"}}']
    assert '"memberEpoch":1' in current and '"state":0' in current
    assert decode_offsets_record(records.tombstone(records.MEMBER_METADATA, "g", "a")[0], None)[1] == "<DELETE>"


protocols = st.lists(st.tuples(names, st.binary(max_size=20)), max_size=3)


@given(names, st.integers(0, 2**31 - 1), protocols)
def test_member_metadata_of_a_classic_member_round_trips(member_id, session_timeout, offered):
    m = ConsumerGroupMember(member_id, client_id="c", client_host="/h", subscribed_topic_names=("t",),
                            rebalance_timeout_ms=30_000,
                            classic=ClassicMemberMetadata(session_timeout, tuple(Protocol(n, b) for n, b in offered)))
    _, value = records.member_metadata_record("g", m)
    assert value is not None
    assert records.decode_member_metadata(member_id, value) == m


def test_classic_member_metadata_is_tagged_field_zero():
    m = ConsumerGroupMember("m", client_id="c", client_host="h", subscribed_topic_names=("t",),
                            rebalance_timeout_ms=30_000, classic=ClassicMemberMetadata(45_000, (Protocol("range", b"x"),)))
    _, value = records.member_metadata_record("g", m)
    assert value is not None
    assert value.endswith(b"\x01"  # one tagged field
                          b"\x00\x0f"  # tag 0, 15 bytes
                          b"\x00\x00\xaf\xc8"  # SessionTimeoutMs 45000
                          b"\x02"  # SupportedProtocols: one
                          b"\x06range\x02x\x00"  # Name, Metadata, no tagged fields
                          b"\x00")  # ClassicMemberMetadata's own tagged fields
    key = records.decode_key(records.member_metadata_record("g", m)[0])
    assert key is not None
    fields = records.value_fields(key, value)
    assert fields["classicMemberMetadata"] == {
        "sessionTimeoutMs": 45_000, "supportedProtocols": [{"name": "range", "metadata": "eA=="}]}
