"""A voter of the metadata log's quorum (KIP-595, static voters): Kafka's `QuorumState` and the
election and replication rules of `KafkaRaftClient`, as a sans-IO core.

Events come in as method calls with the time (`now_ms`); what the shell must do comes out as
`Actions`, in order: persist the election state first (`persist`), then send (`send`). The
role is read from `role` after each call. The log is read through `QuorumLog` (the shell
appends and truncates it; the core says what to truncate).

Roles and their transitions (`TRANSITIONS`, checked on every change):

- unattached: an epoch without a known leader, maybe with a vote cast (`voted_id`);
- prospective: its timer ran out; it asks the voters whether they would vote for it in the
  next epoch (KIP-996 pre-vote) before it stands, without changing its epoch: a voter that
  was cut off (a partition, a pause) finds the others still following their leader and
  goes back to it, instead of making the leader step down by standing in a newer epoch. One
  that knows the leader of its epoch keeps fetching from it meanwhile;
- candidate: asked the voters for their votes in its epoch;
- leader: won its epoch; the high watermark is the largest offset a majority of voters has
  (only once a record of its own epoch is among them: Raft's commit rule);
- follower: knows the leader of its epoch and fetches from it;
- resigned: a leader that lost touch with a majority (check quorum) or shuts down; it waits
  for a new epoch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

from kmirror.quorum.election_state import NO_VOTER, ElectionState

Role = Literal["unattached", "prospective", "candidate", "leader", "follower", "resigned"]

TRANSITIONS: dict[Role, frozenset[Role]] = {
    "unattached": frozenset({"unattached", "prospective", "candidate", "follower"}),
    "prospective": frozenset({"unattached", "prospective", "candidate", "follower"}),
    "candidate": frozenset({"unattached", "prospective", "follower", "leader"}),
    "leader": frozenset({"unattached", "follower", "resigned"}),
    "follower": frozenset({"unattached", "prospective", "follower"}),
    "resigned": frozenset({"unattached", "prospective", "candidate", "follower"}),
}
"""Role changes Kafka's `QuorumState` allows (KIP-996). A single voter stands at once, without
asking for pre-votes: its own vote is a majority (unattached or resigned -> candidate -> leader)."""


class IllegalQuorumTransition(RuntimeError):
    pass


def mermaid_diagram() -> str:
    """`TRANSITIONS` as a Mermaid `stateDiagram-v2` for docs/design/controller.md (generated,
    kept equal to the table by a test)."""
    lines = ["stateDiagram-v2", "    [*] --> unattached"]
    lines += [f"    {current} --> {target}" for current, targets in TRANSITIONS.items()
              for target in sorted(targets) if target != current]
    return "\n".join(lines) + "\n"


class QuorumLog(Protocol):
    """What the core reads of the metadata log."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """`(largest known epoch <= epoch, its end offset)`; `(-1, -1)` below every epoch."""
        ...


class Rng(Protocol):
    """The randomness port (satisfied by `random.Random`)."""

    def randrange(self, stop: int, /) -> int: ...


@dataclass(frozen=True)
class QuorumConfig:
    """Kafka's `controller.quorum.*` timings."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000


class VoteRequest(NamedTuple):
    epoch: int
    candidate_id: int
    last_epoch: int
    last_offset: int
    pre_vote: bool = False
    """KIP-996: would the voter vote for it in `epoch`? Nothing changes at the voter."""


class BeginQuorumEpoch(NamedTuple):
    epoch: int
    leader_id: int


class EndQuorumEpoch(NamedTuple):
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


Message = VoteRequest | BeginQuorumEpoch | EndQuorumEpoch


class VoteAnswer(NamedTuple):
    epoch: int
    leader_id: int
    granted: bool
    fenced: bool = False
    """The candidate's epoch is older than this voter's (FENCED_LEADER_EPOCH)."""
    pre_vote: bool = False
    """The answer to a pre-vote."""


@dataclass
class Actions:
    persist: ElectionState | None = None
    send: list[tuple[int, Message]] = field(default_factory=list)

    def extend(self, other: Actions) -> Actions:
        if other.persist is not None:
            self.persist = other.persist
        self.send.extend(other.send)
        return self


class FetchValid(NamedTuple):
    """Read from the fetch offset; the answer carries `high_watermark`."""

    high_watermark: int


