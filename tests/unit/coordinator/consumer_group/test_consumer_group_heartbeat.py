"""ConsumerGroupHeartbeat on the sans-IO core: epochs, reconciliation (revocation before
assignment), leaving, session and revocation timeouts, Kafka's errors."""

from __future__ import annotations

from pathlib import Path

from kmirror.coordinator.consumer_group.heartbeat import heartbeat
from kmirror.coordinator.consumer_group.messages import HeartbeatRequest
from kmirror.coordinator.consumer_group.ports import GroupConfig
from kmirror.coordinator.consumer_group.state import ConsumerGroupState, MemberState, mermaid_diagram
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.consumer_groups import ConsumerGroups, T

E = ErrorCode


def test_first_member_gets_every_partition_at_epoch_one(cg: ConsumerGroups):
    result = cg.join("a")
    assert result.error == E.none
    assert result.member_epoch == 1
    assert result.assignment == {T: frozenset(range(6))}
    assert result.heartbeat_interval_ms == 5000
    assert cg.core.consumer_groups["g"].state is ConsumerGroupState.STABLE


def test_a_partition_moves_only_after_its_owner_revoked_it(cg: ConsumerGroups):
    cg.join("a")
    joined = cg.join("b")
    # b is at the new epoch but gets nothing a still owns
    assert joined.member_epoch == 2
    assert joined.assignment == {}
    b = cg.core.consumer_groups["g"].members["b"]
    assert b.state is MemberState.UNRELEASED_PARTITIONS
    # a is told to revoke three partitions and keeps its epoch until it has
    revoke = cg.beat("a")
    assert revoke.member_epoch == 1
    a = cg.core.consumer_groups["g"].members["a"]
    assert a.state is MemberState.UNREVOKED_PARTITIONS
    assert len(cg.owned_partitions("a")) == 3
    # a's next heartbeat shows the revocation: it moves to epoch 2; then b gets the partitions
    assert cg.beat("a").member_epoch == 2
    assert cg.beat("b").assignment is not None
    assert cg.owned_partitions("a") | cg.owned_partitions("b") == set(range(6))
    assert cg.owned_partitions("a").isdisjoint(cg.owned_partitions("b"))
    assert cg.core.consumer_groups["g"].state is ConsumerGroupState.STABLE


def test_three_members_cover_every_partition_without_overlap(cg: ConsumerGroups):
    for m in ("a", "b", "c"):
        cg.join(m)
    cg.settle()
    parts = [cg.owned_partitions(m) for m in ("a", "b", "c")]
    assert [len(p) for p in parts] == [2, 2, 2]
    assert set().union(*parts) == set(range(6))


def test_leave_releases_partitions_to_the_others(cg: ConsumerGroups):
    for m in ("a", "b", "c"):
        cg.join(m)
    cg.settle()
    epoch_before = cg.core.consumer_groups["g"].group_epoch
    left = cg.send(HeartbeatRequest("g", "c", -1))
    assert (left.error, left.member_epoch) == (E.none, -1)
    del cg.clients["c"]
    assert cg.core.consumer_groups["g"].group_epoch == epoch_before + 1
    cg.settle()
    assert cg.owned_partitions("a") | cg.owned_partitions("b") == set(range(6))
    assert len(cg.owned_partitions("a")) == 3


def test_session_timeout_removes_a_silent_member(cg: ConsumerGroups):
    cg.join("a")
    cg.join("b")
    cg.settle()
    cg.h.advance(30_000)
    cg.beat("a")
    cg.h.advance(20_000)  # b silent for 50 s > group.consumer.session.timeout.ms (45 s)
    assert "b" not in cg.core.consumer_groups["g"].members
    del cg.clients["b"]
    cg.settle()
    assert cg.owned_partitions("a") == set(range(6))


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(cg: ConsumerGroups):
    cg.join("a", rebalance_ms=10_000)
    cg.join("b")
    cg.beat("a")  # told to revoke; never acknowledges
    assert cg.core.consumer_groups["g"].members["a"].state is MemberState.UNREVOKED_PARTITIONS
    cg.h.advance(10_001)
    assert "a" not in cg.core.consumer_groups["g"].members
    assert cg.beat("a").error == E.unknown_member_id
    del cg.clients["a"]
    cg.settle()
    assert cg.owned_partitions("b") == set(range(6))


