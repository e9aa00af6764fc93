"""`warm_up` loads every compiled function with the argument types a round uses, so a node's
first cleaning round compiles nothing on the event loop."""

from __future__ import annotations

from pathlib import Path

from numba.core.dispatcher import Dispatcher

from kmirror.log.cleaner import offset_map, record_filter, segment_reader
from kmirror.log.cleaner.cleanable import log_to_clean
from kmirror.log.cleaner.cleaning import LogCleaning
from kmirror.log.cleaner.offset_map import OffsetMap
from kmirror.log.cleaner.warm_up import warm_up
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.ports import ManualClock
from kmirror.records import record_scan
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000


def signatures() -> dict[str, int]:
    return {f"{m.__name__}.{name}": len(value.signatures)
            for m in (record_scan, offset_map, record_filter, segment_reader) for name, value in vars(m).items()
            if isinstance(value, Dispatcher) and value.py_func.__module__ == m.__name__}


def test_a_round_after_warm_up_compiles_nothing(tmp_path: Path) -> None:
    warm_up()
    before = signatures()
    clock = ManualClock(NOW)
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=2000, delete_retention_ms=1000)
    log = Log.open(OsFileSystem(), str(tmp_path / "t-0"), TopicPartition("t", 0), config, clock)
    txn = {"producer_id": 9, "producer_epoch": 0, "is_transactional": True}
    for i in range(40):
        log.append_as_leader(build_batch([(b"k%d" % (i % 5), b"v%d" % i, (), NOW), (b"k9", None, (), NOW)],
                                         compression=4 if i % 3 == 0 else 0), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch([(b"k1", b"t", (), NOW)], base_sequence=0, **txn), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_control_batch(ControlType.COMMIT, producer_id=9, producer_epoch=0, timestamp_ms=NOW),
                         leader_epoch=0, now_ms=NOW)
    log.roll()
    log.append_as_leader(build_batch([(b"tail", b"t", (), NOW)]), leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    target = log_to_clean(log, None, NOW)
    cleaning = LogCleaning(log, target.first_dirty_offset, target.first_uncleanable_offset, NOW, OffsetMap(1 << 20))
    for _ in cleaning.run():
        pass
    assert cleaning.stats.messages_written < cleaning.stats.messages_read
    assert signatures() == before
    log.close()
