"""The voter core's rules once elected (KIP-595): the commit rule of a new leader, divergence,
the fetch and check-quorum timers, resignation and the transition table."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kmirror.quorum.election_state import NO_VOTER, ElectionState
from kmirror.quorum.state import (
    TRANSITIONS,
    Actions,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    FetchDiverging,
    FetchRefused,
    FetchValid,
    IllegalQuorumTransition,
    Quorum,
    VoteAnswer,
    VoteRequest,
)
from kmirror.testing.quorum_voters import (
    CHECK_QUORUM_MS,
    ELECTION_MS,
    FETCH_MS,
    MemoryLog,
    elect,
    stand,
    voter,
)


def test_the_high_watermark_moves_only_once_a_record_of_the_leaders_epoch_is_on_a_majority() -> None:
    """Raft figure 8: a leader re-elected in epoch 4 replicates an epoch-2 record to a majority;
    that record may still be overwritten (a voter with epoch 3 can win), so nothing commits
    until the leader's own epoch-4 record is on a majority."""
    one, log = voter(1, epochs=[1, 2], stored=ElectionState(3))
    two, _ = voter(2, epochs=[1], stored=ElectionState(3))
    elect(one, [two], ELECTION_MS)
    assert one.epoch == 4 and one.high_watermark == 0

    assert one.handle_fetch(2, 4, 1, 1, ELECTION_MS + 10) == (FetchValid(0), False)
    assert one.handle_fetch(2, 4, 2, 2, ELECTION_MS + 20) == (FetchValid(0), False)  # epoch 2 on a majority
    assert one.high_watermark == 0
    assert one.pending_start
    assert one.appended(log.append(4), ELECTION_MS + 30) is False  # the no-op, only on the leader
    assert one.high_watermark == 0 and not one.pending_start
    assert one.handle_fetch(2, 4, 3, 4, ELECTION_MS + 40) == (FetchValid(3), True)
    assert one.high_watermark == 3
    assert one.handle_fetch(3, 4, 1, 1, ELECTION_MS + 50) == (FetchValid(3), False)  # a laggard
    assert one.high_watermark == 3
    assert one.voter_end_offsets() == {1: (3, ELECTION_MS + 30), 2: (3, ELECTION_MS + 40),
                                       3: (1, ELECTION_MS + 50)}


def test_the_high_watermark_never_moves_back_when_a_follower_reports_less() -> None:
    one, log = voter(1)
    two, _ = voter(2)
    elect(one, [two], ELECTION_MS)
    one.appended(log.append(1, 5), ELECTION_MS)
    assert one.handle_fetch(2, 1, 5, 1, ELECTION_MS + 1) == (FetchValid(5), True)
    assert one.handle_fetch(2, 1, 2, 1, ELECTION_MS + 2) == (FetchValid(5), False)
    assert one.handle_fetch(3, 1, 3, 1, ELECTION_MS + 3) == (FetchValid(5), False)
    assert one.high_watermark == 5


def leader_of_epoch_4(epochs: Sequence[int]) -> tuple[Quorum, MemoryLog]:
    one, log = voter(1, epochs=epochs, stored=ElectionState(3))
    two, _ = voter(2, stored=ElectionState(3))
    elect(one, [two], ELECTION_MS)
    one.appended(log.append(4), ELECTION_MS)
    return one, log