def test_member_epoch_errors_as_kafka(cg: ConsumerGroups):
    cg.join("a")
    assert cg.send(HeartbeatRequest("g", "a", 5, owned={})).error == E.fenced_member_epoch
    assert cg.send(HeartbeatRequest("g", "zz", 1, owned={})).error == E.unknown_member_id
    assert cg.send(HeartbeatRequest("nope", "a", 1, owned={})).error == E.unknown_member_id
    # a member may repeat its previous epoch when its last response was lost
    cg.join("b")
    cg.beat("a")
    cg.beat("a")
    a = cg.core.consumer_groups["g"].members["a"]
    assert a.member_epoch == 2 and a.previous_member_epoch == 1
    owned = {T: a.assigned[T]}
    assert cg.send(HeartbeatRequest("g", "a", 1, owned=owned)).error == E.none
    assert cg.send(HeartbeatRequest("g", "a", 1, owned={T: frozenset(range(6))})).error == E.fenced_member_epoch


def test_invalid_requests_are_refused_with_kafkas_codes(cg: ConsumerGroups):
    def err(**kw: object) -> ErrorCode:
        base: dict[str, object] = {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                   "rebalance_timeout_ms": 1000, "subscribed_topic_names": ("t",)}
        base.update(kw)
        return cg.send(HeartbeatRequest(**base)).error  # type: ignore[arg-type]

    assert err(group_id="") == E.invalid_request
    assert err(member_id="") == E.invalid_request
    assert err(rebalance_timeout_ms=-1) == E.invalid_request
    assert err(subscribed_topic_names=None) == E.invalid_request
    assert err(member_epoch=-2) == E.invalid_request
    assert err(server_assignor="sticky") == E.unsupported_assignor
    assert err(subscribed_topic_names=None, subscribed_topic_regex="(") == E.invalid_regular_expression
    assert "g" not in cg.core.consumer_groups


def test_range_assignor_named_by_the_member(cg: ConsumerGroups):
    cg.join("a", server_assignor="range")
    cg.join("b", server_assignor="range")
    cg.settle()
    assert cg.owned_partitions("a") == {0, 1, 2}
    assert cg.owned_partitions("b") == {3, 4, 5}
    assert cg.core.consumer_groups["g"].assignor_name == "range"


def test_regex_subscription_matches_topics_in_full(cg: ConsumerGroups):
    cg.topics = {"t": cg.topics["t"], "other": type(cg.topics["t"])(T.__class__(int=9), 2)}
    result = cg.join("a", topics=(), subscribed_topic_regex="t.*")
    assert result.assignment == {T: frozenset(range(6))}


def test_a_new_topic_partition_bumps_the_group_epoch(cg: ConsumerGroups):
    cg.join("a")
    epoch = cg.core.consumer_groups["g"].group_epoch
    cg.topics = {"t": type(cg.topics["t"])(T, 8)}
    result = cg.beat("a")
    assert cg.core.consumer_groups["g"].group_epoch == epoch + 1
    assert result.assignment == {T: frozenset(range(8))}


def test_static_member_leaving_with_minus_two_gets_its_partitions_back(cg: ConsumerGroups):
    cg.join("a", instance_id="i-a")
    cg.join("b", instance_id="i-b")
    cg.settle()
    before = cg.owned_partitions("a")
    left = cg.send(HeartbeatRequest("g", "a", -2, instance_id="i-a"))
    assert (left.error, left.member_epoch) == (E.none, -2)
    # the same instance comes back with a new member id before its session ends
    del cg.clients["a"]
    back = cg.join("a2", instance_id="i-a")
    assert back.error == E.none
    assert set(back.assignment[T]) == before  # type: ignore[index]
    assert cg.owned_partitions("b").isdisjoint(before)
    # an instance id still held by an active member is refused
    assert cg.join("a3", instance_id="i-b").error == E.unreleased_instance_id


def test_group_configs_override_the_broker_session_timeout_and_heartbeat_interval(cg: ConsumerGroups):
    rid = cg.h.next_request_id()
    req = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned={})
    cg.h.run(heartbeat(cg.core, rid, req, cg.topics, GroupConfig(session_timeout_ms=50_000,
                                                                  heartbeat_interval_ms=7_000)))
    assert cg.h.responses[rid].heartbeat_interval_ms == 7_000
    cg.h.advance(46_000)  # past the broker's 45 s, within the group's 50 s
    assert "a" in cg.core.consumer_groups["g"].members
    cg.h.advance(5_000)
    assert "a" not in cg.core.consumer_groups["g"].members


def test_the_design_doc_carries_the_member_state_table():
    doc = (Path(__file__).parents[4] / "docs" / "design" / "consumer-groups.md").read_text()
    assert f"```mermaid\n{mermaid_diagram()}```" in doc, "regenerate docs/design/consumer-groups.md"