class FetchDiverging(NamedTuple):
    """The fetcher's log diverges from the leader's: truncate to at most `end_offset` of `epoch`
    (the Fetch answer's DivergingEpoch)."""

    epoch: int
    end_offset: int


class FetchRefused(NamedTuple):
    """Not the leader of that epoch: the error (`not_leader`, `fenced`: the fetcher's epoch is
    older, `unknown_epoch`: newer), and who leads which epoch, as this voter knows it."""

    error: Literal["not_leader", "fenced", "unknown_epoch"]
    leader_id: int
    epoch: int


FetchDecision = FetchValid | FetchDiverging | FetchRefused


@dataclass
class _ReplicaState:
    end_offset: int = -1
    last_fetch_ms: int = -1
    """When it last fetched, or when the leader's epoch began (check quorum counts from then)."""
    fetched: bool = False


class Quorum:
    """One voter (or a single-voter quorum). `voters` includes `local_id`."""

    def __init__(self, local_id: int, voters: Iterable[int], stored: ElectionState | None, log: QuorumLog,
                 config: QuorumConfig, rng: Rng, now_ms: int) -> None:
        self.local_id = local_id
        self.voters = frozenset(voters)
        if local_id not in self.voters:
            raise ValueError(f"node {local_id} is not a voter of {sorted(self.voters)}")
        self._log = log
        self._config = config
        self._rng = rng
        state = stored or ElectionState(0)
        self.epoch = state.epoch
        self.voted_id = state.voted_id
        self.leader_id = NO_VOTER
        # a restarted voter does not trust a leader it knew: it waits to hear from it again (unless it led)
        self.role: Role = "unattached"
        if state.leader_id == local_id:
            self.role = "resigned"
        elif state.leader_id != NO_VOTER:
            self.role, self.leader_id = "follower", state.leader_id
        # a single voter elects itself at once: nobody else could
        self._deadline_ms = now_ms if len(self.voters) == 1 else now_ms + self._election_timeout()
        self._granted: set[int] = set()
        self._backing_off = False
        self._replicas: dict[int, _ReplicaState] = {}
        self._epoch_start_offset = 0
        self.high_watermark = 0
        self.pending_start = False
        """A new leader must append a record of its epoch (the shell: a no-op record) before
        anything commits in that epoch."""

    # -- state changes -------------------------------------------------------------------------

    def _transition(self, role: Role, epoch: int, *, leader_id: int = NO_VOTER, voted_id: int = NO_VOTER,
                    now_ms: int) -> ElectionState:
        if role not in TRANSITIONS[self.role]:
            raise IllegalQuorumTransition(f"{self.role} -> {role} (epoch {self.epoch} -> {epoch})")
        if epoch < self.epoch:
            raise IllegalQuorumTransition(f"epoch {self.epoch} -> {epoch}")
        # Kafka's transitionToUnattached: a voter that only learns of a newer epoch keeps the
        # time it had left; granting a vote restarts it
        keeps_timer = role == "unattached" and voted_id == NO_VOTER and self.role in ("unattached", "candidate",
                                                                                       "prospective")
        self.role, self.epoch, self.leader_id, self.voted_id = role, epoch, leader_id, voted_id
        self._granted = set()
        self._backing_off = False
        self.pending_start = role == "leader"
        if role == "leader":
            self._epoch_start_offset = self._log.log_end_offset
            self._replicas = {v: _ReplicaState(last_fetch_ms=now_ms) for v in self.voters}
            self._replicas[self.local_id] = _ReplicaState(self._log.log_end_offset, now_ms, True)
            self._deadline_ms = now_ms + self._config.fetch_timeout_ms // 2
        elif role == "follower":
            self._deadline_ms = now_ms + self._config.fetch_timeout_ms
        elif not keeps_timer:
            self._deadline_ms = now_ms + self._election_timeout()
        return ElectionState(epoch, leader_id, voted_id)

    def _election_timeout(self) -> int:
        timeout = self._config.election_timeout_ms
        return timeout + self._rng.randrange(timeout + 1)

    def _check_quorum_ms(self) -> int:
        return self._config.fetch_timeout_ms * 3 // 2

    def _observe_epoch(self, epoch: int, leader_id: int, now_ms: int) -> Actions:
        """A message of a newer epoch (or naming the leader of the current one) moves this voter."""
        if epoch > self.epoch:
            if leader_id not in (NO_VOTER, self.local_id):
                return Actions(persist=self._transition("follower", epoch, leader_id=leader_id, now_ms=now_ms))
            return Actions(persist=self._transition("unattached", epoch, now_ms=now_ms))
        if self.role == "prospective" and leader_id == self.leader_id:
            return Actions()  # the leader it timed out on, named by a voter that has not timed out yet
        if epoch == self.epoch and leader_id not in (NO_VOTER, self.local_id) and self.role in (
                "unattached", "prospective", "candidate", "resigned"):
            return Actions(persist=self._transition("follower", epoch, leader_id=leader_id, voted_id=self.voted_id,
                                                    now_ms=now_ms))
        return Actions()

    def _prospect(self, now_ms: int) -> Actions:
        """Ask for pre-votes (KIP-996), or stand at once as the only voter."""
        if len(self.voters) == 1:
            return self._start_election(now_ms)
        leader = self.leader_id if self.role in ("follower", "prospective") else NO_VOTER
        self._transition("prospective", self.epoch, leader_id=leader, voted_id=self.voted_id, now_ms=now_ms)
        self._granted = {self.local_id}
        request = VoteRequest(self.epoch + 1, self.local_id, self._log.last_epoch, self._log.log_end_offset,
                              pre_vote=True)
        return Actions(send=[(v, request) for v in sorted(self.voters - {self.local_id})])

    def _start_election(self, now_ms: int) -> Actions:
        persist = self._transition("candidate", self.epoch + 1, voted_id=self.local_id, now_ms=now_ms)
        self._granted = {self.local_id}
        actions = Actions(persist=persist)
        if self._has_majority(self._granted):
            return actions.extend(self._become_leader(now_ms))
        request = VoteRequest(self.epoch, self.local_id, self._log.last_epoch, self._log.log_end_offset)
        actions.send.extend((v, request) for v in sorted(self.voters - {self.local_id}))
        return actions

    def _become_leader(self, now_ms: int) -> Actions:
        persist = self._transition("leader", self.epoch, leader_id=self.local_id, voted_id=self.voted_id,
                                   now_ms=now_ms)
        begin = BeginQuorumEpoch(self.epoch, self.local_id)
        return Actions(persist=persist, send=[(v, begin) for v in sorted(self.voters - {self.local_id})])

    def _has_majority(self, ids: set[int]) -> bool:
        return 2 * len(ids & self.voters) > len(self.voters)

    # -- timers --------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> Actions:
        """Run the timers: elections, fetch timeouts, the leader's check quorum and its
        BeginQuorumEpoch to voters not heard from."""
        if now_ms < self._deadline_ms:
            return Actions()
        if self.role == "leader":
            heard = {v for v, r in self._replicas.items()
                     if v == self.local_id or now_ms - r.last_fetch_ms < self._check_quorum_ms()}
            if not self._has_majority(heard):
                return self.resign(now_ms)
            self._deadline_ms = min(now_ms + self._config.fetch_timeout_ms // 2, self._check_quorum_expiry_ms(now_ms))
            begin = BeginQuorumEpoch(self.epoch, self.local_id)
            return Actions(send=[(v, begin) for v, r in sorted(self._replicas.items())
                                 if v != self.local_id and not r.fetched])
        if self.role == "candidate" and not self._backing_off:
            # the vote split or was lost: back off a random time, then ask again
            self._backing_off = True
            self._deadline_ms = now_ms + self._rng.randrange(self._config.election_backoff_max_ms + 1)
            return Actions()
        return self._prospect(now_ms)

    def _check_quorum_expiry_ms(self, now_ms: int) -> int:
        """When the leader resigns unless more voters fetch: a majority's oldest latest fetch,
        plus 1.5x the fetch timeout."""
        latest = sorted((now_ms if v == self.local_id else r.last_fetch_ms for v, r in self._replicas.items()),
                        reverse=True)
        return latest[len(self.voters) // 2] + self._check_quorum_ms()

    def until_next_poll_ms(self, now_ms: int) -> int:
        return max(0, self._deadline_ms - now_ms)

    # -- Vote ----------------------------------------------------------------------------------

    def handle_vote(self, request: VoteRequest, now_ms: int) -> tuple[VoteAnswer, Actions]:
        if request.epoch < self.epoch:
            return VoteAnswer(self.epoch, self.leader_id, False, fenced=True, pre_vote=request.pre_vote), Actions()
        if request.pre_vote:
            return VoteAnswer(self.epoch, self.leader_id, self._grants_pre_vote(request, now_ms), pre_vote=True), Actions()
        actions = self._observe_epoch(request.epoch, NO_VOTER, now_ms)
        granted = self._grants(request)
        if granted and self.voted_id != request.candidate_id:
            actions.persist = self._transition("unattached", self.epoch, voted_id=request.candidate_id, now_ms=now_ms)
        return VoteAnswer(self.epoch, self.leader_id, granted), actions

    def _grants(self, request: VoteRequest) -> bool:
        if request.candidate_id not in self.voters or self.role != "unattached":
            return False  # a leader, follower, candidate or resigned voter of this epoch has its leader or vote
        if self.voted_id != NO_VOTER:
            return self.voted_id == request.candidate_id
        mine = (self._log.last_epoch, self._log.log_end_offset)
        return (request.last_epoch, request.last_offset) >= mine

    def _grants_pre_vote(self, request: VoteRequest, now_ms: int) -> bool:
        """Would vote for it in the next epoch: its log is as up to date as this one's, and this
        voter has not heard from a leader within the election timeout (KIP-996; the Raft
        thesis's 4.2.3: a follower that fetched from a live leader moments ago says no, one
        whose leader has been silent that long says yes, so that the first voter to time out is
        not turned down by the others, which time out a moment later)."""
        if request.candidate_id not in self.voters or request.epoch <= self.epoch and self.voted_id not in (
                NO_VOTER, request.candidate_id):
            return False
        heard_ms = self._deadline_ms - self._config.fetch_timeout_ms  # a follower's last answer from its leader
        if self.role == "leader" or self.role == "follower" and now_ms - heard_ms < self._config.election_timeout_ms:
            return False
        return (request.last_epoch, request.last_offset) >= (self._log.last_epoch, self._log.log_end_offset)

    def handle_vote_answer(self, voter_id: int, answer: VoteAnswer, now_ms: int) -> Actions:
        actions = self._observe_epoch(answer.epoch, answer.leader_id, now_ms)
        wanted: Role = "prospective" if answer.pre_vote else "candidate"
        if self.role != wanted or answer.epoch != self.epoch or not answer.granted:
            return actions
        self._granted.add(voter_id)
        if self._has_majority(self._granted):
            actions.extend(self._start_election(now_ms) if answer.pre_vote else self._become_leader(now_ms))
        return actions

    # -- BeginQuorumEpoch / EndQuorumEpoch -----------------------------------------------------

    def handle_begin_epoch(self, message: BeginQuorumEpoch, now_ms: int) -> tuple[bool, Actions]:
        """False (FENCED_LEADER_EPOCH) for an older epoch."""
        if message.epoch < self.epoch:
            return False, Actions()
        if message.epoch == self.epoch and self.role == "leader":
            return True, Actions()
        actions = self._observe_epoch(message.epoch, message.leader_id, now_ms)
        if self.role == "follower":
            self._deadline_ms = now_ms + self._config.fetch_timeout_ms
        return True, actions

    def observed(self, epoch: int, leader_id: int, now_ms: int) -> Actions:
        """An answer from another voter naming its epoch and leader (to BeginQuorumEpoch or
        EndQuorumEpoch): a newer epoch moves this voter. A leader whose BeginQuorumEpoch a voter
        fences with a newer epoch steps down, so that a voter left in a newer epoch (it stood
        while cut off) is not left out for good: Kafka's `maybeHandleCommonResponse`."""
        return self._observe_epoch(epoch, leader_id, now_ms)

    def handle_end_epoch(self, message: EndQuorumEpoch, now_ms: int) -> Actions:
        """The leader of this epoch resigns: its preferred successors stand first (the first
        at once), the others after an election timeout."""
        if message.epoch != self.epoch or self.leader_id != message.leader_id or self.role not in (
                "follower", "prospective"):
            return Actions()
        successors = list(message.preferred_successors)
        rank = successors.index(self.local_id) if self.local_id in successors else len(successors)
        self._deadline_ms = min(self._deadline_ms, now_ms + rank * self._config.election_timeout_ms // 2)
        return Actions()

    def resign(self, now_ms: int) -> Actions:
        """A leader that shuts down, or lost a majority: EndQuorumEpoch to the others, the most
        caught up first."""
        if self.role != "leader":
            return Actions()
        successors = tuple(v for v, _ in sorted(
            ((v, r) for v, r in self._replicas.items() if v != self.local_id), key=lambda vr: -vr[1].end_offset))
        end = EndQuorumEpoch(self.epoch, self.local_id, successors)
        persist = self._transition("resigned", self.epoch, leader_id=self.local_id, voted_id=self.voted_id,
                                   now_ms=now_ms)
        return Actions(persist=persist, send=[(v, end) for v in successors])

    # -- the leader: fetches from voters and observers -----------------------------------------

    def appended(self, log_end_offset: int, now_ms: int) -> bool:
        """The leader appended to its own log; True when the high watermark moved."""
        if self.role != "leader":
            return False
        self.pending_start = False
        self._replicas[self.local_id] = _ReplicaState(log_end_offset, now_ms, True)
        return self._update_high_watermark()

    def handle_fetch(self, replica_id: int, fetcher_epoch: int, fetch_offset: int, last_fetched_epoch: int,
                     now_ms: int) -> tuple[FetchDecision, bool]:
        """A Fetch of the metadata log from a voter or an observer (a broker: epoch -1). Returns
        the decision and whether the high watermark moved."""
        if fetcher_epoch > self.epoch:
            return FetchRefused("unknown_epoch", self.leader_id, self.epoch), False
        if 0 <= fetcher_epoch < self.epoch:
            return FetchRefused("fenced", self.leader_id, self.epoch), False
        if self.role != "leader":
            return FetchRefused("not_leader", self.leader_id, self.epoch), False
        replica = self._replicas.get(replica_id)
        if fetch_offset > 0 and (last_fetched_epoch >= 0 or replica is not None):
            epoch, end_offset = self._log.end_offset_for_epoch(last_fetched_epoch)
            if epoch != last_fetched_epoch or end_offset < fetch_offset:
                return FetchDiverging(epoch, end_offset), False
        moved = False
        if replica is not None and replica_id != self.local_id:
            replica.end_offset, replica.last_fetch_ms, replica.fetched = fetch_offset, now_ms, True
            moved = self._update_high_watermark()
        return FetchValid(self.high_watermark), moved

    def _update_high_watermark(self) -> bool:
        ends = sorted((r.end_offset for r in self._replicas.values()), reverse=True)
        majority_end = ends[len(self.voters) // 2]
        if majority_end > self._epoch_start_offset and majority_end > self.high_watermark:
            self.high_watermark = majority_end
            return True
        return False

    def voter_end_offsets(self) -> dict[int, tuple[int, int]]:
        """The leader's view of each voter: `(log end offset, last fetch ms)` (DescribeQuorum)."""
        return {v: (r.end_offset, r.last_fetch_ms if r.fetched else -1) for v, r in self._replicas.items()}

    # -- a follower: answers from the leader ---------------------------------------------------

    @property
    def fetch_leader(self) -> int | None:
        """The leader this voter fetches from: a follower's, or the one a prospective voter
        timed out on, which it still fetches from while it asks for pre-votes (KIP-996)."""
        if self.role in ("follower", "prospective") and self.leader_id != NO_VOTER:
            return self.leader_id
        return None

    def fetched(self, leader_epoch: int, high_watermark: int, now_ms: int) -> Actions:
        """A valid Fetch answer from the leader, its records appended: the leader is alive (a
        prospective voter follows it again)."""
        actions = Actions()
        if self.role == "prospective" and leader_epoch == self.epoch and self.leader_id != NO_VOTER:
            actions.persist = self._transition("follower", self.epoch, leader_id=self.leader_id,
                                               voted_id=self.voted_id, now_ms=now_ms)
        if self.role == "follower" and leader_epoch == self.epoch:
            self._deadline_ms = now_ms + self._config.fetch_timeout_ms
            self.high_watermark = max(self.high_watermark, min(high_watermark, self._log.log_end_offset))
        return actions

    def fetch_refused(self, refusal: FetchRefused, now_ms: int) -> Actions:
        """The fetched voter is not the leader: follow whom it names, in a newer epoch."""
        return self._observe_epoch(refusal.epoch, refusal.leader_id, now_ms)

    def truncation_offset(self, diverging: FetchDiverging) -> int:
        """Where a follower cuts its log after a DivergingEpoch (Kafka `truncateToEndOffset`):
        the end of the common epoch, never below the high watermark."""
        epoch, end_offset = self._log.end_offset_for_epoch(diverging.epoch)
        cut = min(diverging.end_offset, end_offset) if epoch == diverging.epoch else min(diverging.end_offset,
                                                                                         max(end_offset, 0))
        return max(cut, self.high_watermark)
