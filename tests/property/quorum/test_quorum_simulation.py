"""Seeded simulation of a 3- and a 5-voter quorum of `kmirror.quorum.state.Quorum` (Kafka's
`RaftEventSimulationTest` in spirit): a virtual clock, a network that delays, reorders, drops
and partitions every message between voters (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
their answers), voters that crash, shut down gracefully and restart from their persisted
election state and their log (fsynced on append: a crash loses nothing), and a leader that
appends a client record every few milliseconds.

The shell around each voter does what a real one does: it persists before it sends, a new
leader appends its no-op, a follower fetches from the leader it knows (one Fetch in flight, at
its log end and last epoch), truncates where a DivergingEpoch answer says, appends what it
fetched with the records' epochs and reports `fetched`.

Checked after every event:
- at most one leader per epoch, over the whole run; a voter votes once per epoch, across restarts;
- one entry per (offset, epoch) over all logs (log matching), and a log's epochs never decrease;
- a node's high watermark never decreases while it runs (a restart starts it at 0) and stays
  within its log;
- every entry ever committed (below a leader's high watermark) stays at its offset in every
  node's log below that node's high watermark (so logs agree up to the smaller of two high
  watermarks), and in the log of every leader of that epoch or a later one;
- a follower never truncates below its high watermark.
Liveness: once the faults stop, a leader exists within a bounded time and every voter's high
watermark reaches its log end.

A failing seed prints itself and the last events; replay it with KMIRROR_QUORUM_SIM_SEED=<n>,
run more seeds with KMIRROR_QUORUM_SIM_SEEDS=<count>.
"""

from __future__ import annotations

import bisect
import heapq
import os
import random
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias

import pytest

from kmirror.quorum.election_state import NO_VOTER, ElectionState
from kmirror.quorum.state import (
    Actions,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    FetchDecision,
    FetchDiverging,
    FetchRefused,
    FetchValid,
    Quorum,
    QuorumConfig,
    VoteAnswer,
    VoteRequest,
)

SEEDS = ([int(os.environ["KMIRROR_QUORUM_SIM_SEED"])] if "KMIRROR_QUORUM_SIM_SEED" in os.environ
         else list(range(int(os.environ.get("KMIRROR_QUORUM_SIM_SEEDS", "400")))))

CONFIG = QuorumConfig(election_timeout_ms=1000, fetch_timeout_ms=2000)
TICK_MS = 10
"""How often a voter's shell looks at its role: the leader may append, a follower fetches."""
REQUEST_TIMEOUT_MS = 500
"""A Fetch without an answer by then is given up and sent again."""
MAX_FETCH_RECORDS = 32
FAULTS_MS = 20_000
"""Faults happen in [0, FAULTS_MS); then every voter runs, the network heals and stops losing."""
APPEND_AFTER_FAULTS_MS = 1_000
"""Client records keep coming that long after the faults stop."""
LIVENESS_MS = 8_000
"""After the faults stop, the quorum has that long to elect a leader and commit every record:
a stale leader's check quorum (1.5 fetch timeouts, seen at its next poll) and two elections
(at most two election timeouts each) fit in it."""

Entry: TypeAlias = tuple[int, str]
"""(epoch, payload) of one record."""


class Fetch(NamedTuple):
    request_id: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int


class FetchAnswer(NamedTuple):
    request_id: int
    leader_epoch: int
    decision: FetchDecision
    records: tuple[Entry, ...]


class EpochAnswer(NamedTuple):
    """The answer to a BeginQuorumEpoch: the voter's epoch and leader."""

    epoch: int
    leader_id: int


Body: TypeAlias = VoteRequest | VoteAnswer | BeginQuorumEpoch | EndQuorumEpoch | Fetch | FetchAnswer | EpochAnswer