@pytest.mark.parametrize(("leader", "follower", "diverging", "truncation"), [
    # the follower's epoch 2 is unknown to the leader: back to the end of epoch 1 on both
    ([1, 1, 1, 3, 3], [1, 1, 1, 2, 2, 2], FetchDiverging(1, 3), 3),
    # the follower has more of epoch 3 than the leader wrote
    ([1, 1, 1, 3, 3], [1, 1, 1, 3, 3, 3, 3], FetchDiverging(3, 5), 5),
    # the follower knows epoch 1 longer than the leader does
    ([1, 1, 1, 3, 3], [1, 1, 1, 1, 2], FetchDiverging(1, 3), 3),
    # the follower knows epoch 1 shorter than the leader does
    ([1, 1, 1, 3, 3], [1, 1, 2], FetchDiverging(1, 3), 2),
    # the follower lacks the leader's epoch: it cuts at the end of its largest epoch below it
    ([1, 1, 2, 2], [1, 1, 1, 3, 3], FetchDiverging(2, 4), 3),
    ([1, 1, 1, 3, 3], [2, 2], FetchDiverging(1, 3), 0),
])
def test_a_diverging_follower_is_told_where_and_truncates_there(
        leader: list[int], follower: list[int], diverging: FetchDiverging, truncation: int) -> None:
    one, _ = leader_of_epoch_4(leader)
    decision, moved = one.handle_fetch(2, 4, len(follower), follower[-1], ELECTION_MS + 1)
    assert (decision, moved) == (diverging, False)
    two, _ = voter(2, epochs=follower, stored=ElectionState(4, 1))
    assert two.truncation_offset(diverging) == truncation


def test_a_follower_whose_epochs_are_all_unknown_to_the_leader_truncates_everything() -> None:
    one, _ = leader_of_epoch_4([2, 2, 3])
    decision, _ = one.handle_fetch(2, 4, 2, 1, ELECTION_MS + 1)
    assert decision == FetchDiverging(-1, -1)
    two, _ = voter(2, epochs=[1, 1], stored=ElectionState(4, 1))
    assert two.truncation_offset(decision) == 0


def test_matching_logs_do_not_diverge() -> None:
    one, _ = leader_of_epoch_4([1, 1, 1, 3, 3])
    for offset, last_epoch in [(0, 0), (2, 1), (3, 1), (4, 3), (5, 3), (6, 4)]:
        decision, _ = one.handle_fetch(2, 4, offset, last_epoch, ELECTION_MS + 1)
        assert isinstance(decision, FetchValid), (offset, last_epoch, decision)


def test_a_follower_never_truncates_below_its_high_watermark() -> None:
    two, log = voter(2, epochs=[1, 1, 1, 2, 2], stored=ElectionState(4, 1))
    assert two.role == "follower"
    two.fetched(4, 4, 10)
    assert two.high_watermark == 4
    assert two.truncation_offset(FetchDiverging(1, 3)) == 4
    two.fetched(4, 99, 20)  # the leader's high watermark past the follower's log end
    assert two.high_watermark == log.log_end_offset == 5
    two.fetched(4, 2, 30)
    assert two.high_watermark == 5


def test_a_follower_that_stops_hearing_from_its_leader_stands_after_the_fetch_timeout() -> None:
    three, _ = voter(3, epochs=[1])
    accepted, _ = three.handle_begin_epoch(BeginQuorumEpoch(1, 1), 100)
    assert accepted and three.role == "follower"
    assert three.until_next_poll_ms(100) == FETCH_MS
    assert three.poll(100 + FETCH_MS - 1).persist is None
    three.fetched(1, 0, 1500)  # heard from the leader: the timer starts again
    assert three.poll(100 + FETCH_MS).persist is None and three.role == "follower"
    assert three.poll(1500 + FETCH_MS - 1).persist is None and three.role == "follower"

    asking = three.poll(1500 + FETCH_MS)  # it keeps its leader and fetches on while it asks (KIP-996)
    assert three.role == "prospective" and three.epoch == 1 and three.leader_id == 1 and asking.persist is None
    assert asking.send == [(1, VoteRequest(2, 3, 1, 1, pre_vote=True)), (2, VoteRequest(2, 3, 1, 1, pre_vote=True))]
    # a voter that still follows the leader says no; it names the leader this one timed out on
    assert three.handle_vote_answer(2, VoteAnswer(1, 1, False, pre_vote=True), 1500 + FETCH_MS).persist is None
    assert three.role == "prospective"
    standing = three.handle_vote_answer(1, VoteAnswer(1, NO_VOTER, True, pre_vote=True), 1500 + FETCH_MS)
    assert three.role == "candidate" and three.epoch == 2
    assert standing.persist == ElectionState(2, NO_VOTER, 3)
    assert standing.send == [(1, VoteRequest(2, 3, 1, 1)), (2, VoteRequest(2, 3, 1, 1))]


