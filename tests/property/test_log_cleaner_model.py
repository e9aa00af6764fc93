"""Model-based test of the log cleaner: writes, rolls, time, cleaning rounds (whole, with a
small key map, or interrupted by a machine crash at any file-system step of the swap) and
reopening, against the list of every record written.

Invariants after every step:
- every record in the log was written at that offset with that key and value (offsets
  keep their gaps; nothing is re-offset or altered) and the log end offset never moves back;
- the latest record of every key is in the log, except a tombstone, which may go only once
  `delete.retention.ms` has passed since it was written;
- below the end of the last completed round each key appears at most once;
- nothing at or after the end of any round (completed or crashed) was removed;
- the idempotent producer's last sequence and epoch survive cleaning and reopening;
- a second round at the same time keeps exactly the records the first one kept.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kmirror.log.cleaner.cleanable import log_to_clean
from kmirror.log.cleaner.cleaning import LogCleaning
from kmirror.log.cleaner.offset_map import OffsetMap
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.ports import ManualClock
from kmirror.records.batch import crc_ok, iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.record import decode_records
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000
DIR = "/data/t-0"
RETENTION_MS = 1000
CONFIG = LogConfig(cleanup_policy=("compact",), segment_bytes=500, index_interval_bytes=100,
                   delete_retention_ms=RETENTION_MS)
KEYS = [f"k{i}".encode() for i in range(6)]
PRODUCER = 7


class SimulatedCrash(Exception):
    pass


class CrashingFileSystem:
    """Delegates to a MemoryFileSystem and raises after `budget` mutating calls: the
    machine stops in the middle of whatever the cleaner was doing."""

    _MUTATING = {"append", "write_file", "truncate", "fsync", "mkdirs", "sync_dir", "rename", "delete"}

    def __init__(self, inner: MemoryFileSystem, budget: int) -> None:
        self._inner = inner
        self.budget = budget

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name not in self._MUTATING:
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.budget <= 0:
                raise SimulatedCrash(name)
            self.budget -= 1
            return target(*args, **kwargs)
        return call


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fs = MemoryFileSystem()
        self.clock = ManualClock(NOW)
        self.log = self._open()
        self.written: dict[int, tuple[bytes | None, bytes | None, int]] = {}  # offset -> key, value, time
        self.latest: dict[bytes, int] = {}
        self.cleaned_end = 0  # end of the last completed round
        self.touched_end = 0  # end of any round that reached its rewrite phase
        self.checkpoint: int | None = None
        self.next_seq = 0
        self.epoch = 0

    def _open(self) -> Log:
        log = Log.open(self.fs, DIR, TopicPartition("t", 0), CONFIG, self.clock, recovery_point=0)
        log.update_high_watermark(log.log_end_offset)
        return log

    def _append(self, raw: bytes, records: list[tuple[bytes | None, bytes | None]]) -> None:
        info = self.log.append_as_leader(raw, 0)
        assert not isinstance(info, Exception) and hasattr(info, "first_offset"), info
        for i, (key, value) in enumerate(records):
            self.written[info.first_offset + i] = (key, value, self.clock.now_ms())
            if key is not None:
                self.latest[key] = info.first_offset + i
        self.log.update_high_watermark(self.log.log_end_offset)

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4), tombstone=st.booleans(),
          codec=st.sampled_from([0, 0, 1, 4]))
    def write(self, keys: list[bytes], tombstone: bool, codec: int) -> None:
        records = [(k, None if tombstone and i == len(keys) - 1 else b"v%d" % len(self.written))
                   for i, k in enumerate(keys)]
        raw = build_batch([(k, v, (), self.clock.now_ms()) for k, v in records], compression=codec)
        self._append(raw, records)

    @rule(key=st.sampled_from(KEYS))
    def write_idempotent(self, key: bytes) -> None:
        raw = build_batch([(key, b"p%d" % self.next_seq, (), self.clock.now_ms())], producer_id=PRODUCER,
                          producer_epoch=self.epoch, base_sequence=self.next_seq)
        self._append(raw, [(key, b"p%d" % self.next_seq)])
        self.next_seq += 1

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(ms=st.integers(1, 1500))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)

    def _round(self, memory: int) -> LogCleaning:
        target = log_to_clean(self.log, self.checkpoint, self.clock.now_ms())
        return LogCleaning(self.log, target.first_dirty_offset, target.first_uncleanable_offset,
                           self.clock.now_ms(), OffsetMap(memory), step_bytes=200)

    @rule(small_map=st.booleans())
    def clean(self, small_map: bool) -> None:
        cleaning = self._round(600 if small_map else 1 << 20)
        for _ in cleaning.run():
            pass
        self.checkpoint = cleaning.end_offset
        self.cleaned_end = max(self.cleaned_end, cleaning.end_offset)
        self.touched_end = max(self.touched_end, cleaning.end_offset)

    @rule()
    def clean_again_changes_no_record(self) -> None:
        """Idempotence: a second round at the same time keeps exactly the records the first
        kept (only empty batches and segment grouping may change)."""
        self.clean(small_map=False)
        kept = self._log_records()
        self.clean(small_map=False)
        assert self._log_records() == kept

    @rule(budget=st.integers(0, 40))
    def clean_then_crash(self, budget: int) -> None:
        self.log.flush()
        crashing = CrashingFileSystem(self.fs, budget)
        self.log.fs = crashing  # type: ignore[assignment]
        for segment in self.log.segments:
            segment.fs = crashing  # type: ignore[assignment]
            for index in (segment.offset_index, segment.time_index, segment.txn_index):
                index.fs = crashing  # type: ignore[assignment]
        cleaning = self._round(1 << 20)
        completed = False
        try:
            for _ in cleaning.run():
                pass
            completed = True
        except SimulatedCrash:
            pass
        self.fs.crash()
        self.log = self._open()
        self.touched_end = max(self.touched_end, cleaning.end_offset)  # end_offset: set once the map is built
        if completed:
            self.cleaned_end = max(self.cleaned_end, cleaning.end_offset)
        self.checkpoint = None  # the checkpoint file was not written before the crash

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = self._open()

    # -- invariants -------------------------------------------------------------------------

    def _log_records(self) -> list[tuple[int, bytes | None, bytes | None, int]]:
        out = []
        for segment in self.log.segments:
            data = self.fs.read(segment.log_path, 0, segment.size)
            for pos, header in iter_batches(data):
                assert crc_ok(data, pos, header), f"batch at {header.base_offset}: bad CRC"
                records = decode_records(data, pos)
                assert header.records_count == len(records)
                if records and header.timestamp_type == 0:
                    assert header.max_timestamp == max(r.timestamp for r in records)
                out.extend((r.offset, r.key, r.value, r.timestamp) for r in records)
        return out

    @invariant()
    def records_are_the_written_ones_at_their_offsets(self) -> None:
        records = self._log_records()
        offsets = [r[0] for r in records]
        assert offsets == sorted(set(offsets))
        for offset, key, value, timestamp in records:
            assert self.written[offset] == (key, value, timestamp)  # a rebuilt batch keeps timestamps too
        assert self.log.log_end_offset == (max(self.written) + 1 if self.written else 0)

    @invariant()
    def latest_value_per_key_survives(self) -> None:
        present = {r[0] for r in self._log_records()}
        now = self.clock.now_ms()
        for key, offset in self.latest.items():
            _, value, written_at = self.written[offset]
            if value is None and now >= written_at + RETENTION_MS:
                continue
            assert offset in present, (key, offset)

    @invariant()
    def cleaned_section_holds_each_key_once_and_the_rest_is_untouched(self) -> None:
        records = self._log_records()
        below = [r[1] for r in records if r[0] < self.cleaned_end]
        assert len(below) == len(set(below))
        present = {r[0] for r in records}
        assert all(o in present for o in self.written if o >= self.touched_end)

    @invariant()
    def producer_state_is_kept(self) -> None:
        if self.next_seq:
            entry = self.log.producer_state.producers.get(PRODUCER)
            assert entry is not None and entry.last_seq == self.next_seq - 1 and entry.producer_epoch == self.epoch


CleanerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])
TestCleaner = CleanerMachine.TestCase
