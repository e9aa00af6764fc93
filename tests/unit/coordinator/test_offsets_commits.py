from kmirror.coordinator.group.admin import delete_groups, describe_group, list_groups
from kmirror.coordinator.offsets.commits import OffsetToCommit, commit_offsets, delete_offsets, fetch_offsets
from kmirror.coordinator.offsets.records import OffsetCommitKey, decode_key, decode_offset_commit_value
from kmirror.protocol.errors import ErrorCode as E
from kmirror.testing.groups import CoreHarness


def commit(h, group="g", generation=-1, member="", offsets=(("t", 0, 10),), metadata="md"):
    rid = h.next_request_id()
    h.run(commit_offsets(
        h.core, rid, group_id=group, generation_id=generation, member_id=member, group_instance_id=None,
        offsets=[OffsetToCommit(t, p, o, 3, metadata) for t, p, o in offsets],
    ))
    return h.responses[rid]


def errors(result):
    return [p.error for p in result.partitions]


def test_simple_commit_creates_empty_group_and_persists_kafka_records():
    h = CoreHarness()
    assert errors(commit(h)) == [E.none]
    key, value = h.log.partitions[0][-1]
    assert decode_key(key) == OffsetCommitKey("g", "t", 0)
    stored = decode_offset_commit_value(value)
    assert (stored.offset, stored.leader_epoch, stored.metadata) == (10, 3, "md")
    fetched = fetch_offsets(h.core, group_id="g", topics=[("t", [0, 1])])
    assert [(o.partition, o.offset, o.leader_epoch, o.metadata) for o in fetched.offsets] == [(0, 10, 3, "md"), (1, -1, -1, "")]


def test_commit_is_not_visible_before_append_completes():
    h = CoreHarness()
    out = commit_offsets(h.core, 1, group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                         offsets=[OffsetToCommit("t", 0, 5, -1, None)])
    assert out.responses == [] and len(out.appends) == 1
    assert fetch_offsets(h.core, group_id="g", topics=None).offsets == ()
    done = h.core.on_append_completed(out.appends[0].ticket, E.none)
    assert errors(done.response_for(1)) == [E.none]
    assert fetch_offsets(h.core, group_id="g", topics=None).offsets[0].offset == 5


def test_failed_append_answers_retriable_error_and_keeps_old_offset():
    h = CoreHarness()
    out = commit_offsets(h.core, 1, group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                         offsets=[OffsetToCommit("t", 0, 5, -1, None)])
    done = h.core.on_append_completed(out.appends[0].ticket, E.not_leader_or_follower)
    assert errors(done.response_for(1)) == [E.not_coordinator]
    assert fetch_offsets(h.core, group_id="g", topics=None).offsets == ()


def test_group_commit_checks_generation_and_member():
    h = CoreHarness()
    m = h.new_member()
    gen = h.core.groups["g"].generation_id
    assert errors(commit(h, generation=gen, member=m)) == [E.rebalance_in_progress]  # CompletingRebalance
    h.sync(m, gen, {m: b"a"})
    assert errors(commit(h, generation=gen, member=m)) == [E.none]
    assert errors(commit(h, generation=gen + 1, member=m)) == [E.illegal_generation]
    assert errors(commit(h, generation=gen, member="x")) == [E.unknown_member_id]
    assert errors(commit(h, generation=-1, member="")) == [E.unknown_member_id]  # simple commit, non-empty group
    assert errors(commit(h, group="new", generation=1, member="m")) == [E.illegal_generation]


def test_metadata_too_large():
    h = CoreHarness(offset_metadata_max_bytes=4)
    assert errors(commit(h, offsets=(("t", 0, 1), ("t", 1, 1)), metadata="12345")) == [E.offset_metadata_too_large] * 2


def test_fetch_all_and_not_coordinator():
    h = CoreHarness()
    commit(h, offsets=(("b", 1, 4), ("a", 0, 2)))
    assert [(o.topic, o.partition) for o in fetch_offsets(h.core, group_id="g", topics=None).offsets] == [("a", 0), ("b", 1)]
    h.core.unload(0)
    assert fetch_offsets(h.core, group_id="g", topics=None).error == E.not_coordinator


def test_load_replays_offsets_and_groups():
    h = CoreHarness()
    m = h.new_member()
    h.sync(m, 1, {m: b"assign"})
    commit(h, generation=1, member=m, offsets=(("t", 0, 42),))
    records = h.log.read_all(0)
    h2 = CoreHarness()
    h2.core.unload(0)
    h2.core.begin_load(0)
    assert fetch_offsets(h2.core, group_id="g", topics=None).error == E.coordinator_load_in_progress
    h2.core.complete_load(0, records)
    assert fetch_offsets(h2.core, group_id="g", topics=None).offsets[0].offset == 42
    described = describe_group(h2.core, "g", missing_is_error=True)
    assert described.state == "Stable" and described.protocol_data == "range"
    assert described.members[0].assignment == b"assign"
    # The loaded member is still on its session clock: a heartbeat keeps it.
    assert h2.core.heartbeat(group_id="g", generation_id=1, member_id=m) == E.none


def test_delete_groups_and_tombstones():
    h = CoreHarness()
    commit(h, group="empty")
    m = h.new_member()
    rid = h.next_request_id()
    h.run(delete_groups(h.core, rid, ["empty", "g", "missing"]))
    assert [(r.group_id, r.error) for r in h.responses[rid].results] == [
        ("empty", E.none), ("g", E.non_empty_group), ("missing", E.group_id_not_found),
    ]
    assert "empty" not in h.core.groups and m
    h2 = CoreHarness()
    h2.core.complete_load(0, h.log.read_all(0))
    assert "empty" not in h2.core.groups


def test_offset_delete():
    h = CoreHarness()
    commit(h, offsets=(("t", 0, 1), ("u", 0, 1)))
    rid = h.next_request_id()
    h.run(delete_offsets(h.core, rid, group_id="g", partitions=[("t", 0)], subscribed_topics=None))
    assert h.responses[rid].error == E.none and h.responses[rid].partitions[0].error == E.none
    assert [o.topic for o in fetch_offsets(h.core, group_id="g", topics=None).offsets] == ["u"]
    rid = h.next_request_id()
    h.run(delete_offsets(h.core, rid, group_id="nope", partitions=[("t", 0)], subscribed_topics=None))
    assert h.responses[rid].error == E.group_id_not_found
    m = h.new_member()
    h.sync(m, 1, {})
    rid = h.next_request_id()
    h.run(delete_offsets(h.core, rid, group_id="g", partitions=[("u", 0), ("v", 0)], subscribed_topics={"u"}))
    assert [p.error for p in h.responses[rid].partitions] == [E.group_subscribed_to_topic, E.none]


def test_list_and_describe():
    h = CoreHarness()
    commit(h, group="simple")
    m = h.new_member()
    listed = list_groups(h.core, [], [])
    assert [(g.group_id, g.state) for g in listed.groups] == [("g", "CompletingRebalance"), ("simple", "Empty")]
    assert [g.group_id for g in list_groups(h.core, ["empty"], []).groups] == ["simple"]
    assert list_groups(h.core, [], ["consumer"]).groups == ()
    assert len(list_groups(h.core, [], ["Classic"]).groups) == 2
    d = describe_group(h.core, "g", missing_is_error=False)
    assert d.state == "CompletingRebalance" and d.protocol_data == "" and d.members[0].member_id == m
    assert d.members[0].metadata == b""
    assert describe_group(h.core, "zz", missing_is_error=False).error == E.none
    assert describe_group(h.core, "zz", missing_is_error=True).error == E.group_id_not_found
