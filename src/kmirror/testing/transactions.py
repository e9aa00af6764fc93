"""Transactional history written offline into a stopped broker's partition log, as
transactional producers and a transaction coordinator would have written it, at offsets a
test chooses (interleaved, open or hanging transactions): data batches of a producer (epoch 0, consecutive
sequences), plain records and COMMIT/ABORT markers, in the partition's current leader
epoch. The broker recovers the log (and its transaction index) when it starts again."""

from __future__ import annotations

import time

from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.log import Log
from kmirror.log.outcomes import LogAppendInfo
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch


class TxnWriter:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}
        self.values: dict[int, bytes] = {}

    def _append(self, batch: bytes) -> int:
        info = self.log.append_as_leader(batch, self.log.latest_epoch or 0, origin=AppendOrigin.COORDINATOR)
        assert isinstance(info, LogAppendInfo), info
        return info.first_offset

    def data(self, pid: int, *values: bytes) -> int:
        seq = self.sequences.get(pid, 0)
        self.sequences[pid] = seq + len(values)
        batch = build_batch([(b"k", v, (), int(time.time() * 1000)) for v in values], producer_id=pid,
                            producer_epoch=0, base_sequence=seq, is_transactional=True)
        first = self._append(batch)
        self.values.update({first + i: v for i, v in enumerate(values)})
        return first

    def plain(self, value: bytes) -> int:
        first = self._append(build_batch([(b"k", value, (), int(time.time() * 1000))]))
        self.values[first] = value
        return first

    def end(self, kind: ControlType, pid: int) -> int:
        return self._append(build_control_batch(kind, pid, 0, int(time.time() * 1000)))