def test_a_prospective_voter_that_hears_from_its_leader_follows_it_again() -> None:
    three, _ = voter(3, epochs=[1])
    three.handle_begin_epoch(BeginQuorumEpoch(1, 1), 0)
    assert three.fetch_leader == 1
    three.poll(FETCH_MS)
    assert three.role == "prospective" and three.fetch_leader == 1  # it fetches on while it asks
    following = three.fetched(1, 1, FETCH_MS + 10)
    assert three.role == "follower" and following.persist == ElectionState(1, 1, NO_VOTER)
    assert three.until_next_poll_ms(FETCH_MS + 10) == FETCH_MS
    three.poll(10 * FETCH_MS)
    stand_answers = three.handle_vote_answer(2, VoteAnswer(1, NO_VOTER, True, pre_vote=True), 10 * FETCH_MS)
    assert three.role == "candidate" and three.fetch_leader is None and stand_answers.persist is not None


def test_a_voter_grants_a_pre_vote_only_without_a_live_leader_and_changes_nothing() -> None:
    two, _ = voter(2, epochs=[1])
    two.handle_begin_epoch(BeginQuorumEpoch(1, 1), 0)
    ask = VoteRequest(2, 3, 1, 1, pre_vote=True)
    assert two.handle_vote(ask, ELECTION_MS - 1) == (VoteAnswer(1, 1, False, pre_vote=True), Actions())
    # its leader silent for an election timeout: yes, though its own fetch timeout has not run out
    assert two.handle_vote(ask, ELECTION_MS) == (VoteAnswer(1, 1, True, pre_vote=True), Actions())
    assert two.handle_vote(VoteRequest(2, 3, 0, 0, pre_vote=True), ELECTION_MS)[0].granted is False  # shorter log
    assert (two.role, two.epoch, two.voted_id) == ("follower", 1, NO_VOTER)
    leader, _ = voter(1)
    elect(leader, [voter(3)[0]], ELECTION_MS)
    assert not leader.handle_vote(VoteRequest(2, 3, 9, 9, pre_vote=True), ELECTION_MS)[0].granted


def test_a_candidate_without_a_majority_stands_again_in_a_new_epoch() -> None:
    one, _ = voter(1)
    stand(one, ELECTION_MS)
    one.handle_vote_answer(2, VoteAnswer(1, NO_VOTER, False), ELECTION_MS + 1)
    assert one.until_next_poll_ms(ELECTION_MS) == ELECTION_MS
    assert one.poll(2 * ELECTION_MS).persist is None  # it backs off first (the rng draws 0 here)
    assert one.role == "candidate" and one.epoch == 1
    again = stand(one, 2 * ELECTION_MS)  # then asks for pre-votes again
    assert one.role == "candidate" and one.epoch == 2 and again.persist == ElectionState(2, NO_VOTER, 1)
    assert one.handle_vote_answer(2, VoteAnswer(1, NO_VOTER, True), 2 * ELECTION_MS + 1).send == []
    assert one.role == "candidate"  # a late grant of the previous epoch counts for nothing


def test_a_leader_not_fetched_by_a_majority_for_one_and_a_half_fetch_timeouts_resigns() -> None:
    one, log = voter(1)
    two, _ = voter(2)
    elect(one, [two], ELECTION_MS)
    elected_ms = ELECTION_MS
    one.appended(log.append(1), elected_ms)
    last_fetch_ms = elected_ms + 2500
    now = elected_ms
    while now < last_fetch_ms + CHECK_QUORUM_MS:
        if now <= last_fetch_ms:
            one.handle_fetch(2, 1, 1, 1, now)
        assert one.poll(now).persist is None and one.role == "leader", now
        now += 100
    while one.role == "leader":
        assert now <= last_fetch_ms + CHECK_QUORUM_MS + FETCH_MS // 2, now
        resigned = one.poll(now)
        now += 100
    assert one.role == "resigned" and one.epoch == 1
    assert resigned.persist == ElectionState(1, 1, 1)
    assert resigned.send == [(2, EndQuorumEpoch(1, 1, (2, 3))), (3, EndQuorumEpoch(1, 1, (2, 3)))]
    refusal, _ = one.handle_fetch(2, 1, 1, 1, now)
    assert refusal == FetchRefused("not_leader", 1, 1)