class SimLog:
    """The metadata log of one voter: every append is durable."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._epochs: list[int] = []
        self._starts: list[int] = []

    @property
    def log_end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else 0

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        index = bisect.bisect_right(self._epochs, epoch) - 1
        if epoch < 0 or index < 0:
            return -1, -1
        end = self._starts[index + 1] if index + 1 < len(self._starts) else len(self.entries)
        return self._epochs[index], end

    def append(self, entry: Entry) -> None:
        epoch = entry[0]
        assert epoch >= self.last_epoch, f"epoch {epoch} appended after epoch {self.last_epoch}"
        if not self._epochs or self._epochs[-1] != epoch:
            self._epochs.append(epoch)
            self._starts.append(len(self.entries))
        self.entries.append(entry)

    def truncate(self, end_offset: int) -> None:
        del self.entries[end_offset:]
        while self._starts and self._starts[-1] >= end_offset:
            self._starts.pop()
            self._epochs.pop()


@dataclass
class InFlightFetch:
    request: Fetch
    leader_id: int
    sent_ms: int


@dataclass
class Node:
    node_id: int
    rng: random.Random
    log: SimLog = field(default_factory=SimLog)
    stored: ElectionState | None = None
    quorum: Quorum | None = None
    incarnation: int = 0
    wake_at: float = float("inf")
    in_flight: InFlightFetch | None = None
    checked_high_watermark: int = 0
    """Offsets below it were checked against the committed entries in this incarnation."""
    leading_epoch: int = -1
    checked_as_leader: int = 0
    """Committed offsets checked against this node's log since it leads `leading_epoch`."""


@dataclass
class Coverage:
    elections: int = 0
    crashes: int = 0
    graceful_shutdowns: int = 0
    partitions: int = 0
    truncations: int = 0
    refusals: int = 0
    committed: int = 0
    converged_after_ms: int = -1


