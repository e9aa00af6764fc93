"""Model-based test of Log: append/roll/flush/truncate/reopen/kill/crash against a list model.

Invariants after every step: the log holds exactly the model's records at the model's
offsets, the LEO matches, and the epoch cache equals the naive cache built from the epochs of
the remaining batches. A machine crash (MemoryFileSystem.crash, optionally tearing unflushed
tails) may lose records, but the log after reopening is a prefix of the model that includes
everything flushed.
"""

from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kmirror.log.config import LogConfig
from kmirror.log.epoch_cache import EpochEntry
from kmirror.log.log import Log
from kmirror.log.outcomes import LogAppendInfo
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.records.record import iter_records
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=90)


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    values: tuple[bytes, ...]
    epoch: int
    raw: bytes = b""
    idempotent: bool = False

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.values)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fs = MemoryFileSystem()
        self.clock = ManualClock(NOW)
        self.checkpointed_recovery_point = 0
        self.log = self._open()
        self.batches: list[ModelBatch] = []
        self.durable = 0  # records guaranteed to survive a crash
        self.epoch = 0
        self.counter = 0

    def _open(self) -> Log:
        return Log.open(self.fs, "/data/t-0", TopicPartition("t", 0), CONFIG, self.clock,
                        recovery_point=self.checkpointed_recovery_point)

    @property
    def leo(self) -> int:
        return self.batches[-1].next_offset if self.batches else 0

    @rule(n=st.integers(1, 4), size=st.integers(0, 60), bump_epoch=st.booleans())
    def append(self, n: int, size: int, bump_epoch: bool) -> None:
        if bump_epoch:
            self.epoch += 1
        values = tuple(f"{self.counter + i}:".encode() + b"x" * size for i in range(n))
        self.counter += n
        info = self.log.append_as_leader(
            build_batch([(None, v, (), NOW + self.counter) for v in values]), self.epoch)
        assert isinstance(info, LogAppendInfo)
        assert info.first_offset == self.leo
        self.batches.append(ModelBatch(self.leo, values, self.epoch))

    @rule(n=st.integers(1, 3))
    def idempotent_append(self, n: int) -> None:
        """Producer 7 (epoch 0) sends its next sequence: always accepted at the LEO."""
        next_seq = sum(len(b.values) for b in self.batches if b.idempotent)
        values = tuple(f"{self.counter + i}:p".encode() for i in range(n))
        self.counter += n
        raw = build_batch([(None, v, (), NOW + self.counter) for v in values],
                          producer_id=7, producer_epoch=0, base_sequence=next_seq)
        info = self.log.append_as_leader(raw, self.epoch)
        assert isinstance(info, LogAppendInfo) and not info.duplicate
        assert info.first_offset == self.leo
        self.batches.append(ModelBatch(self.leo, values, self.epoch, raw, idempotent=True))

    @precondition(lambda self: any(b.idempotent for b in self.batches))
    @rule()
    def retry_last_idempotent(self) -> None:
        """A retried batch still in the log is acknowledged with its original offsets."""
        last = [b for b in self.batches if b.idempotent][-1]
        info = self.log.append_as_leader(last.raw, self.epoch)
        assert isinstance(info, LogAppendInfo) and info.duplicate
        assert (info.first_offset, info.last_offset) == (last.base_offset, last.next_offset - 1)

    @rule(count=st.integers(1, 8), size=st.integers(0, 120))
    def append_burst(self, count: int, size: int) -> None:
        for _ in range(count):
            self.append(n=2, size=size, bump_epoch=False)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.log.flush()
        self.durable = self.leo

    @rule()
    def checkpoint(self) -> None:
        self.checkpointed_recovery_point = self.log.recovery_point

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.leo))
        self.log.truncate_to(target)
        kept = [b for b in self.batches if b.next_offset <= target]
        self.batches = kept
        self.durable = min(self.durable, self.leo)

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.checkpointed_recovery_point = self.log.recovery_point
        self.log = self._open()
        self.durable = self.leo

    @rule()
    def kill(self) -> None:
        """The process dies: no close, but the page cache keeps every write."""
        self.log = self._open()

    @rule(tear=st.integers(0, 200))
    def crash(self, tear: int) -> None:
        self.fs.crash(lambda path, n: min(n, tear))
        self.log = self._open()
        self.checkpointed_recovery_point = min(self.checkpointed_recovery_point, self.log.log_end_offset)
        survivors = [b for b in self.batches if b.next_offset <= self.log.log_end_offset]
        assert sum(len(b.values) for b in survivors) >= self.durable
        self.batches = survivors
        assert self.leo == self.log.log_end_offset

    @invariant()
    def log_matches_model(self) -> None:
        assert self.log.log_end_offset == self.leo
        records = []
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset:
            read = self.log.read(offset, 1000)
            got = [r for r in iter_records(read.records) if r.offset >= offset]
            assert got, f"no progress at {offset}"
            records += got
            offset = got[-1].offset + 1
        expected = [(b.base_offset + i, v) for b in self.batches for i, v in enumerate(b.values)]
        assert [(r.offset, r.value) for r in records] == expected

    @invariant()
    def epoch_cache_matches_batches(self) -> None:
        naive: list[EpochEntry] = []
        for b in self.batches:
            if not naive or naive[-1].epoch != b.epoch:
                naive.append(EpochEntry(b.epoch, b.base_offset))
        assert self.log.epoch_cache.entries == naive


LogMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestLogModel = LogMachine.TestCase
