"""A KIP-595 voter core on a metadata log held in memory, and the steps of an election, for
tests of `kmirror.quorum.state` driven one message at a time."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kmirror.quorum.election_state import NO_VOTER, ElectionState
from kmirror.quorum.state import Actions, Quorum, QuorumConfig, VoteAnswer, VoteRequest

CONFIG = QuorumConfig(election_timeout_ms=1000, fetch_timeout_ms=2000)
ELECTION_MS = CONFIG.election_timeout_ms
FETCH_MS = CONFIG.fetch_timeout_ms
CHECK_QUORUM_MS = FETCH_MS * 3 // 2


class MemoryLog:
    """A metadata log as the epoch of each offset."""

    def __init__(self, epochs: Iterable[int] = ()) -> None:
        self.epochs = list(epochs)

    @property
    def log_end_offset(self) -> int:
        return len(self.epochs)

    @property
    def last_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else 0

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        known = [e for e in self.epochs if e <= epoch]
        if epoch < 0 or not known:
            return -1, -1
        found = max(known)
        following = [offset for offset, e in enumerate(self.epochs) if e > found]
        return found, following[0] if following else len(self.epochs)

    def append(self, epoch: int, count: int = 1) -> int:
        self.epochs.extend([epoch] * count)
        return self.log_end_offset


class LowestRng:
    """Every election timeout is the shortest one."""

    def randrange(self, stop: int, /) -> int:
        return 0


def voter(local_id: int, voters: Sequence[int] = (1, 2, 3), epochs: Iterable[int] = (),
          stored: ElectionState | None = None, now_ms: int = 0) -> tuple[Quorum, MemoryLog]:
    log = MemoryLog(epochs)
    return Quorum(local_id, voters, stored, log, CONFIG, LowestRng(), now_ms), log


def stand(candidate: Quorum, now_ms: int) -> Actions:
    """Its timer runs out at `now_ms`: it asks the others for pre-votes (KIP-996), without
    changing its epoch or persisting anything; granted by a majority, it stands. Returns what
    standing asks of the shell."""
    asking = candidate.poll(now_ms)
    assert candidate.role == "prospective", candidate.role
    assert asking.persist is None and asking.send
    assert all(isinstance(m, VoteRequest) and m.pre_vote and m.epoch == candidate.epoch + 1 for _, m in asking.send)
    for voter_id, _ in asking.send:
        standing = candidate.handle_vote_answer(voter_id, VoteAnswer(candidate.epoch, NO_VOTER, True, pre_vote=True),
                                                now_ms)
        if candidate.role == "candidate":
            return standing
    raise AssertionError("no majority of pre-votes")


def elect(leader: Quorum, others: Sequence[Quorum], now_ms: int) -> None:
    """`leader` stands at `now_ms` and each of `others` answers its Vote, in order."""
    actions = stand(leader, now_ms)
    assert leader.role == "candidate", leader.role
    for other in others:
        request = next(m for v, m in actions.send if v == other.local_id)
        assert isinstance(request, VoteRequest)
        answer, _ = other.handle_vote(request, now_ms)
        leader.handle_vote_answer(other.local_id, answer, now_ms)
    assert leader.role == "leader", leader.role