class QuorumSimulation:
    def __init__(self, seed: int, voters: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.voter_ids = list(range(1, voters + 1))
        self.nodes = {i: Node(i, random.Random(self.rng.getrandbits(64))) for i in self.voter_ids}
        self.now = 0
        self._queue: list[tuple[int, int, str, tuple[int, ...], Body | None]] = []
        self._seq = 0
        self._request_ids = 0
        self._records = 0
        self.trace: deque[str] = deque(maxlen=60)
        self.coverage = Coverage()
        # the network, per seed
        self.drop_rate = self.rng.choice([0.0, 0.02, 0.1, 0.2])
        self.latency_ms = self.rng.randint(1, 25)
        self.slow_rate = self.rng.choice([0.0, 0.03, 0.1])
        self.group = {i: 0 for i in self.voter_ids}
        self.faults = True
        self.appending = True
        # what the invariants remember over the whole run
        self.leaders: dict[int, int] = {}
        self.votes: dict[tuple[int, int], int] = {}
        self.entries: dict[tuple[int, int], str] = {}
        self.committed: list[Entry] = []
        self.commit_epoch: list[int] = []
        self.high_watermarks: dict[int, int] = {}

    # -- the event queue -----------------------------------------------------------------------

    def _push(self, at_ms: int, kind: str, args: tuple[int, ...], body: Body | None = None) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_ms, self._seq, kind, args, body))

    def run(self) -> Coverage:
        for node in self.nodes.values():
            self._start(node)
        self._push(self.rng.randint(100, 400), "chaos", ())
        self._push(FAULTS_MS, "heal", ())
        self._push(FAULTS_MS + APPEND_AFTER_FAULTS_MS, "stop_appending", ())
        end_ms = FAULTS_MS + LIVENESS_MS
        while self._queue and self._queue[0][0] <= end_ms:
            at_ms, _, kind, args, body = heapq.heappop(self._queue)
            self.now = at_ms
            self._dispatch(kind, args, body)
            self._check_invariants()
            if not self.appending and self._converged():
                self.coverage.converged_after_ms = self.now - FAULTS_MS
                return self.coverage
        raise AssertionError(f"no leader committing every record {LIVENESS_MS} ms after the faults stopped")

    def _dispatch(self, kind: str, args: tuple[int, ...], body: Body | None) -> None:
        if kind == "deliver":
            src, dst, incarnation = args
            node = self.nodes[dst]
            if node.quorum is None or node.incarnation != incarnation or self._cut(src, dst):
                return
            assert body is not None
            self.trace.append(f"{self.now} {src}->{dst} {body}"[:240])
            self._deliver(node, src, body)
            self._shell(node)
        elif kind in ("tick", "wake"):
            node = self.nodes[args[0]]
            if node.quorum is None or node.incarnation != args[1]:
                return
            if kind == "tick":
                self._tick(node)
                self._push(self.now + TICK_MS, "tick", args)
            elif node.wake_at == args[2]:
                node.wake_at = float("inf")
                self._execute(node, node.quorum.poll(self.now))
            self._shell(node)
        elif kind == "chaos":
            if self.faults:
                self._chaos()
                self._push(self.now + self.rng.randint(100, 400), "chaos", ())
        elif kind == "restart":
            node = self.nodes[args[0]]
            if node.quorum is None and node.incarnation == args[1]:
                self._start(node)
        elif kind == "heal":
            self.faults = False
            self.drop_rate = self.slow_rate = 0.0
            self.group = {i: 0 for i in self.voter_ids}
            self.trace.append(f"{self.now} heal")
            for node in self.nodes.values():
                if node.quorum is None:
                    self._start(node)
        elif kind == "stop_appending":
            self.appending = False

    # -- faults --------------------------------------------------------------------------------

    def _chaos(self) -> None:
        live = [n for n in self.nodes.values() if n.quorum is not None]
        leaders = [n for n in live if n.quorum is not None and n.quorum.role == "leader"]
        roll = self.rng.random()
        if roll < 0.15 and live:
            self._crash(self.rng.choice(live), graceful=False)
        elif roll < 0.22 and leaders:
            self._crash(self.rng.choice(leaders), graceful=True)
        elif roll < 0.30 and leaders:  # the leader is the one cut off, more often than chance
            cut_off = self.rng.choice(leaders).node_id
            self.group = {i: int(i == cut_off) for i in self.voter_ids}
            self.coverage.partitions += 1
            self.trace.append(f"{self.now} partition {self.group}")
        elif roll < 0.36:
            self.group = {i: self.rng.randint(0, 1) for i in self.voter_ids}
            self.coverage.partitions += 1
            self.trace.append(f"{self.now} partition {self.group}")
        elif roll < 0.50:
            self.group = {i: 0 for i in self.voter_ids}
            self.trace.append(f"{self.now} partition healed")

    def _crash(self, node: Node, graceful: bool) -> None:
        assert node.quorum is not None
        if graceful:
            self._execute(node, node.quorum.resign(self.now))
            self.coverage.graceful_shutdowns += 1
        else:
            self.coverage.crashes += 1
        self.trace.append(f"{self.now} {'shutdown' if graceful else 'crash'} {node.node_id}")
        node.quorum = None
        node.incarnation += 1
        node.in_flight = None
        node.wake_at = float("inf")
        self._push(self.now + self.rng.randint(50, 3000), "restart", (node.node_id, node.incarnation))

    def _start(self, node: Node) -> None:
        node.quorum = Quorum(node.node_id, self.voter_ids, node.stored, node.log, CONFIG, node.rng, self.now)
        node.checked_high_watermark = 0
        node.leading_epoch = -1
        self.high_watermarks[node.node_id] = 0
        self.trace.append(f"{self.now} start {node.node_id} {node.stored} log end {node.log.log_end_offset}")
        self._push(self.now + node.rng.randint(0, TICK_MS), "tick", (node.node_id, node.incarnation))
        self._shell(node)

    # -- the network ---------------------------------------------------------------------------

    def _cut(self, src: int, dst: int) -> bool:
        return self.group[src] != self.group[dst]

    def _send(self, src: Node, dst: int, body: Body) -> None:
        if self.rng.random() < self.drop_rate or self._cut(src.node_id, dst):
            return
        delay = self.rng.randint(1, self.latency_ms)
        if self.rng.random() < self.slow_rate:
            delay += self.rng.randint(50, 800)
        self._push(self.now + delay, "deliver", (src.node_id, dst, self.nodes[dst].incarnation), body)

    # -- the shell of one voter ----------------------------------------------------------------

    def _execute(self, node: Node, actions: Actions) -> None:
        """Persist, then send."""
        if actions.persist is not None:
            self._persist(node, actions.persist)
        for dst, message in actions.send:
            self._send(node, dst, message)

    def _persist(self, node: Node, state: ElectionState) -> None:
        before = node.stored or ElectionState(0)
        assert state.epoch >= before.epoch, f"node {node.node_id} persisted epoch {before.epoch} -> {state.epoch}"
        if state.voted_id != NO_VOTER:
            voted = self.votes.setdefault((node.node_id, state.epoch), state.voted_id)
            assert voted == state.voted_id, (
                f"node {node.node_id} voted for {voted} and then {state.voted_id} in epoch {state.epoch}")
        if state.epoch == before.epoch and before.voted_id != NO_VOTER:
            assert state.voted_id == before.voted_id, f"node {node.node_id} forgot its vote: {before} -> {state}"
        node.stored = state

    def _deliver(self, node: Node, src: int, body: Body) -> None:
        quorum = node.quorum
        assert quorum is not None
        if isinstance(body, VoteRequest):
            answer, actions = quorum.handle_vote(body, self.now)
            self._execute(node, actions)
            self._send(node, src, answer)
        elif isinstance(body, VoteAnswer):
            self._execute(node, quorum.handle_vote_answer(src, body, self.now))
        elif isinstance(body, BeginQuorumEpoch):
            self._execute(node, quorum.handle_begin_epoch(body, self.now)[1])
            self._send(node, src, EpochAnswer(quorum.epoch, quorum.leader_id))
        elif isinstance(body, EpochAnswer):
            self._execute(node, quorum.observed(body.epoch, body.leader_id, self.now))
        elif isinstance(body, EndQuorumEpoch):
            self._execute(node, quorum.handle_end_epoch(body, self.now))
        elif isinstance(body, Fetch):
            decision, _ = quorum.handle_fetch(src, body.epoch, body.fetch_offset, body.last_fetched_epoch, self.now)
            records: tuple[Entry, ...] = ()
            if isinstance(decision, FetchValid):
                records = tuple(node.log.entries[body.fetch_offset:body.fetch_offset + MAX_FETCH_RECORDS])
            self._send(node, src, FetchAnswer(body.request_id, quorum.epoch, decision, records))
        else:
            self._fetch_answered(node, src, body)

    def _fetch_answered(self, node: Node, src: int, answer: FetchAnswer) -> None:
        quorum = node.quorum
        assert quorum is not None
        in_flight = node.in_flight
        if in_flight is None or in_flight.request.request_id != answer.request_id:
            return  # an answer to a request given up
        node.in_flight = None
        decision = answer.decision
        if isinstance(decision, FetchRefused):
            self.coverage.refusals += 1
            self._execute(node, quorum.fetch_refused(decision, self.now))
            return
        request = in_flight.request
        if (quorum.fetch_leader != src or quorum.epoch != request.epoch
                or answer.leader_epoch != request.epoch or node.log.log_end_offset != request.fetch_offset
                or node.log.last_epoch != request.last_fetched_epoch):
            return  # this voter moved on since it asked
        if isinstance(decision, FetchDiverging):
            cut = quorum.truncation_offset(decision)
            assert cut >= quorum.high_watermark, (
                f"node {node.node_id} truncates to {cut} below its high watermark {quorum.high_watermark}")
            if cut < node.log.log_end_offset:
                self.coverage.truncations += 1
                self.trace.append(f"{self.now} {node.node_id} truncates {node.log.log_end_offset} -> {cut}")
                node.log.truncate(cut)
            return
        for entry in answer.records:
            self._append(node, entry)
        self._execute(node, quorum.fetched(answer.leader_epoch, decision.high_watermark, self.now))

    def _append(self, node: Node, entry: Entry) -> None:
        offset = node.log.log_end_offset
        known = self.entries.setdefault((offset, entry[0]), entry[1])
        assert known == entry[1], f"offset {offset} of epoch {entry[0]} is {known!r} and {entry[1]!r}"
        node.log.append(entry)

    def _tick(self, node: Node) -> None:
        quorum = node.quorum
        assert quorum is not None
        if quorum.role == "leader" and not quorum.pending_start and self.appending and node.rng.random() < 0.5:
            self._records += 1
            self._append(node, (quorum.epoch, f"r{self._records}"))
            quorum.appended(node.log.log_end_offset, self.now)
        elif quorum.fetch_leader is not None and (
                node.in_flight is None or self.now - node.in_flight.sent_ms >= REQUEST_TIMEOUT_MS):
            self._request_ids += 1
            request = Fetch(self._request_ids, quorum.epoch, node.log.log_end_offset, node.log.last_epoch)
            node.in_flight = InFlightFetch(request, quorum.fetch_leader, self.now)
            self._send(node, quorum.fetch_leader, request)

    def _shell(self, node: Node) -> None:
        """What the shell does after every event of a voter: a new leader's no-op, the next poll."""
        quorum = node.quorum
        if quorum is None:
            return
        if quorum.role == "leader" and quorum.pending_start:
            self.coverage.elections += 1
            self.trace.append(f"{self.now} {node.node_id} leads epoch {quorum.epoch}")
            self._append(node, (quorum.epoch, f"no-op {quorum.epoch}"))
            quorum.appended(node.log.log_end_offset, self.now)
        wake_at = self.now + quorum.until_next_poll_ms(self.now)
        if wake_at < node.wake_at:
            node.wake_at = wake_at
            self._push(wake_at, "wake", (node.node_id, node.incarnation, wake_at))

    # -- invariants ----------------------------------------------------------------------------

    def _check_invariants(self) -> None:
        for node in self.nodes.values():
            quorum = node.quorum
            if quorum is None:
                continue
            log = node.log
            high_watermark = quorum.high_watermark
            assert high_watermark >= self.high_watermarks[node.node_id], (
                f"node {node.node_id}'s high watermark went back {self.high_watermarks[node.node_id]} -> "
                f"{high_watermark}")
            assert high_watermark <= log.log_end_offset, (
                f"node {node.node_id}'s high watermark {high_watermark} past its log end {log.log_end_offset}")
            self.high_watermarks[node.node_id] = high_watermark
            leading = quorum.role == "leader"
            if leading:
                leader = self.leaders.setdefault(quorum.epoch, node.node_id)
                assert leader == node.node_id, f"epoch {quorum.epoch} has leaders {leader} and {node.node_id}"
            for offset in range(node.checked_high_watermark, high_watermark):
                entry = log.entries[offset]
                if offset < len(self.committed):
                    assert entry == self.committed[offset], (
                        f"node {node.node_id} has {entry} below its high watermark {high_watermark} at offset "
                        f"{offset}, where {self.committed[offset]} was committed")
                else:
                    assert leading, (f"node {node.node_id} (a {quorum.role}) has a high watermark {high_watermark} "
                                     f"past what any leader committed ({len(self.committed)})")
                    self.committed.append(entry)
                    self.commit_epoch.append(quorum.epoch)
                    self.coverage.committed += 1
            node.checked_high_watermark = high_watermark
            if leading:
                self._check_leader_completeness(node, quorum)

    def _check_leader_completeness(self, node: Node, quorum: Quorum) -> None:
        """A leader's log holds every entry committed by a leader of its epoch or an older one."""
        if node.leading_epoch != quorum.epoch:
            node.leading_epoch, node.checked_as_leader = quorum.epoch, 0
        entries = node.log.entries
        for offset in range(node.checked_as_leader, len(self.committed)):
            if self.commit_epoch[offset] <= quorum.epoch:
                assert offset < len(entries) and entries[offset] == self.committed[offset], (
                    f"leader {node.node_id} of epoch {quorum.epoch} lacks {self.committed[offset]} at offset "
                    f"{offset}, committed in epoch {self.commit_epoch[offset]}")
        node.checked_as_leader = len(self.committed)

    def _converged(self) -> bool:
        live = [n.quorum for n in self.nodes.values() if n.quorum is not None]
        leaders = [q for q in live if q.role == "leader"]
        if len(live) != len(self.nodes) or len(leaders) != 1 or leaders[0].pending_start:
            return False
        leader = leaders[0]
        end = self.nodes[leader.local_id].log.log_end_offset
        return all(q.epoch == leader.epoch and q.high_watermark == end
                   and self.nodes[q.local_id].log.log_end_offset == end for q in live)

    def describe(self) -> str:
        lines = [f"seed {self.seed}, {len(self.voter_ids)} voters, now {self.now} ms, {self.coverage}"]
        for node in self.nodes.values():
            q = node.quorum
            state = "down" if q is None else (f"{q.role} epoch {q.epoch} leader {q.leader_id} voted {q.voted_id} "
                                              f"hw {q.high_watermark}")
            lines.append(f"  node {node.node_id}: {state}, log end {node.log.log_end_offset}, "
                         f"last epoch {node.log.last_epoch}, stored {node.stored}")
        return "\n".join(lines)


def simulate(seed: int, voters: int) -> Coverage:
    simulation = QuorumSimulation(seed, voters)
    try:
        return simulation.run()
    except AssertionError as failure:
        trace = "\n".join(simulation.trace)
        raise AssertionError(f"{failure}\n{simulation.describe()}\nlast events:\n{trace}\n"
                             f"replay: KMIRROR_QUORUM_SIM_SEED={seed}") from failure


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_quorum_keeps_every_committed_record_and_recovers_after_faults(seed: int, voters: int) -> None:
    coverage = simulate(seed, voters)
    assert coverage.elections >= 1 and coverage.committed >= 1, coverage
