"""The server-side assignors: every subscribed partition to exactly one subscriber, balance,
stickiness (uniform) and co-partitioning (range)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from kmirror.coordinator.consumer_group.assignors import (
    Assignment,
    MemberSubscription,
    RangeAssignor,
    UniformAssignor,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def owners(assignment: Assignment) -> dict[tuple[uuid.UUID, int], list[str]]:
    out: dict[tuple[uuid.UUID, int], list[str]] = {}
    for member, topics in assignment.items():
        for t, ps in topics.items():
            for p in ps:
                out.setdefault((t, p), []).append(member)
    return out


def load(assignment: Assignment, member: str) -> int:
    return sum(len(ps) for ps in assignment.get(member, {}).values())


def test_uniform_three_members_six_partitions_two_each_no_overlap():
    members = [MemberSubscription(m, frozenset({T1})) for m in ("a", "b", "c")]
    result = UniformAssignor().assign(members, {T1: 6}, {})
    assert sorted(owners(result)) == [(T1, p) for p in range(6)]
    assert all(len(v) == 1 for v in owners(result).values())
    assert [load(result, m) for m in "abc"] == [2, 2, 2]


def test_uniform_is_sticky_when_a_member_joins():
    two = [MemberSubscription(m, frozenset({T1})) for m in ("a", "b")]
    before = UniformAssignor().assign(two, {T1: 6}, {})
    after = UniformAssignor().assign([*two, MemberSubscription("c", frozenset({T1}))], {T1: 6}, before)
    assert [load(after, m) for m in "abc"] == [2, 2, 2]
    for m in "ab":  # the old members only lose partitions, never swap them
        assert after[m][T1] <= before[m][T1]


def test_uniform_gives_a_leaving_members_partitions_to_the_others_and_moves_nothing_else():
    three = [MemberSubscription(m, frozenset({T1})) for m in ("a", "b", "c")]
    before = UniformAssignor().assign(three, {T1: 6}, {})
    after = UniformAssignor().assign(three[:2], {T1: 6}, {m: before[m] for m in "ab"})
    assert [load(after, m) for m in "ab"] == [3, 3]
    for m in "ab":
        assert before[m][T1] <= after[m][T1]


def test_uniform_heterogeneous_subscriptions_only_assign_subscribed_topics():
    members = [MemberSubscription("a", frozenset({T1})), MemberSubscription("b", frozenset({T1, T2}))]
    result = UniformAssignor().assign(members, {T1: 2, T2: 2}, {})
    assert T2 not in result["a"]
    assert result["b"][T2] == frozenset({0, 1})
    assert load(result, "a") == 2 and load(result, "b") == 2


def test_range_co_partitions_topics_of_equal_size():
    members = [MemberSubscription(m, frozenset({T1, T2})) for m in ("b", "a")]
    result = RangeAssignor().assign(members, {T1: 3, T2: 3}, {})
    assert result["a"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert result["b"] == {T1: frozenset({2}), T2: frozenset({2})}


@given(
    st.integers(min_value=1, max_value=8),
    st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=3),
    st.sampled_from(["uniform", "range"]),
)
def test_every_partition_goes_to_exactly_one_subscriber_and_homogeneous_groups_balance(n_members, counts, name):
    topics = {uuid.UUID(int=i + 1): c for i, c in enumerate(counts)}
    members = [MemberSubscription(f"m{i}", frozenset(topics)) for i in range(n_members)]
    assignor = UniformAssignor() if name == "uniform" else RangeAssignor()
    result = assignor.assign(members, topics, {})
    found = owners(result)
    assert sorted(found, key=str) == sorted(((t, p) for t, c in topics.items() for p in range(c)), key=str)
    assert all(len(v) == 1 for v in found.values())
    if name == "uniform":
        loads = [load(result, m.member_id) for m in members]
        assert max(loads) - min(loads) <= 1
