"""Model-based test of online migration on the sans-IO core: from a live group of either kind,
random joins, heartbeats, leaves and session expiries of simulated KIP-848 clients and classic
consumers (all eager or all cooperative in one example) in one group, which converts back and
forth between a classic group and a consumer group as they come and go. After every step no partition is owned by two
clients; once time passes with every client heartbeating, the group (of whichever kind) gives
every partition to exactly one live client, balanced to within one partition."""

from __future__ import annotations

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from kmirror.coordinator.consumer_group.messages import HeartbeatRequest
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.consumer_groups import ConsumerGroups

CONSUMERS = ["n0", "n1", "n2"]
CLASSICS = ["c0", "c1", "c2"]
# classic polls (the next step of a join, or a heartbeat) the most, and runs of them until the
# member waits on nothing; consumer members come and go often, so that the group converts back
# and forth
op = st.one_of(
    st.tuples(st.sampled_from(["join", "join", "beat", "beat", "leave", "leave"]), st.sampled_from(CONSUMERS)),
    st.tuples(st.sampled_from(["classic_join", "classic_join", "classic_poll", "classic_poll", "classic_run",
                               "classic_leave"]),
              st.sampled_from(CLASSICS)),
    st.tuples(st.just("advance"), st.integers(1_000, 12_000)),
)


def forget_the_dead(cg: ConsumerGroups) -> None:
    """Clients the coordinator no longer counts as members (their session or rebalance timeout
    passed) are gone: a real one would have lost its partitions with its session. (The model's
    clients read answers only when polled, so one could otherwise wake up after its expiry and
    act on an answer it was given before, as a paused process does.)"""
    consumer = cg.core.consumer_groups.get("g")
    classic = cg.core.groups.get("g")
    members = set(consumer.members) if consumer else set(classic.members) if classic else set()
    for name in [n for n in cg.clients if n not in members]:
        del cg.clients[name]
    for name in [n for n, c in cg.classic.items() if c.member_id and c.member_id not in members]:
        del cg.classic[name]


@settings(max_examples=120, deadline=None)
# a cooperative member's shrunk assignment not yet applied when the group is upgraded: what it
# reported owning stays its own, pending revocation
@example(True, "classic", 1, [("classic_join", "c1"), ("classic_poll", "c1"), ("classic_poll", "c0"),
                              ("classic_poll", "c0"), ("join", "n0")])
# a downgrade then an upgrade before the classic member caught up: the classic group stored what
# it may own, not its target
@example(False, "classic", 1, [("join", "n0"), ("leave", "n0"), ("join", "n0")])
@given(st.booleans(), st.sampled_from(["classic", "consumer"]), st.integers(1, 3), st.lists(op, min_size=10, max_size=60))
def test_a_group_migrating_back_and_forth_never_gives_a_partition_to_two_clients(
    cooperative: bool, start: str, size: int, ops: list[tuple[str, object]]
) -> None:
    cg = ConsumerGroups()
    for i in range(size):  # a live group of one kind to begin with
        if start == "classic":
            cg.add_classic(CLASSICS[i], cooperative=cooperative)
        else:
            cg.join(CONSUMERS[i])
    cg.settle(rounds=8)
    kinds, conversions = [], 0
    for kind, arg in ops:
        name = str(arg)
        if kind == "join" and name not in cg.clients:
            cg.join(name)
        elif kind == "beat" and name in cg.clients:
            if cg.beat(name).error in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch):
                del cg.clients[name]  # the client drops its partitions and would rejoin
        elif kind == "leave" and name in cg.clients:
            cg.send(HeartbeatRequest("g", name, -1))
            del cg.clients[name]
        elif kind == "classic_join" and name not in cg.classic:
            cg.add_classic(name, cooperative=cooperative)
        elif kind == "classic_poll" and name in cg.classic:
            cg.poll_classic(name)
        elif kind == "classic_run" and name in cg.classic:
            for _ in range(4):  # a join's steps as fast as the answers come
                cg.poll_classic(name)
                if cg.classic[name].idle:
                    break
        elif kind == "classic_leave" and name in cg.classic:
            cg.classic.pop(name).leave()
        elif kind == "advance":
            cg.h.advance(int(arg))  # type: ignore[call-overload]
            forget_the_dead(cg)
        cg.check_no_partition_owned_twice()
        group_kind = "consumer" if "g" in cg.core.consumer_groups else "classic" if "g" in cg.core.groups else None
        if group_kind is not None:
            conversions += bool(kinds) and kinds[-1] != group_kind
            kinds.append(group_kind)
    event(f"{min(conversions, 3)}{'+' if conversions > 3 else ''} conversions between the kinds of group")
    # time passes with everyone heartbeating: members the model forgot expire, rebalances end
    for _ in range(120):
        cg.h.advance(1_000)
        forget_the_dead(cg)
        cg.settle(rounds=1)
    if not cg.clients and not cg.classic:
        event("ends with no client")
        return
    event(f"ends as a {'consumer' if 'g' in cg.core.consumer_groups else 'classic'} group of "
          f"{len(cg.clients)} consumer and {len(cg.classic)} classic clients")
    owners = cg.owners()
    assert sorted(owners) == list(range(cg.topics["t"].partitions))
    counts = [sum(1 for o in owners.values() if o == c) for c in [*cg.clients, *cg.classic]]
    assert max(counts) - min(counts) <= 1, owners
