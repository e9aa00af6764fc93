from uuid import UUID

import pytest

from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.coordinator.coordinator import ManagedAclsResult, MirrorCoordinator, StateWrite
from kmirror.mirror.coordinator.records import (
    ManagedAclsKey,
    ManagedAclsValue,
    MirrorPartitionKey,
    MirrorPartitionStateValue,
)
from kmirror.protocol.errors import ErrorCode

S = MirrorPartitionState
E = ErrorCode
TOPIC = UUID("5b1b0c6e-0f3c-4d8c-9d0a-6a3d3f0b9e11")


def key(p=0, mirror="m", topic=TOPIC):
    return MirrorPartitionKey(mirror, topic, p)


def loaded(*keys, records=()):
    c = MirrorCoordinator(num_partitions=5)
    for p in {c.partition_for(k) for k in keys} | {c.partition_for(k) for k, _ in records}:
        c.begin_load(p)
        c.complete_load(p, [r for r in records if c.partition_for(r[0]) == p])
    return c


def write(c, rid, *writes):
    out = c.write_states(rid, [StateWrite(k, "t", s, lme) for k, s, lme in writes])
    for append in out.appends:
        out.extend(c.on_append_completed(append.ticket))
    return out.response_for(rid)


def read(c, *keys):
    return c.read_states(99, list(keys)).response_for(99).partitions


def test_not_coordinator_and_loading():
    c = MirrorCoordinator(5)
    assert read(c, key())[0].error is E.not_coordinator
    c.begin_load(c.partition_for(key()))
    assert read(c, key())[0].error is E.coordinator_load_in_progress
    c.complete_load(c.partition_for(key()), [])
    r = read(c, key())[0]
    assert (r.error, r.state, r.last_mirrored_epoch) == (E.none, S.UNKNOWN, -1)
    c.shutdown()
    assert read(c, key())[0].error is E.coordinator_not_available


def test_load_replays_last_value_and_tombstones():
    k0, k1 = key(0), key(1)
    c = loaded(k0, k1, records=[
        (k0, MirrorPartitionStateValue("t", S.PREPARING)),
        (k0, MirrorPartitionStateValue("t", S.MIRRORING)),
        (k1, MirrorPartitionStateValue("t", S.STOPPED, 4)),
        (k1, None),
    ])
    assert [(r.state, r.last_mirrored_epoch) for r in read(c, k0, k1)] == [(S.MIRRORING, -1), (S.UNKNOWN, -1)]


def test_load_rejects_a_record_of_another_partition():
    c = MirrorCoordinator(5)
    wrong = (c.partition_for(key()) + 1) % 5
    with pytest.raises(ValueError):
        c.complete_load(wrong, [(key(), MirrorPartitionStateValue("t", S.PREPARING))])


def test_write_lifecycle_and_lme():
    c = loaded(key())
    for state, lme in [(S.PREPARING, -1), (S.MIRRORING, -1), (S.STOPPING, -1), (S.STOPPED, 7)]:
        assert write(c, 1, (key(), state, lme)).partitions[0].error is E.none
    assert (read(c, key())[0].state, read(c, key())[0].last_mirrored_epoch) == (S.STOPPED, 7)
    # restart keeps the stored LME when the write says -1 ("not available")
    write(c, 2, (key(), S.PREPARING, -1))
    assert read(c, key())[0].last_mirrored_epoch == 7


@pytest.mark.parametrize(("current", "target"), [
    (S.UNKNOWN, S.MIRRORING), (S.MIRRORING, S.STOPPED), (S.PAUSED, S.PAUSING), (S.FAILED, S.PREPARING),
    (S.MIRRORING, S.UNKNOWN),
])
def test_illegal_write_is_refused_as_a_value(current, target):
    records = [] if current is S.UNKNOWN else [(key(), MirrorPartitionStateValue("t", current))]
    c = loaded(key(), records=records)
    out = c.write_states(1, [StateWrite(key(), "t", target)])
    assert not out.appends
    result = out.response_for(1).partitions[0]
    assert result.error is E.invalid_request and result.state is current
    assert read(c, key())[0].state is current


