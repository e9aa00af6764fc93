"""The share partition against a plain per-offset model (KIP-932 record states): acquire,
acknowledge, lock expiry and members leaving, in any order."""

import itertools

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kmirror.protocol.errors import ErrorCode
from kmirror.share.partition import AcknowledgeType, RecordState, SharePartition

S = RecordState
A = AcknowledgeType

MAX_IN_FLIGHT = 6
LIMIT = 3
LOCK = 100
MAX_BATCH = 4
MEMBERS = ("m1", "m2", "m3")
TERMINAL = (S.ACKNOWLEDGED, S.ARCHIVED)

# The log: (offsets skipped before the batch, batch size) pairs.
logs = st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 3, 9]), st.integers(1, MAX_BATCH)), min_size=1, max_size=12)


class Rec:
    """The model's record: a plain value per offset."""

    def __init__(self, state: RecordState, count: int, member: str | None = None, deadline: int | None = None):
        self.state, self.count, self.member, self.deadline = state, count, member, deadline


class SharePartitionMachine(RuleBasedStateMachine):
    @initialize(layout=logs)
    def setup(self, layout):
        self.log: list[tuple[int, int]] = []
        offset = 0
        for skip, size in layout:
            offset += skip
            self.log.append((offset, offset + size - 1))
            offset += size
        self.p = SharePartition(0, max_in_flight_records=MAX_IN_FLIGHT, delivery_count_limit=LIMIT,
                                lock_duration_ms=LOCK)
        self.model: dict[int, Rec] = {}
        self.start = self.end = 0
        self.now = 0
        self.previous_start = 0

    # the reference model
    def _get(self, offset):
        return self.model.get(offset) or Rec(S.AVAILABLE, 0)

    def _advance(self):
        while self.start < self.end and self.model[self.start].state in TERMINAL:
            self.start += 1

    def _release(self, offset):
        rec = self.model[offset]
        rec.state = S.ARCHIVED if rec.count >= LIMIT else S.AVAILABLE
        rec.member = rec.deadline = None

    def _take(self, offset, member, got):
        rec = self._get(offset)
        assert rec.state is S.AVAILABLE and rec.count < LIMIT
        self.model[offset] = Rec(S.ACQUIRED, rec.count + 1, member, self.now + LOCK)
        got.append((offset, rec.count + 1))

    def _model_acquire(self, member, batches, max_records):
        got: list[tuple[int, int]] = []
        for base, last in batches:
            if len(got) >= max_records:
                break
            for o in range(max(base, self.start), min(last + 1, self.end)):
                if self.model[o].state is S.AVAILABLE:
                    self._take(o, member, got)
            new = [o for o in range(base, last + 1) if o >= self.end]
            if not new:
                continue
            if self.end > self.start and new[0] >= self.start + MAX_IN_FLIGHT:
                break
            for o in range(self.end, new[0]):
                self.model[o] = Rec(S.ARCHIVED, 0)
            self.end = new[0]
            self._advance()
            for o in new:
                self._take(o, member, got)
            self.end = last + 1
        return got

    # rules
    @rule(member=st.sampled_from(MEMBERS), n=st.integers(1, 4), max_records=st.integers(1, 8))
    def acquire(self, member, n, max_records):
        frm = self.p.acquirable_from()
        available = [o for o in range(self.start, self.end) if self.model[o].state is S.AVAILABLE]
        if available:
            assert frm == available[0]
        else:
            assert frm == (self.end if self.end - self.start < MAX_IN_FLIGHT else None)
        if frm is None:
            return
        batches = [b for b in self.log if b[1] >= frm][:n]
        result = self.p.acquire(member, batches, self.now, max_records)
        got = [(o, r.delivery_count) for r in result for o in range(r.first_offset, r.last_offset + 1)]
        assert got == self._model_acquire(member, batches, max_records)
        for a, b in itertools.pairwise(result):  # maximal runs
            assert (b.first_offset, b.delivery_count) != (a.last_offset + 1, a.delivery_count)

    def _draw_range(self, data, member, lowest):
        held = [o for o, r in sorted(self.model.items()) if r.state is S.ACQUIRED and r.member == member and o >= lowest]
        if held and data.draw(st.booleans()):
            first = data.draw(st.sampled_from(held))
        else:
            first = data.draw(st.integers(max(lowest, self.start - 2), max(lowest, self.end + 1)))
        last = first + data.draw(st.integers(0, 3))
        if data.draw(st.booleans()):  # one type per offset
            return first, last, tuple(data.draw(st.sampled_from(A)) for _ in range(first, last + 1))
        return first, last, (data.draw(st.sampled_from(A)),)

    @rule(data=st.data(), member=st.sampled_from(MEMBERS), two=st.booleans())
    def acknowledge(self, data, member, two):
        batches = [self._draw_range(data, member, 0)]
        if two:
            batches.append(self._draw_range(data, member, batches[0][1] + 1))
        ok = all(self._get(o).state is S.ACQUIRED and self._get(o).member == member
                 for first, last, _ in batches for o in range(first, last + 1))
        result = self.p.acknowledge(member, batches)
        assert result is (ErrorCode.none if ok else ErrorCode.invalid_record_state)
        if not ok:
            return
        for first, last, types in batches:
            for i, o in enumerate(range(first, last + 1)):
                t = types[0] if len(types) == 1 else types[i]
                rec = self.model[o]
                if t is A.RELEASE:
                    self._release(o)
                else:
                    rec.state = S.ACKNOWLEDGED if t is A.ACCEPT else S.ARCHIVED
                    rec.member = rec.deadline = None
        self._advance()

    @rule(elapsed_ms=st.integers(0, 2 * LOCK))
    def expire_locks(self, elapsed_ms):
        self.now += elapsed_ms
        due = [o for o, r in self.model.items() if r.state is S.ACQUIRED and r.deadline <= self.now]
        assert self.p.expire_locks(self.now) == len(due)
        for o in due:
            self._release(o)
        self._advance()

    @rule(member=st.sampled_from(MEMBERS))
    def release_member(self, member):
        held = [o for o, r in self.model.items() if r.state is S.ACQUIRED and r.member == member]
        assert self.p.release_member(member) == len(held)
        for o in held:
            self._release(o)
        self._advance()

    @rule()
    def restart(self):
        self.p = SharePartition.from_state(self.p.start_offset, self.p.state_batches(),
                                           max_in_flight_records=MAX_IN_FLIGHT, delivery_count_limit=LIMIT,
                                           lock_duration_ms=LOCK)
        for o, r in self.model.items():
            if r.state is S.ACQUIRED:
                self._release(o)
        self._advance()

    # invariants
    @invariant()
    def matches_model(self):
        p = self.p
        assert p.start_offset >= self.previous_start
        self.previous_start = p.start_offset
        assert all(self._get(o).state in TERMINAL for o in range(p.start_offset))
        assert (p.start_offset, p.end_offset) == (self.start, self.end)
        assert p.end_offset - p.start_offset <= MAX_IN_FLIGHT + MAX_BATCH - 1
        for o in range(p.start_offset, p.end_offset + 2):
            rec = self._get(o)
            assert p.state_of(o) == (rec.state, rec.count), o
            assert p.acquired_by(o) == rec.member
        assert all(r.count <= LIMIT for r in self.model.values())
        assert p.acquired_count() == sum(r.state is S.ACQUIRED for r in self.model.values())
        deadlines = [r.deadline for r in self.model.values() if r.deadline is not None]
        assert p.next_deadline_ms() == min(deadlines, default=None)

    def teardown(self):
        if not hasattr(self, "p"):
            return
        # Drain: every lock expires, then "drain" takes and releases everything until nothing is left.
        p, now = self.p, self.now + LOCK
        p.expire_locks(now)
        log_end = self.log[-1][1] + 1
        for _ in range(LIMIT * log_end + 2):
            frm = p.acquirable_from()
            assert frm is not None
            batches = [b for b in self.log if b[1] >= frm]
            if not batches:
                break
            got = p.acquire("drain", batches, now, 10 ** 6)
            assert got and all(r.delivery_count <= LIMIT for r in got)
            for r in got:
                assert p.acknowledge("drain", [(r.first_offset, r.last_offset, (A.RELEASE,))]) is ErrorCode.none
        assert (p.start_offset, p.end_offset) == (log_end, log_end)


TestSharePartitionModel = SharePartitionMachine.TestCase
TestSharePartitionModel.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
