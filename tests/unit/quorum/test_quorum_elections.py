"""The voter core's elections (KIP-595, KIP-996): pre-votes, the vote's log comparison,
fencing of older epochs and a vote kept across a restart."""

from __future__ import annotations

import pytest

from kmirror.quorum.election_state import NO_VOTER, ElectionState
from kmirror.quorum.state import BeginQuorumEpoch, Quorum, VoteAnswer, VoteRequest
from kmirror.testing.quorum_voters import CONFIG, ELECTION_MS, LowestRng, elect, stand, voter


def test_a_single_voter_elects_itself_at_its_first_poll() -> None:
    """Kafka's `KafkaRaftClient.initialize`: the only voter stands at once, and its own vote is a
    majority; it does not wait out an election timeout at every start."""
    quorum, _ = voter(1, voters=[1], now_ms=0)
    actions = quorum.poll(0)
    assert quorum.role == "leader" and quorum.epoch == 1
    assert actions.persist == ElectionState(1, 1, 1) and actions.send == []


def test_a_single_voter_commits_alone_and_stands_again_at_once_after_a_restart() -> None:
    quorum, log = voter(1, voters=[1], now_ms=0)
    actions = quorum.poll(0)
    assert quorum.role == "leader" and quorum.epoch == 1 and quorum.pending_start
    assert actions.persist == ElectionState(1, 1, 1) and actions.send == []
    assert quorum.appended(log.append(1), ELECTION_MS) is True
    assert quorum.high_watermark == 1 and not quorum.pending_start
    assert quorum.appended(log.append(1, 3), ELECTION_MS + 1) is True and quorum.high_watermark == 4

    restarted = Quorum(1, [1], actions.persist, log, CONFIG, LowestRng(), 5000)
    assert restarted.role == "resigned" and restarted.high_watermark == 0
    assert restarted.poll(5000).persist == ElectionState(2, 1, 1)
    assert restarted.role == "leader" and restarted.epoch == 2


def test_three_voters_elect_the_first_to_stand_and_it_begins_its_epoch() -> None:
    one, _ = voter(1)
    two, _ = voter(2)
    three, _ = voter(3)
    assert one.poll(ELECTION_MS - 1).send == [] and one.role == "unattached"

    asking = one.poll(ELECTION_MS)  # KIP-996: would they vote for it in epoch 1?
    assert one.role == "prospective" and one.epoch == 0 and asking.persist is None
    assert asking.send == [(2, VoteRequest(1, 1, 0, 0, pre_vote=True)), (3, VoteRequest(1, 1, 0, 0, pre_vote=True))]
    pre_vote, nothing = two.handle_vote(VoteRequest(1, 1, 0, 0, pre_vote=True), ELECTION_MS + 2)
    assert pre_vote == VoteAnswer(0, NO_VOTER, True, pre_vote=True)
    assert nothing.persist is None and two.epoch == 0 and two.voted_id == NO_VOTER  # a pre-vote binds nobody

    standing = one.handle_vote_answer(2, pre_vote, ELECTION_MS + 4)
    assert one.role == "candidate" and one.epoch == 1 and one.voted_id == 1
    assert standing.persist == ElectionState(1, NO_VOTER, 1)
    assert standing.send == [(2, VoteRequest(1, 1, 0, 0)), (3, VoteRequest(1, 1, 0, 0))]

    answer, granting = two.handle_vote(VoteRequest(1, 1, 0, 0), ELECTION_MS + 5)
    assert answer == VoteAnswer(1, NO_VOTER, True)
    assert granting.persist == ElectionState(1, NO_VOTER, 1) and two.voted_id == 1

    won = one.handle_vote_answer(2, answer, ELECTION_MS + 10)
    assert one.role == "leader" and one.leader_id == 1 and one.pending_start
    assert won.persist == ElectionState(1, 1, 1)
    assert won.send == [(2, BeginQuorumEpoch(1, 1)), (3, BeginQuorumEpoch(1, 1))]

    accepted, following = three.handle_begin_epoch(BeginQuorumEpoch(1, 1), ELECTION_MS + 15)
    assert accepted and three.role == "follower" and three.leader_id == 1 and three.epoch == 1
    assert following.persist == ElectionState(1, 1, NO_VOTER)


def test_five_voters_need_three_votes() -> None:
    one, _ = voter(1, voters=range(1, 6))
    stand(one, ELECTION_MS)
    assert one.handle_vote_answer(2, VoteAnswer(1, NO_VOTER, True), ELECTION_MS).send == []
    assert one.handle_vote_answer(2, VoteAnswer(1, NO_VOTER, True), ELECTION_MS).send == []  # a duplicate
    assert one.handle_vote_answer(4, VoteAnswer(1, NO_VOTER, False), ELECTION_MS).send == []
    assert one.role == "candidate"
    won = one.handle_vote_answer(5, VoteAnswer(1, NO_VOTER, True), ELECTION_MS)
    assert one.role == "leader"
    assert [v for v, m in won.send if isinstance(m, BeginQuorumEpoch)] == [2, 3, 4, 5]