def test_rewriting_the_current_state_is_idempotent():
    c = loaded(key(), records=[(key(), MirrorPartitionStateValue("t", S.MIRRORING))])
    assert write(c, 1, (key(), S.MIRRORING, -1)).partitions[0].error is E.none


def test_write_is_visible_only_once_persisted_and_validates_against_pending():
    c = loaded(key())
    out = c.write_states(1, [StateWrite(key(), "t", S.PREPARING)])
    assert out.response_for(1) is None and len(out.appends) == 1
    assert read(c, key())[0].state is S.UNKNOWN
    # a second write while the first is in flight sees PREPARING
    out2 = c.write_states(2, [StateWrite(key(), "t", S.MIRRORING)])
    assert len(out2.appends) == 1
    assert c.on_append_completed(out.appends[0].ticket).response_for(1).partitions[0].error is E.none
    assert c.on_append_completed(out2.appends[0].ticket).response_for(2).partitions[0].error is E.none
    assert read(c, key())[0].state is S.MIRRORING


def test_validation_sees_the_latest_append_in_flight_and_falls_back_when_it_fails():
    c = loaded(key())
    first = c.write_states(1, [StateWrite(key(), "t", S.PREPARING)])
    second = c.write_states(2, [StateWrite(key(), "t", S.MIRRORING)])
    c.on_append_completed(first.appends[0].ticket)  # persisted; MIRRORING still in flight
    illegal = c.write_states(3, [StateWrite(key(), "t", S.PAUSED)])  # MIRRORING -> PAUSED
    assert illegal.response_for(3).partitions[0].state is S.MIRRORING
    assert illegal.response_for(3).partitions[0].error is E.invalid_request
    third = c.write_states(4, [StateWrite(key(), "t", S.STOPPING)])  # from MIRRORING, in flight
    assert c.on_append_completed(third.appends[0].ticket, E.not_leader_or_follower).response_for(4)
    # STOPPING failed: MIRRORING (still in flight) is what the next write is checked against
    assert c.write_states(5, [StateWrite(key(), "t", S.STOPPED)]).response_for(5).partitions[0].error \
        is E.invalid_request
    assert c.on_append_completed(second.appends[0].ticket).response_for(2).partitions[0].error is E.none
    assert read(c, key())[0].state is S.MIRRORING


def test_failed_append_answers_its_error_and_is_forgotten():
    c = loaded(key())
    out = c.write_states(1, [StateWrite(key(), "t", S.PREPARING)])
    answer = c.on_append_completed(out.appends[0].ticket, E.not_leader_or_follower).response_for(1)
    assert answer.partitions[0].error is E.not_leader_or_follower
    assert read(c, key())[0].state is S.UNKNOWN
    assert not c.on_append_completed(out.appends[0].ticket).responses  # reported twice: ignored


def test_write_spanning_coordinator_partitions_waits_for_every_append():
    keys = [key(p) for p in range(20)]
    c = loaded(*keys)
    out = c.write_states(1, [StateWrite(k, "t", S.PREPARING) for k in keys])
    partitions = {c.partition_for(k) for k in keys}
    assert len(out.appends) == len(partitions) > 1
    for append in out.appends[:-1]:
        assert c.on_append_completed(append.ticket).response_for(1) is None
    result = c.on_append_completed(out.appends[-1].ticket).response_for(1)
    assert [r.key for r in result.partitions] == keys and all(r.error is E.none for r in result.partitions)


def test_unload_drops_state_and_fails_waiters():
    c = loaded(key())
    write(c, 1, (key(), S.PREPARING, -1))
    out = c.write_states(2, [StateWrite(key(), "t", S.MIRRORING)])
    unloaded = c.unload(c.partition_for(key()))
    assert unloaded.response_for(2).partitions[0].error is E.not_coordinator
    assert read(c, key())[0].error is E.not_coordinator
    assert c.state_of(key()) is None
    assert not c.on_append_completed(out.appends[0].ticket).responses