def test_a_leader_nobody_fetches_from_resigns_at_its_first_check() -> None:
    one, _ = voter(1)
    two, _ = voter(2)
    elect(one, [two], ELECTION_MS)
    assert one.poll(ELECTION_MS + CHECK_QUORUM_MS - 1).persist is None and one.role == "leader"
    assert one.poll(ELECTION_MS + CHECK_QUORUM_MS).persist == ElectionState(1, 1, 1)
    assert one.role == "resigned"


def test_a_leader_asks_voters_that_never_fetched_to_begin_its_epoch_again() -> None:
    one, _ = voter(1)
    two, _ = voter(2)
    elect(one, [two], ELECTION_MS)
    one.handle_fetch(2, 1, 0, 0, ELECTION_MS + CHECK_QUORUM_MS - 10)
    again = one.poll(ELECTION_MS + CHECK_QUORUM_MS)
    assert one.role == "leader" and again.send == [(3, BeginQuorumEpoch(1, 1))]


def test_fetches_of_another_epoch_or_to_a_non_leader_are_refused() -> None:
    one, _ = leader_of_epoch_4([1])
    assert one.handle_fetch(2, 5, 0, 0, 1) == (FetchRefused("unknown_epoch", 1, 4), False)
    assert one.handle_fetch(2, 3, 0, 0, 1) == (FetchRefused("fenced", 1, 4), False)
    assert one.handle_fetch(9, -1, 0, 0, 1) == (FetchValid(0), False)  # an observer has no epoch

    two, _ = voter(2, stored=ElectionState(4, 1))
    assert two.handle_fetch(3, 4, 0, 0, 1) == (FetchRefused("not_leader", 1, 4), False)
    unattached, _ = voter(3, stored=ElectionState(4))
    assert unattached.handle_fetch(2, 4, 0, 0, 1) == (FetchRefused("not_leader", NO_VOTER, 4), False)


def test_a_refusal_naming_a_newer_leader_makes_the_fetcher_follow_it() -> None:
    two, _ = voter(2, stored=ElectionState(3, 1))
    assert two.fetch_refused(FetchRefused("not_leader", 1, 2), 5).persist is None  # older: ignored
    assert two.role == "follower" and two.epoch == 3
    actions = two.fetch_refused(FetchRefused("fenced", 3, 4), 10)
    assert two.role == "follower" and two.leader_id == 3 and two.epoch == 4
    assert actions.persist == ElectionState(4, 3)
    actions = two.fetch_refused(FetchRefused("fenced", NO_VOTER, 6), 20)
    assert two.role == "unattached" and two.epoch == 6 and actions.persist == ElectionState(6)


def test_a_begin_quorum_epoch_of_an_older_epoch_is_refused() -> None:
    two, _ = voter(2, stored=ElectionState(3, 1))
    accepted, actions = two.handle_begin_epoch(BeginQuorumEpoch(2, 3), 0)
    assert not accepted and actions.persist is None
    assert two.role == "follower" and two.epoch == 3 and two.leader_id == 1


