"""Committed-offset expiration in the sans-IO core, on a manual clock (KIP-211 as Kafka 4's
group coordinator runs it: `kmirror.coordinator.offsets.expiration`), and the offsets of
deleted topics, which leave every group at once, tombstoned (Kafka `onPartitionsDeleted`:
`kmirror.coordinator.offsets.deleted_topics`), so that a topic re-created under the same name
does not resume at the old one's positions."""

from __future__ import annotations

from kmirror.coordinator.consumer_group.messages import LEAVE_EPOCH, HeartbeatRequest
from kmirror.coordinator.group.admin import list_groups
from kmirror.coordinator.group.coordinator import GroupCoordinator
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.offsets.commits import OffsetToCommit, commit_offsets, delete_offsets, fetch_offsets
from kmirror.coordinator.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_key,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from kmirror.coordinator.offsets.txn_commits import replay_end_transaction_marker, txn_commit_offsets
from kmirror.ports import ManualClock
from kmirror.protocol.consumer_protocol import (
    ConsumerSubscription,
    encode_subscription,
)
from kmirror.protocol.errors import ErrorCode as E
from kmirror.testing.consumer_groups import ConsumerGroups
from kmirror.testing.groups import CoreHarness

RETENTION_MS = 60_000  # offsets.retention.minutes=1
EVERY_ADVANCE_CHECKS = {"offsets_retention_minutes": 1, "offsets_retention_check_interval_ms": 1}
LONG_SESSION_MS = 1_000_000


def harness(**config):
    return CoreHarness(**{**EVERY_ADVANCE_CHECKS, **config})


def commit(h, group="g", offsets=(("t", 0, 10),), generation=-1, member="", retention_time_ms=-1):
    rid = h.next_request_id()
    h.run(commit_offsets(h.core, rid, group_id=group, generation_id=generation, member_id=member,
                         group_instance_id=None, offsets=[OffsetToCommit(t, p, o, -1, None) for t, p, o in offsets],
                         retention_time_ms=retention_time_ms))
    assert [p.error for p in h.responses[rid].partitions] == [E.none] * len(offsets)


def committed(core, group="g"):
    return {(o.topic, o.partition): o.offset for o in fetch_offsets(core, group_id=group, topics=None).offsets}


def listed(core):
    return [g.group_id for g in list_groups(core, [], []).groups]


def tombstones(h, since=0):
    """The tombstones appended from record `since` on: offset keys as (group, topic, partition),
    group metadata keys as the group id."""
    out = []
    for key, value in h.log.partitions[0][since:]:
        if value is None:
            k = decode_key(key)
            out.append((k.group, k.topic, k.partition) if isinstance(k, OffsetCommitKey) else k.group)
    return out


def consumer_member(h, topics=("t",), group="g"):
    """A classic `consumer` protocol member subscribed to `topics`, Stable in its generation."""
    metadata = encode_subscription(ConsumerSubscription(0, tuple(topics)))
    member = h.new_member(group=group, metadata=metadata, session_ms=LONG_SESSION_MS)
    generation = h.core.groups[group].generation_id
    h.sync(member, generation, {member: b""}, group=group)
    assert h.core.groups[group].is_in(GroupState.STABLE)
    return member, generation


def test_an_empty_classic_groups_offsets_expire_retention_after_it_became_empty_not_before():
    h = harness()
    member, generation = consumer_member(h)
    commit(h, generation=generation, member=member)
    h.advance(50_000)
    h.leave(member)
    assert h.core.groups["g"].is_in(GroupState.EMPTY)
    emptied_at = h.clock.now_ms()
    h.advance(RETENTION_MS - 1)  # the commit is older than the retention; the emptiness is not
    assert committed(h.core) == {("t", 0): 10} and listed(h.core) == ["g"]
    mark = len(h.log.partitions[0])
    h.advance(1)
    assert h.clock.now_ms() - emptied_at == RETENTION_MS
    assert committed(h.core) == {} and listed(h.core) == []
    assert tombstones(h, mark) == [("g", "t", 0), "g"]


def test_a_stable_consumer_protocol_group_keeps_subscribed_topics_and_loses_the_others():
    h = harness()
    member, generation = consumer_member(h, topics=("t",))
    commit(h, generation=generation, member=member, offsets=(("t", 0, 10), ("old", 0, 3)))
    h.advance(RETENTION_MS - 1)
    assert committed(h.core) == {("t", 0): 10, ("old", 0): 3}
    mark = len(h.log.partitions[0])
    h.advance(1)
    assert committed(h.core) == {("t", 0): 10}
    assert tombstones(h, mark) == [("g", "old", 0)]  # the group has members: it stays
    h.advance(10 * RETENTION_MS)
    assert committed(h.core) == {("t", 0): 10} and h.core.groups["g"].is_in(GroupState.STABLE)