def test_writing_unknown_clears_only_that_failed_partition_and_is_idempotent():
    failed, sibling = key(0), key(1)
    c = loaded(failed, sibling, records=[(failed, MirrorPartitionStateValue("t", S.FAILED, 4)),
                                         (sibling, MirrorPartitionStateValue("t", S.STOPPING, 4))])
    out = c.write_states(1, [StateWrite(failed, "t", S.UNKNOWN)])
    assert [r for a in out.appends for r in a.records] == [(failed, None)]
    for a in out.appends:
        out.extend(c.on_append_completed(a.ticket))
    assert out.response_for(1).partitions[0].error is E.none
    assert [(r.state, r.last_mirrored_epoch) for r in read(c, failed, sibling)] == [(S.UNKNOWN, -1), (S.STOPPING, 4)]
    assert write(c, 2, (failed, S.UNKNOWN, -1)).partitions[0].error is E.none  # a retried clear
    assert write(c, 3, (sibling, S.STOPPED, -1)).partitions[0].error is E.none  # the sibling goes on


def test_remove_topics_and_delete_mirror_tombstone():
    other_topic = UUID(int=7)
    keys = [key(0), key(1), key(0, topic=other_topic), key(0, mirror="n")]
    c = loaded(*keys)
    for k in keys:
        write(c, 1, (k, S.PREPARING, -1))
    out = c.remove_topics(2, "m", [TOPIC])
    assert sorted(k for a in out.appends for k, v in a.records if v is None) == [key(0), key(1)]
    for a in out.appends:
        out.extend(c.on_append_completed(a.ticket))
    assert [r.state for r in read(c, *keys)] == [S.UNKNOWN, S.UNKNOWN, S.PREPARING, S.PREPARING]
    out = c.delete_mirror(3, "m")
    for a in out.appends:
        out.extend(c.on_append_completed(a.ticket))
    assert [r.state for r in read(c, *keys)] == [S.UNKNOWN, S.UNKNOWN, S.UNKNOWN, S.PREPARING]
    assert c.delete_mirror(4, "absent").response_for(4).partitions == ()


def test_last_mirrored_epoch_for_describe_mirrors():
    c = loaded(key(), records=[(key(), MirrorPartitionStateValue("t", S.STOPPED, 3))])
    assert c.last_mirrored_epoch(key()) == 3
    same = next(key(p) for p in range(1, 100) if c.partition_for(key(p)) == c.partition_for(key()))
    other = next(key(p) for p in range(1, 100) if c.partition_for(key(p)) != c.partition_for(key()))
    assert c.last_mirrored_epoch(same) == -1
    assert c.last_mirrored_epoch(other) is E.not_coordinator
    assert MirrorCoordinator(5).last_mirrored_epoch(key()) is E.not_coordinator



def test_managed_acls_are_persisted_replayed_and_tombstoned_with_the_mirror():
    entry = (2, "orders", 3, "User:alice", "*", 3, 3)
    c = MirrorCoordinator(4)
    acls_key = ManagedAclsKey("m")
    partition = c.partition_for(acls_key)
    assert c.managed_acls("m") is ErrorCode.not_coordinator
    c.begin_load(partition)
    assert c.managed_acls("m") is ErrorCode.coordinator_load_in_progress
    c.complete_load(partition, [(acls_key, ManagedAclsValue(frozenset({entry})))])
    assert c.managed_acls("m") == frozenset({entry}) and c.managed_acls("other") in (None, ErrorCode.not_coordinator)

    out = c.write_managed_acls(7, "m", frozenset())
    assert out.responses == [] and c.managed_acls("m") == frozenset({entry})  # visible once persisted
    [append] = out.appends
    assert (append.partition, append.records) == (partition, [(acls_key, ManagedAclsValue(frozenset()))])
    assert c.on_append_completed(append.ticket).responses == [(7, ManagedAclsResult(ErrorCode.none))]
    assert c.managed_acls("m") == frozenset()

    failed = c.write_managed_acls(8, "m", frozenset({entry})).appends[0]
    assert c.on_append_completed(failed.ticket, ErrorCode.not_leader_or_follower).responses == [
        (8, ManagedAclsResult(ErrorCode.not_leader_or_follower))]
    assert c.managed_acls("m") == frozenset()

    [tombstone] = c.delete_mirror(9, "m").appends
    assert tombstone.records == [(acls_key, None)]
    c.on_append_completed(tombstone.ticket)
    assert c.managed_acls("m") is None
    c.unload(partition)
    assert c.managed_acls("m") is ErrorCode.not_coordinator