def test_a_resigning_leader_hands_over_to_the_most_caught_up_first() -> None:
    one, log = voter(1, voters=range(1, 6))
    stand(one, ELECTION_MS)
    for v in (2, 3):
        one.handle_vote_answer(v, VoteAnswer(1, NO_VOTER, True), ELECTION_MS)
    one.appended(log.append(1, 10), ELECTION_MS)
    for replica, end_offset in [(2, 4), (3, 9), (4, 6), (5, 1)]:
        one.handle_fetch(replica, 1, end_offset, 1, ELECTION_MS + 1)
    resigning = one.resign(ELECTION_MS + 2)
    end = EndQuorumEpoch(1, 1, (3, 4, 2, 5))
    assert one.role == "resigned" and resigning.persist == ElectionState(1, 1, 1)
    assert resigning.send == [(3, end), (4, end), (2, end), (5, end)]
    assert one.resign(ELECTION_MS + 3).send == []  # only a leader resigns

    now = ELECTION_MS + 10
    stood = {}
    for v in (3, 4, 2, 5):
        follower, _ = voter(v, voters=range(1, 6), stored=ElectionState(1, 1), now_ms=0)
        follower.fetched(1, 0, now)
        assert follower.handle_end_epoch(EndQuorumEpoch(1, 2, (v,)), now).send == []  # not its leader
        assert follower.until_next_poll_ms(now) == FETCH_MS
        follower.handle_end_epoch(end, now)
        stood[v] = follower.until_next_poll_ms(now)
    assert stood == {3: 0, 4: ELECTION_MS // 2, 2: ELECTION_MS, 5: 3 * ELECTION_MS // 2}


def test_a_restarted_voter_waits_to_hear_from_the_leader_it_knew() -> None:
    three, _ = voter(3, stored=ElectionState(2, 1, 2), now_ms=50)
    assert three.role == "follower" and three.leader_id == 1 and three.voted_id == 2
    assert three.high_watermark == 0
    assert not three.handle_vote(VoteRequest(2, 2, 9, 9), 60)[0].granted
    stand(three, 50 + ELECTION_MS)
    assert three.role == "candidate" and three.epoch == 3


def test_illegal_transitions_raise() -> None:
    assert "leader" not in TRANSITIONS["follower"]
    assert "candidate" not in TRANSITIONS["leader"]
    assert "leader" not in TRANSITIONS["resigned"]
    assert "resigned" not in TRANSITIONS["candidate"]
    follower, _ = voter(2, stored=ElectionState(1, 1))
    with pytest.raises(IllegalQuorumTransition):
        follower._transition("leader", 1, leader_id=2, now_ms=0)
    with pytest.raises(IllegalQuorumTransition):
        follower._transition("follower", 0, leader_id=1, now_ms=0)  # an epoch never goes back
    assert follower.role == "follower" and follower.epoch == 1


def test_a_leader_does_not_resign_twice_and_a_resigned_voter_follows_the_next_leader() -> None:
    one, _ = voter(1)
    two, _ = voter(2)
    elect(one, [two], ELECTION_MS)
    one.resign(ELECTION_MS + 1)
    assert one.resign(ELECTION_MS + 2).persist is None and one.role == "resigned"
    accepted, actions = one.handle_begin_epoch(BeginQuorumEpoch(2, 3), ELECTION_MS + 3)
    assert accepted and one.role == "follower" and one.leader_id == 3
    assert actions.persist == ElectionState(2, 3)


def test_a_voter_outside_the_quorum_is_rejected() -> None:
    with pytest.raises(ValueError):
        voter(4)
    two, _ = voter(2)
    assert not two.handle_vote(VoteRequest(1, 7, 0, 0), 0)[0].granted


def test_a_leader_steps_down_for_a_voter_left_in_a_newer_epoch() -> None:
    """A voter that stood while cut off keeps its newer epoch; it answers the leader's
    BeginQuorumEpoch with it, and the leader steps down so that the quorum can move on."""
    one, _ = voter(1)
    elect(one, [voter(2)[0]], ELECTION_MS)
    assert one.observed(1, 1, ELECTION_MS + 1).persist is None and one.role == "leader"  # its own epoch
    stepping_down = one.observed(3, NO_VOTER, ELECTION_MS + 2)
    assert one.role == "unattached" and one.epoch == 3 and stepping_down.persist == ElectionState(3)