def test_a_rebalancing_classic_group_keeps_every_offset():
    h = harness()
    member, generation = consumer_member(h, topics=("t",))
    commit(h, generation=generation, member=member, offsets=(("t", 0, 10), ("old", 0, 3)))
    h.join(member, metadata=encode_subscription(ConsumerSubscription(0, ("t", "u"))), session_ms=LONG_SESSION_MS,
           rebalance_ms=10 * RETENTION_MS)
    h.join(group="g", require_known=False, session_ms=LONG_SESSION_MS, rebalance_ms=10 * RETENTION_MS)
    assert h.core.groups["g"].is_in(GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
    commit(h, group="control", offsets=(("old", 0, 3),))
    h.advance(2 * RETENTION_MS)
    assert committed(h.core) == {("t", 0): 10, ("old", 0): 3}
    assert committed(h.core, "control") == {}  # the checks ran


def test_a_group_whose_subscriptions_cannot_be_read_keeps_every_offset():
    h = harness()
    member = h.new_member(metadata=b"\xff", session_ms=LONG_SESSION_MS)  # not the consumer protocol
    h.sync(member, h.core.groups["g"].generation_id, {member: b""})
    commit(h, generation=h.core.groups["g"].generation_id, member=member, offsets=(("old", 0, 3),))
    commit(h, group="control", offsets=(("old", 0, 3),))
    h.advance(2 * RETENTION_MS)
    assert committed(h.core) == {("old", 0): 3}
    assert committed(h.core, "control") == {}  # the checks ran


def test_a_standalone_committers_offsets_expire_by_commit_time():
    h = harness()
    commit(h, offsets=(("t", 0, 1),))
    h.advance(30_000)
    commit(h, offsets=(("t", 1, 2),))
    h.advance(RETENTION_MS - 30_000)
    assert committed(h.core) == {("t", 1): 2} and listed(h.core) == ["g"]
    h.advance(30_000 - 1)
    assert committed(h.core) == {("t", 1): 2}
    h.advance(1)
    assert committed(h.core) == {} and listed(h.core) == []
    assert tombstones(h) == [("g", "t", 0), ("g", "t", 1), "g"]


def test_an_explicit_retention_time_of_an_old_offset_commit_decides_instead():
    h = harness()
    commit(h, offsets=(("t", 0, 1),), retention_time_ms=5_000)
    commit(h, group="other", offsets=(("t", 0, 1),))
    h.advance(4_999)
    assert committed(h.core) == {("t", 0): 1}
    h.advance(1)
    assert committed(h.core) == {} and committed(h.core, "other") == {("t", 0): 1}


def test_offsets_expire_only_when_a_check_runs():
    h = harness(offsets_retention_check_interval_ms=30_000)
    assert h.core.next_deadline_ms() == 30_000
    h.advance(1_000)
    commit(h)
    h.advance(59_000)  # a check at 60 s: the commit is 59 s old
    assert committed(h.core) == {("t", 0): 10} and h.core.next_deadline_ms() == 90_000
    h.advance(1_000)  # old enough, but no check until 90 s
    assert committed(h.core) == {("t", 0): 10}
    h.advance(29_000)
    assert committed(h.core) == {}
    h.run(h.core.unload(0))
    assert h.core.next_deadline_ms() is None


def test_an_empty_group_without_offsets_is_deleted_at_the_next_check():
    h = harness(offsets_retention_check_interval_ms=1_000)
    member, _ = consumer_member(h)
    h.leave(member)
    h.advance(1_000)
    assert listed(h.core) == [] and tombstones(h) == ["g"]


def test_pending_transactional_offsets_do_not_expire_and_keep_the_group():
    h = harness()
    commit(h, offsets=(("t", 0, 1), ("t", 1, 1)))
    rid = h.next_request_id()
    h.run(txn_commit_offsets(h.core, rid, group_id="g", producer_id=7, producer_epoch=0, generation_id=-1,
                             member_id="", group_instance_id=None, offsets=[OffsetToCommit("t", 0, 5, -1, None)]))
    assert [p.error for p in h.responses[rid].partitions] == [E.none]
    h.advance(RETENTION_MS)
    assert committed(h.core) == {("t", 0): 1} and listed(h.core) == ["g"]
    replay_end_transaction_marker(h.core, 0, producer_id=7, committed=False)
    h.advance(1)
    assert committed(h.core) == {} and listed(h.core) == []


def test_a_consumer_group_keeps_subscribed_topics_and_goes_once_empty_and_expired():
    cg = ConsumerGroups(**EVERY_ADVANCE_CHECKS, group_consumer_session_timeout_ms=LONG_SESSION_MS)
    cg.join("a", topics=("t",))
    cg.settle()
    commit(cg.h, generation=cg.clients["a"].epoch, member="a", offsets=(("t", 0, 4), ("gone", 0, 2)))
    cg.h.advance(RETENTION_MS - 1)
    assert committed(cg.core) == {("t", 0): 4, ("gone", 0): 2}
    cg.h.advance(1)
    assert committed(cg.core) == {("t", 0): 4} and "g" in cg.core.consumer_groups
    cg.h.advance(10 * RETENTION_MS)
    assert committed(cg.core) == {("t", 0): 4}
    assert cg.send(HeartbeatRequest("g", "a", LEAVE_EPOCH)).error == E.none
    assert cg.core.consumer_groups["g"].is_empty
    mark = len(cg.h.log.partitions[0])
    cg.h.advance(1)  # the commit is long past the retention: it goes, and the empty group with it
    assert committed(cg.core) == {} and listed(cg.core) == []
    written = cg.h.log.partitions[0][mark:]
    assert decode_key(written[0][0]) == OffsetCommitKey("g", "t", 0)
    assert len(written) > 1 and all(value is None for _, value in written)


def test_a_consumer_group_that_never_committed_goes_at_the_first_check_once_empty():
    cg = ConsumerGroups(**EVERY_ADVANCE_CHECKS, group_consumer_session_timeout_ms=LONG_SESSION_MS)
    cg.join("a", topics=("t",))
    cg.settle()
    cg.h.advance(1)
    assert "g" in cg.core.consumer_groups  # a member: it stays
    assert cg.send(HeartbeatRequest("g", "a", LEAVE_EPOCH)).error == E.none
    mark = len(cg.h.log.partitions[0])
    cg.h.advance(1)
    assert listed(cg.core) == [] and "g" not in cg.core.consumer_groups
    assert all(value is None for _, value in cg.h.log.partitions[0][mark:])  # its records tombstoned


def test_a_consumer_group_keeps_the_offsets_of_topics_its_regex_matches():
    cg = ConsumerGroups(**EVERY_ADVANCE_CHECKS, group_consumer_session_timeout_ms=LONG_SESSION_MS)
    cg.join("a", topics=(), subscribed_topic_regex="t.*")
    commit(cg.h, generation=cg.clients["a"].epoch, member="a", offsets=(("t", 0, 4), ("gone", 0, 2)))
    cg.h.advance(RETENTION_MS)
    assert committed(cg.core) == {("t", 0): 4}


def reload(h):
    """A coordinator that loads the partition from the log, on a clock at the same time."""
    clock = ManualClock(h.clock.now_ms())
    core = GroupCoordinator(h.config, clock, lambda: "x", lambda: h.topics)
    core.begin_load(0)
    core.complete_load(0, h.log.read_all(0))
    return core, clock


def check(core, clock, ms):
    clock.advance(ms)
    return core.poll(clock.monotonic_ms())


def test_a_reloaded_coordinator_expires_the_same_offsets_at_the_same_times():
    h = harness()
    member, generation = consumer_member(h, group="cg")
    commit(h, group="cg", generation=generation, member=member)
    commit(h, group="sa", offsets=(("t", 0, 1),), retention_time_ms=10 * RETENTION_MS)
    commit(h, group="sa", offsets=(("t", 1, 2),))
    h.advance(30_000)
    h.leave(member, group="cg")
    h.advance(1)
    core, clock = reload(h)
    assert core.groups["cg"].is_in(GroupState.EMPTY)
    steps = [RETENTION_MS - 30_001 - 1, 1, 30_000 - 1, 1, 10 * RETENTION_MS]
    seen = []
    for step in steps:
        h.advance(step)
        check(core, clock, step)
        assert committed(core, "cg") == committed(h.core, "cg") and committed(core, "sa") == committed(h.core, "sa")
        assert listed(core) == listed(h.core)
        seen.append((sorted(committed(core, "cg")), sorted(committed(core, "sa")), listed(core)))
    assert seen == [
        ([("t", 0)], [("t", 0), ("t", 1)], ["cg", "sa"]),
        ([("t", 0)], [("t", 0)], ["cg", "sa"]),  # sa's t-1: its commit is RETENTION_MS old
        ([("t", 0)], [("t", 0)], ["cg", "sa"]),
        ([], [("t", 0)], ["sa"]),  # cg: RETENTION_MS after it became Empty
        ([], [], []),  # sa's t-0 at its own expire timestamp
    ]


def test_a_group_stored_without_a_state_timestamp_expires_from_its_commits():
    h = harness()
    commit(h, offsets=(("t", 0, 1),))
    value = GroupMetadataValue("consumer", 3, None, None, -1, ())  # what a value before v2 decodes to
    h.log.partitions[0].append((encode_group_metadata_key(GroupMetadataKey("g")), encode_group_metadata_value(value)))
    h.clock.advance(RETENTION_MS - 2)
    core, clock = reload(h)
    assert core.groups["g"].protocol_type == "consumer" and core.groups["g"].is_in(GroupState.EMPTY)
    check(core, clock, 1)
    assert committed(core) == {("t", 0): 1}
    out = check(core, clock, 1)
    assert committed(core) == {} and listed(core) == [] and len(out.appends) == 1


# ---- deleted topics ---------------------------------------------------------------------

def test_every_groups_offsets_of_a_deleted_topic_are_tombstoned_and_the_others_kept():
    h = harness()
    commit(h, group="a", offsets=(("gone", 0, 10), ("gone", 1, 12), ("kept", 0, 3)))
    commit(h, group="b", offsets=(("gone", 0, 7),))
    mark = len(h.log.partitions[0])
    h.run(h.core.on_topics_deleted({"gone"}))
    assert committed(h.core, "a") == {("kept", 0): 3}
    assert committed(h.core, "b") == {}
    assert sorted(tombstones(h, mark)) == [("a", "gone", 0), ("a", "gone", 1), ("b", "gone", 0)]
    assert listed(h.core) == ["a", "b"]  # a group without offsets stays until expiration
    mark = len(h.log.partitions[0])
    h.run(h.core.on_topics_deleted({"never-committed"}))
    assert tombstones(h, mark) == []


def test_a_consumer_groups_offsets_go_too():
    cg = ConsumerGroups(**EVERY_ADVANCE_CHECKS)
    cg.join("m", topics=("gone",))
    cg.settle()
    commit(cg.h, generation=cg.clients["m"].epoch, member="m", offsets=(("gone", 0, 4), ("kept", 0, 2)))
    cg.h.run(cg.core.on_topics_deleted({"gone"}))
    assert committed(cg.core) == {("kept", 0): 2}


def txn_commit(h, offsets, group="g", producer_id=7):
    rid = h.next_request_id()
    h.run(txn_commit_offsets(h.core, rid, group_id=group, producer_id=producer_id, producer_epoch=0,
                             generation_id=-1, member_id="", group_instance_id=None,
                             offsets=[OffsetToCommit(t, p, o, -1, None) for t, p, o in offsets]))
    assert [p.error for p in h.responses[rid].partitions] == [E.none] * len(offsets)


def test_a_transaction_committed_after_the_deletion_does_not_bring_its_offsets_back():
    h = harness()
    txn_commit(h, [("gone", 0, 5), ("kept", 0, 6)])
    mark = len(h.log.partitions.get(0, []))
    h.run(h.core.on_topics_deleted({"gone"}))
    assert tombstones(h, mark) == [("g", "gone", 0)]  # written for a pending offset too, as Kafka does
    replay_end_transaction_marker(h.core, 0, producer_id=7, committed=True)
    h.log.end_transaction(0, 7, committed=True)
    assert committed(h.core) == {("kept", 0): 6}
    core, _ = reload(h)  # the tombstone precedes the COMMIT marker in the log and still wins
    assert committed(core) == {("kept", 0): 6}


def test_an_offset_delete_of_a_pending_transactional_offset_outlives_the_transactions_commit():
    h = harness()
    commit(h, offsets=(("t", 1, 3),))
    txn_commit(h, [("t", 0, 5)])
    mark = len(h.log.partitions[0])
    rid = h.next_request_id()
    h.run(delete_offsets(h.core, rid, group_id="g", partitions=[("t", 0)], subscribed_topics=None))
    assert h.responses[rid].error == E.none
    assert tombstones(h, mark) == [("g", "t", 0)]
    replay_end_transaction_marker(h.core, 0, producer_id=7, committed=True)
    h.log.end_transaction(0, 7, committed=True)
    assert committed(h.core) == {("t", 1): 3}
    core, _ = reload(h)
    assert committed(core) == {("t", 1): 3}


def test_only_loaded_partitions_are_touched():
    h = harness(offsets_topic_num_partitions=2)
    commit(h, group="a", offsets=(("gone", 0, 1),))
    partition = h.core.partition_for("a")
    h.core.begin_load(partition)  # moving: not this coordinator's to write now
    out = h.core.on_topics_deleted({"gone"})
    assert out.appends == []