@pytest.mark.parametrize(("candidate", "mine", "granted"), [
    ((2, 5), (2, 5), True),  # as long: up to date
    ((2, 6), (2, 5), True),
    ((3, 1), (2, 5), True),  # a newer last epoch wins over a longer log
    ((2, 4), (2, 5), False),  # my log is longer in the same last epoch
    ((1, 9), (2, 5), False),  # my last epoch is newer
])
def test_a_vote_is_granted_only_to_a_log_at_least_as_up_to_date(
        candidate: tuple[int, int], mine: tuple[int, int], granted: bool) -> None:
    last_epoch, end_offset = mine
    two, _ = voter(2, epochs=[1] + [last_epoch] * (end_offset - 1), stored=ElectionState(3))
    answer, actions = two.handle_vote(VoteRequest(4, 1, *candidate), 10)
    assert answer == VoteAnswer(4, NO_VOTER, granted)
    assert two.epoch == 4 and two.role == "unattached"
    assert actions.persist == ElectionState(4, NO_VOTER, 1 if granted else NO_VOTER)


def test_a_vote_is_refused_to_a_second_candidate_of_the_epoch_also_after_a_restart() -> None:
    two, _ = voter(2)
    assert two.handle_vote(VoteRequest(1, 3, 0, 0), 0)[0].granted
    answer, actions = two.handle_vote(VoteRequest(1, 1, 5, 50), 1)
    assert answer == VoteAnswer(1, NO_VOTER, False) and actions.persist is None
    assert two.handle_vote(VoteRequest(1, 3, 0, 0), 2)[0].granted  # the same candidate asks again

    restarted, _ = voter(2, stored=ElectionState(1, NO_VOTER, 3))
    assert restarted.role == "unattached" and restarted.voted_id == 3
    assert not restarted.handle_vote(VoteRequest(1, 1, 5, 50), 3)[0].granted
    assert restarted.handle_vote(VoteRequest(2, 1, 5, 50), 4)[0].granted  # a new epoch, a new vote


def test_a_vote_of_an_older_epoch_is_fenced_and_the_candidate_steps_down() -> None:
    two, _ = voter(2, stored=ElectionState(5))
    answer, actions = two.handle_vote(VoteRequest(3, 1, 0, 0), 0)
    assert answer == VoteAnswer(5, NO_VOTER, False, fenced=True) and actions.persist is None
    assert two.epoch == 5

    one, _ = voter(1, stored=ElectionState(2))
    stand(one, ELECTION_MS)
    assert one.role == "candidate" and one.epoch == 3
    stepped = one.handle_vote_answer(2, answer, ELECTION_MS + 1)
    assert one.role == "unattached" and one.epoch == 5 and stepped.persist == ElectionState(5)


def test_a_voter_that_refuses_a_newer_candidate_keeps_its_election_timer() -> None:
    """Kafka `QuorumState.transitionToUnattached`: a voter (unattached, voted or candidate) that
    only learns of a newer epoch keeps the election time it had left; only granting a vote
    restarts its timer. A voter with a stale log, refused at every election, must not keep the
    up-to-date voters from ever standing by restarting their timers each time it stands."""
    two, _ = voter(2, epochs=[1, 1], now_ms=0)
    assert two.until_next_poll_ms(0) == ELECTION_MS
    answer, _ = two.handle_vote(VoteRequest(1, 3, 0, 0), 900)
    assert not answer.granted and two.epoch == 1 and two.role == "unattached"
    assert two.until_next_poll_ms(900) == ELECTION_MS - 900

    one, _ = voter(1, epochs=[1, 1], now_ms=0)
    stand(one, ELECTION_MS)
    assert one.role == "candidate" and one.until_next_poll_ms(ELECTION_MS) == ELECTION_MS
    assert not one.handle_vote(VoteRequest(2, 3, 0, 0), ELECTION_MS + 900)[0].granted
    assert one.role == "unattached" and one.epoch == 2
    assert one.until_next_poll_ms(ELECTION_MS + 900) == ELECTION_MS - 900

    three, _ = voter(3, now_ms=0)
    assert three.handle_vote(VoteRequest(1, 1, 1, 2), 900)[0].granted
    assert three.until_next_poll_ms(900) == ELECTION_MS  # a granted vote restarts it


def test_a_leader_or_follower_refuses_a_vote_of_its_epoch_and_names_the_leader() -> None:
    one, _ = voter(1)
    two, _ = voter(2)
    three, _ = voter(3)
    elect(one, [two], ELECTION_MS)
    three.handle_begin_epoch(BeginQuorumEpoch(1, 1), ELECTION_MS)
    for refusing in (one, three):
        answer, _ = refusing.handle_vote(VoteRequest(1, 2, 9, 90), ELECTION_MS + 1)
        assert answer == VoteAnswer(1, 1, False)

    rival, _ = voter(3, stored=ElectionState(0))
    stand(rival, ELECTION_MS)
    assert rival.role == "candidate" and rival.epoch == 1
    rival.handle_vote_answer(1, VoteAnswer(1, 1, False), ELECTION_MS + 2)
    assert rival.role == "follower" and rival.leader_id == 1 and rival.voted_id == 3


def test_a_newer_epoch_unseats_a_leader_and_its_vote_can_be_granted() -> None:
    one, _ = voter(1)
    two, _ = voter(2)
    elect(one, [two], ELECTION_MS)
    answer, actions = one.handle_vote(VoteRequest(2, 3, 0, 0), ELECTION_MS + 1)
    assert answer == VoteAnswer(2, NO_VOTER, True)
    assert one.role == "unattached" and actions.persist == ElectionState(2, NO_VOTER, 3)
